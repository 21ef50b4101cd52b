"""tests/support/once.py: a costly test input is made once per run, and a failed making is not kept."""

from concurrent.futures import ProcessPoolExecutor

import pytest

from tests.support.once import once_per_run


class Factory:
    """What once_per_run needs of pytest's tmp_path_factory: the worker's temporary folder."""

    def __init__(self, base):
        self.base = base

    def getbasetemp(self):
        return self.base


def count_and_make(folder):
    with (folder.parent / "calls").open("a") as calls:
        calls.write("x")
    (folder / "out").mkdir()
    return folder / "out"


def ask(base):
    return once_per_run(Factory(base), "thing", count_and_make)


def test_workers_asking_at_once_get_one_making(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")  # each worker's folder is a child of the run's
    workers = [tmp_path / f"popen-gw{i}" for i in range(4)]
    with ProcessPoolExecutor(4) as pool:
        made = list(pool.map(ask, workers))
    assert made == [tmp_path / "thing" / "out"] * 4 and (tmp_path / "calls").read_text() == "x"


def test_a_failed_making_leaves_nothing_and_the_next_caller_makes_it_again(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)

    def broken(folder):
        (folder / "half").write_text("written before the failure")
        raise RuntimeError("the build failed")

    with pytest.raises(RuntimeError, match="the build failed"):
        once_per_run(Factory(tmp_path), "thing", broken)
    assert once_per_run(Factory(tmp_path), "thing", count_and_make) == tmp_path / "thing" / "out"
    assert not (tmp_path / "thing" / "half").exists() and (tmp_path / "calls").read_text() == "x"
