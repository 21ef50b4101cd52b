"""The Theorem 5.2 explorer widget and Project aside 5.2's variance data, without a browser."""



from gptlib import COURSE_CONFIG, GPT, component_table, theorem_5_2
from gptlib.viz.counting import ParameterCountExplorer


def test_explorer_shows_the_course_table_and_closed_form():
    explorer = ParameterCountExplorer()
    assert explorer.rows == component_table(GPT(COURSE_CONFIG))
    assert explorer.closed_form == 816_640  # the lecture's total
    assert "816,640 equals" in explorer.message and "12Ld^2 = 786,432" in explorer.message


def test_explorer_counts_large_tied_configs_on_meta():
    explorer = ParameterCountExplorer()
    explorer.V.value, explorer.T_max.value, explorer.d.value = 50257, 2048, 12288
    explorer.H.value, explorer.L.value, explorer.tie.value = 96, 96, True
    assert explorer.config.tie_weights
    assert explorer.rows[-1].parameters == explorer.closed_form == theorem_5_2(explorer.config)
    assert explorer.rows[-2].parameters == 2 * 12288  # tied: only the final LayerNorm is left in that row


def test_explorer_reports_invalid_combinations_instead_of_raising():
    explorer = ParameterCountExplorer()
    explorer.H.value = 5  # does not divide d = 128
    assert explorer.config is None and explorer.rows is None
    assert "H must divide d" in explorer.message
    assert "H must divide d" in explorer.status.value
    explorer.H.value = 8
    assert explorer.config.H == 8 and "equals" in explorer.message


def test_explorer_controls_carry_css_classes():
    explorer = ParameterCountExplorer()
    classes = {cls for control in (*explorer.controls.values(), explorer.tie, explorer.status, explorer.output)
               for cls in control._dom_classes}
    assert classes == {f"gptlib-count-{n}" for n in ("V", "Tmax", "d", "H", "L", "tie", "message", "output")}
