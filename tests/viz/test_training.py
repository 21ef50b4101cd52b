"""gptlib.viz.training: the loss-curve figure draws the runs it is given."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from gptlib.train.own_model import TrainingRun  # noqa: E402
from gptlib.viz.training import loss_curves_figure  # noqa: E402


def test_loss_curves_draw_each_run_against_steps_and_seconds_and_the_target():
    runs = [TrainingRun("mine", (50, 100), (10.0, 21.0), (9.0, 19.0), (2.5, 2.1), (2.6, 2.2)),
            TrainingRun("gptlib", (50, 100), (6.0, 12.0), (5.0, 11.0), (2.4, 2.0), (2.5, 2.1))]
    fig = loss_curves_figure(runs, target=2.0)
    by_step, by_time = fig.axes
    assert fig.get_label().endswith("the target 2.0 nats/char dotted; mine: from 2.50 at step 50 to 2.10 at step 100; "
                                    "gptlib: from 2.40 at step 50 to 2.00 at step 100.")
    for ax, x in ((by_step, "steps"), (by_time, "seconds")):
        lines = {line.get_label(): line for line in ax.get_lines()}
        for run in runs:
            np.testing.assert_array_equal(lines[run.name].get_xdata(), getattr(run, x))
            np.testing.assert_array_equal(lines[run.name].get_ydata(), run.val_losses)
        assert list(lines["2.0 nats/char"].get_ydata()) == [2.0, 2.0]
