"""gptlib.viz.stream: a bar per write at its contribution; a lens line per reading at its losses."""

import numpy as np
import pytest
import torch

pytest.importorskip("matplotlib")

from gptlib.decomposition import Attribution, LensReading  # noqa: E402
from gptlib.viz.stream import attribution_figure, logit_lens_figure  # noqa: E402


def test_each_write_is_a_bar_at_its_contribution_and_the_label_names_the_largest():
    attribution = Attribution(("E[x]", "P", "L0H0", "L0 MLP"), torch.tensor([0.5, -0.25, 2.0, -1.0]), rest=0.125,
                              logit=1.375)
    fig = attribution_figure(attribution, "demo")
    ax = fig.axes[0]
    np.testing.assert_array_equal([bar.get_height() for bar in ax.patches], [0.5, -0.25, 2.0, -1.0])
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["E[x]", "P", "L0H0", "L0 MLP"]
    assert "L0H0 (+2.00), L0 MLP (-1.00), E[x] (+0.50)" in fig.get_label()
    assert "the logit +1.38" in fig.get_label()
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("write into the stream", "direct contribution to the logit")


def test_the_y_axis_names_a_logit_difference_when_told():
    attribution = Attribution(("E[x]", "P"), torch.tensor([0.5, -0.25]), rest=0.0, logit=0.25)
    ax = attribution_figure(attribution, "demo", quantity="logit difference z_e - z_o").axes[0]
    assert ax.get_ylabel() == "direct contribution to the logit difference z_e - z_o"


def test_each_reading_is_a_line_through_its_losses():
    reading = LensReading(torch.tensor([4.0, 2.0, 1.5]), torch.tensor([3.0, 2.0, 1.0]), torch.tensor([0.1, 0.4, 0.6]))
    fig = logit_lens_figure({"trained": reading}, uniform=4.17)
    line = fig.axes[0].lines[0]
    np.testing.assert_array_equal(line.get_xdata(), [0, 1, 2])
    np.testing.assert_array_equal(line.get_ydata(), [4.0, 2.0, 1.5])
    assert "trained from 4.00 at depth 0 to 1.50 at depth 2" in fig.get_label()
