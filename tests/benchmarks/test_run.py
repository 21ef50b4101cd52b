"""benchmarks.run's record of the machine: it is written whether or not the peers are installed."""

from importlib.metadata import PackageNotFoundError

from benchmarks import run


def test_the_machine_record_says_not_installed_for_a_missing_peer(monkeypatch):
    def version(name: str) -> str:
        if name == "transformer-lens":
            raise PackageNotFoundError(name)
        return "1.2.3"

    monkeypatch.setattr(run, "version", version)
    machine = run.machine()
    assert machine["transformer-lens"] == "not installed" and machine["transformers"] == "1.2.3"
    assert machine["cores"] >= 1 and machine["cpu"] is not None
