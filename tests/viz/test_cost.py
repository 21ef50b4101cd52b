"""gptlib.viz.cost: the figures draw the numbers they are given (Section 6)."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib.colors import LogNorm  # noqa: E402

from gptlib import COURSE_CONFIG
from gptlib.analysis import cost  # noqa: E402
from gptlib.viz.cost import cost_vs_T_figure, six_n_rule_error_figure  # noqa: E402
from tests.support import notebook_files  # noqa: E402


def test_cost_vs_T_draws_each_component_the_crossover_and_the_times():
    T_values = [64, 256, 1024]
    rows = {name: [count / T for T, count in zip(T_values, counts)] for name, counts in
            {"scores": [1.0, 16.0, 256.0], "MLP": [8.0, 32.0, 128.0]}.items()}
    times = cost.TokenTimes(tuple(T_values), median=(2e-6, 3e-6, 9e-6), fastest=(1e-6, 3e-6, 8e-6),
                            slowest=(4e-6, 5e-6, 9e-6))
    crossover = cost.crossover_T(COURSE_CONFIG)
    fig = cost_vs_T_figure(T_values, rows, times, crossover)
    flops_ax, time_ax = fig.axes
    lines = {line.get_label(): line for line in flops_ax.get_lines()}
    for name, values in rows.items():
        np.testing.assert_array_equal(lines[name].get_xdata(), T_values)
        np.testing.assert_array_equal(lines[name].get_ydata(), values)
    assert lines[f"T = 2d + d_ff = {crossover}"].get_xdata()[0] == crossover == 6 * COURSE_CONFIG.d
    np.testing.assert_allclose(time_ax.get_lines()[0].get_ydata(), [2.0, 3.0, 9.0])  # the medians, in microseconds
    band = time_ax.collections[0].get_paths()[0].vertices  # fastest to slowest: its corners at the first and last T
    assert {(64.0, 1.0), (64.0, 4.0), (1024.0, 8.0), (1024.0, 9.0)} <= {tuple(np.round(v, 6)) for v in band}
    assert "against T from 64 to 1024" in fig.get_label() and "at T = 1024 the largest is scores." in fig.get_label()


def test_six_n_rule_heatmap_holds_the_errors_in_percent_on_a_log_scale_with_three_contours():
    T_values, d_values = [64, 512, 4096], [64, 256]
    errors = [[0.01, 0.1, 0.5], [0.005, 0.05, 1.5]]  # rows d, columns T
    fig = six_n_rule_error_figure(T_values, d_values, errors)
    ax = fig.axes[0]
    mesh, lines = ax.collections[0], ax.collections[1]
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(2, 3), 100 * np.array(errors))
    assert isinstance(mesh.norm, LogNorm) and (mesh.norm.vmin, mesh.norm.vmax) == (0.5, 150.0)
    np.testing.assert_allclose(lines.levels, [0.05, 0.2, 1.0])
    assert sorted(text.get_text() for text in ax.texts) == ["100%", "20%", "5%"]  # each contour labelled
    assert [label.get_text() for label in ax.get_xticklabels()] == ["64", "512", "4096"]
    assert [label.get_text() for label in ax.get_yticklabels()] == ["64", "256"]
    assert fig.get_label().endswith("from 0.5% to 150%; within 5% in 2 of 6 cells (d = 64 up to T = 64; "
                                    "d = 256 up to T = 64), above 20% in 2, above 100% in 1.")
    with pytest.raises(ValueError, match="must be positive for the log colour scale"):
        six_n_rule_error_figure(T_values, d_values, [[0.0, 0.1, 0.5], [0.005, 0.05, 1.5]])


def _corner(ax, row: int, column: int) -> str:
    """Where cell (row, column) of a heatmap is drawn: 'upper left', 'lower right', ..."""
    x, y = ax.transData.transform((column, row))
    (x0, y0), (x1, y1) = ax.transAxes.transform((0, 0)), ax.transAxes.transform((1, 1))
    return f"{'upper' if y > (y0 + y1) / 2 else 'lower'} {'right' if x > (x0 + x1) / 2 else 'left'}"


def test_notebook_07_names_the_corners_of_figure_7_2_where_they_are_drawn():
    """07's grid: the rule's best cell sits at the upper left and its worst at the lower right, as 07 says."""
    T_grid, d_grid = [32, 64, 128, 256, 512, 1024, 2048, 4096], [64, 128, 1024]  # notebook 07's grid
    errors = np.array([[cost.six_n_rule_error(COURSE_CONFIG.replace(d=d, T_max=T), T) for T in T_grid] for d in d_grid])
    ax = six_n_rule_error_figure(T_grid, d_grid, errors.tolist()).axes[0]
    best, worst = (np.unravel_index(pick(errors), errors.shape) for pick in (np.argmin, np.argmax))
    assert (_corner(ax, *best), _corner(ax, *worst)) == ("upper left", "lower right")
    text = "\n".join(cell.source for cell in notebook_files.cells(notebook_files.notebook("07")))
    assert "the upper left of Figure 7.2" in text and "lower right" in text
    assert "in the lower right of Figure 7.2" not in text.replace("\n", " ")
