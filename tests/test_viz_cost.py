"""gptlib.viz.cost: the figures draw the numbers they are given (Section 6)."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from gptlib import COURSE_CONFIG, cost  # noqa: E402
from gptlib.viz.cost import cost_vs_T_figure, six_n_rule_error_figure  # noqa: E402


def test_cost_vs_T_draws_each_component_the_crossover_and_the_times():
    T_values = [64, 256, 1024]
    rows = {name: [count / T for T, count in zip(T_values, counts)] for name, counts in
            {"scores": [1.0, 16.0, 256.0], "MLP": [8.0, 32.0, 128.0]}.items()}
    seconds = [2e-6, 3e-6, 9e-6]
    crossover = cost.crossover_T(COURSE_CONFIG)
    fig = cost_vs_T_figure(T_values, rows, seconds, crossover)
    flops_ax, time_ax = fig.axes
    lines = {line.get_label(): line for line in flops_ax.get_lines()}
    for name, values in rows.items():
        np.testing.assert_array_equal(lines[name].get_xdata(), T_values)
        np.testing.assert_array_equal(lines[name].get_ydata(), values)
    assert lines[f"T = 2d + d_ff = {crossover}"].get_xdata()[0] == crossover == 6 * COURSE_CONFIG.d
    np.testing.assert_allclose(time_ax.get_lines()[0].get_ydata(), [2.0, 3.0, 9.0])  # in microseconds
    assert "against T from 64 to 1024" in fig.get_label() and "at T = 1024 the largest is scores." in fig.get_label()


def test_six_n_rule_heatmap_holds_the_errors_in_percent():
    T_values, d_values = [64, 512, 4096], [64, 256]
    errors = [[0.01, 0.1, 0.5], [0.005, 0.05, 0.3]]  # rows d, columns T
    fig = six_n_rule_error_figure(T_values, d_values, errors)
    ax = fig.axes[0]
    np.testing.assert_allclose(np.asarray(ax.collections[0].get_array()).reshape(2, 3), 100 * np.array(errors))
    assert [label.get_text() for label in ax.get_xticklabels()] == ["64", "512", "4096"]
    assert [label.get_text() for label in ax.get_yticklabels()] == ["64", "256"]
    assert fig.get_label().endswith("from 0% to 50%, above 20% (cyan contour) in 2 of 6 cells.")  # 0.5 and 0.3
