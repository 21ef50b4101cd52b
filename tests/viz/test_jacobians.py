"""gptlib.viz.jacobians: each figure draws the numbers it is given (Section 3, Exercise 7)."""

import numpy as np
import pytest
import torch

pytest.importorskip("matplotlib")

from gptlib.analysis.jacobians import DepthStudyRow  # noqa: E402
from gptlib.viz import jacobians as jacobian_figures  # noqa: E402


def ydata(line):
    return np.asarray(line.get_ydata(), dtype=float)


def test_block_spectrum_draws_each_placements_values_floored_for_the_log_scale():
    values = {"pre": torch.tensor([3.0, 1.0, 1.0]), "post": torch.tensor([2.0, 0.5, 0.0], dtype=torch.float64)}
    fig = jacobian_figures.block_spectrum_figure(values)
    lines = fig.axes[0].get_lines()
    assert fig.get_label().endswith("pre-norm: 3 values, largest 3.0e+00, 0 below 1e-06; "
                                    "post-norm: 3 values, largest 2.0e+00, 1 below 1e-06.")
    np.testing.assert_array_equal(ydata(lines[0]), [3.0, 1.0, 1.0])
    np.testing.assert_array_equal(ydata(lines[1]), [2.0, 0.5, 1e-17])  # an exact 0 drawn at the floor


def test_depth_study_draws_max_median_min_against_L_and_the_deepest_gradients():
    rows = [DepthStudyRow(1, torch.tensor([4.0, 2.0, 1.0]), torch.tensor([1.0, 2.0])),
            DepthStudyRow(3, torch.tensor([9.0, 3.0, 0.5]), torch.tensor([1.0, 2.0, 3.0, 4.0]))]
    fig = jacobian_figures.depth_study_figure({"pre": rows})
    left, right = fig.axes
    assert fig.get_label().endswith("at layer 0 over at layer 3: pre-norm: 2.5e-01.")  # 1.0 / 4.0
    largest, median, smallest = left.get_lines()
    np.testing.assert_array_equal(largest.get_xdata(), [1, 3])
    np.testing.assert_array_equal(ydata(largest), [4.0, 9.0])
    np.testing.assert_array_equal(ydata(median), [2.0, 3.0])
    np.testing.assert_array_equal(ydata(smallest), [1.0, 0.5])
    np.testing.assert_array_equal(ydata(right.get_lines()[0]), [1.0, 2.0, 3.0, 4.0])
    assert right.get_title().endswith("L = 3")
