"""gptlib.viz.residual: each figure draws the numbers it is given (Section 3, Project aside 5.2)."""

import numpy as np
import pytest
import torch

pytest.importorskip("matplotlib")

from gptlib.analysis.residual import BlockDropLosses, BranchWriteRatios, WriteVariance  # noqa: E402
from gptlib.viz import residual as figures  # noqa: E402


def ydata(line):
    return np.asarray(line.get_ydata(), dtype=float)


def test_stream_figure_draws_norms_and_cosines_per_model():
    norms = {"random": torch.tensor([1.0, 1.5, 2.0])}
    cosines = {"random": torch.tensor([1.0, 0.9, 0.7], dtype=torch.float64)}
    fig = figures.stream_figure(norms, cosines)
    left, right = fig.axes
    assert fig.get_label().endswith("random: norm 1.0e+00 at l = 0, 2.0e+00 at l = 2, cosine 0.70 there.")
    np.testing.assert_array_equal(ydata(left.get_lines()[0]), [1.0, 1.5, 2.0])
    np.testing.assert_array_equal(ydata(right.get_lines()[0]), [1.0, 0.9, 0.7])


def test_small_updates_draws_both_ratios_and_each_blocks_loss_increase():
    ratios = BranchWriteRatios(attn=torch.tensor([0.1, 0.2]), mlp=torch.tensor([0.3, 0.4]))
    drops = BlockDropLosses(base=torch.tensor(1.5), dropped=torch.tensor([2.0, 1.75]))
    fig = figures.small_updates_figure(ratios, drops)
    left, right = fig.axes
    assert fig.get_label().endswith("largest for block 0 (0.50 nats).")
    heights = [patch.get_height() for patch in left.patches]
    np.testing.assert_allclose(heights, [0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose([patch.get_height() for patch in right.patches], [0.5, 0.25])


def test_init_variance_draws_both_runs_and_the_idealized_lines():
    L_values = [1, 4]
    unscaled = [WriteVariance(accumulated=2.0, independent=2.1), WriteVariance(accumulated=8.0, independent=7.0)]
    scaled = [WriteVariance(accumulated=1.0, independent=1.1), WriteVariance(accumulated=1.2, independent=1.0)]
    ax = figures.init_variance_figure(L_values, scaled, unscaled).axes[0]
    lines = {line.get_label(): ydata(line) for line in ax.get_lines()}
    np.testing.assert_array_equal(lines["W_O, W_2 std 0.02: measured Var(X^(L) - X^(0))"], [2.0, 8.0])
    np.testing.assert_array_equal(lines["W_O, W_2 std 0.02/sqrt(2L): sum of write variances"], [1.1, 1.0])
    np.testing.assert_array_equal(lines["idealized 2L v"], [2.0, 8.0])  # v = 2.0 / 2, one write at L = 1
    np.testing.assert_array_equal(lines["idealized 2L (v / 2L) = v"], [1.0, 1.0])
    assert ax.get_title() == "from L = 1 to 4: unscaled variance x4.0 (2L: x4), scaled x1.20"  # 8.0 / 2.0, 1.2 / 1.0
    assert ax.figure.get_label().endswith("at L = 4 the unscaled variance is about 7 times the scaled one.")  # 8.0 / 1.2
