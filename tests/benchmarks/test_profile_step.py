"""benchmarks.profile_step: the per-operator comparison of gptlib's training step with the nanoGPT-style reference."""

import pytest

from benchmarks import profile_step

pytestmark = pytest.mark.slow  # starts processes or trains: `pytest -m slow` (not in `pytest -m unit`)


def test_profile_lists_operators_and_their_differences(capsys, one_thread):
    totals = profile_step.main(["--rounds", "1", "--top", "4", "--threads", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("course: B=32, T=64, 1 threads")
    rows = lines[2:]
    assert len(rows) == 4
    for row in rows:  # each row's difference is its two columns' difference
        *_, g, n, diff = row.split()
        assert float(diff) == pytest.approx(float(g) - float(n), abs=2e-3)
    for lib in profile_step.LIBRARIES:  # both libraries ran their matmuls and the loss
        assert totals[lib]["aten::mm"] > 0 and totals[lib]["aten::nll_loss_forward"] > 0


def test_profile_refuses_bad_flags():
    with pytest.raises(SystemExit):
        profile_step.main(["--rounds", "0"])
