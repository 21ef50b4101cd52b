"""gptlib.viz.positionwise: the GELU figure draws the exact GELU, ReLU and the tanh form's error."""

import pytest
import torch

pytest.importorskip("matplotlib")

import torch.nn.functional as F  # noqa: E402

from gptlib.viz.positionwise import gelu_figure  # noqa: E402


def test_gelu_figure_draws_torchs_gelu_relu_and_the_tanh_gap():
    t = torch.linspace(-4, 4, 81, dtype=torch.float64)
    fig = gelu_figure(t)
    left, right = fig.axes
    exact, relu = left.get_lines()
    torch.testing.assert_close(torch.as_tensor(exact.get_ydata()), F.gelu(t, approximate="none"))
    torch.testing.assert_close(torch.as_tensor(relu.get_ydata()), t.clamp_min(0))
    gap = F.gelu(t, approximate="tanh") - F.gelu(t, approximate="none")
    torch.testing.assert_close(torch.as_tensor(right.get_lines()[0].get_ydata()), gap)
    assert fig.get_label().endswith(f"for t from -4 to 4. Right: the tanh form minus the exact GELU, at most "
                                    f"{gap.abs().max():.1e} in size.")
