"""The Theorem 5.2 explorer widget and Project aside 5.2's variance data, without a browser."""

import re
from decimal import Decimal

import pytest

from gptlib import (
    COURSE_CONFIG,
    GPT,
    GPTConfig,
    component_table,
    format_table,
    theorem_5_2,
)
from gptlib.viz.counting import ParameterCountExplorer, whole_number
from gptlib.viz.explorer import typed_number


def test_explorer_shows_the_course_table_and_closed_form():
    explorer = ParameterCountExplorer()
    assert explorer.rows == component_table(GPT(COURSE_CONFIG))
    assert explorer.closed_form == 816_640  # the lecture's total
    assert "816,640 equals" in explorer.message and "12Ld^2 = 786,432" in explorer.message
    assert explorer.message in explorer.status.value


def set_sizes(explorer, **typed):
    for name, text in typed.items():
        getattr(explorer, name).value = text


def test_explorer_counts_large_tied_configs_on_meta():
    explorer = ParameterCountExplorer()
    set_sizes(explorer, V="50,257", T_max="2048", d="12_288", H="96", L="96")
    explorer.tie.value = True
    assert explorer.config.tie_weights and explorer.config.d == 12288 and explorer.config.V == 50257
    assert explorer.rows[-1].parameters == explorer.closed_form == theorem_5_2(explorer.config)
    assert explorer.rows[-2].parameters == 2 * 12288  # tied: only the final LayerNorm is left in that row


@pytest.mark.parametrize(
    "name, typed, words",
    [
        ("H", "5", "H must divide d"),
        ("d", "12.5", "d: 12.5 is not a whole number"),
        ("V", "abc", "V: 'abc' is not a number"),
        ("V", "0", "V must be"),
        ("L", "-3", "L must be"),
        ("L", "100000", "L must be an integer <= 10000, got 100000"),
        ("d", "4000000000", "invalid configuration"),  # W_1 would have 6.4e19 entries: more than int64 counts
    ],
)
def test_explorer_refuses_what_it_cannot_count_in_words_and_keeps_the_picture(name, typed, words):
    explorer = ParameterCountExplorer()
    picture = bytes(explorer.image.value)
    set_sizes(explorer, **{name: typed})
    assert explorer.config is None and explorer.rows is None
    assert explorer.message.startswith("Cannot draw:") and words in explorer.message
    assert bytes(explorer.image.value) == picture and "gptlib-stale" in explorer.image._dom_classes
    set_sizes(explorer, **{name: str(getattr(COURSE_CONFIG, name))})
    assert explorer.closed_form == 816_640 and "gptlib-stale" not in explorer.image._dom_classes


def test_typed_numbers_are_used_exactly_never_rounded_or_clamped():
    explorer = ParameterCountExplorer()
    set_sizes(explorer, V="1e3")
    assert explorer.config.V == 1000
    set_sizes(explorer, V="2000000")  # beyond any old limit: counted as typed
    assert explorer.config.V == 2_000_000 and explorer.closed_form == theorem_5_2(COURSE_CONFIG.replace(V=2_000_000))
    assert whole_number("V", " 99,999,999 ") == 99_999_999


@pytest.mark.parametrize(
    "typed, reason",
    [(" abc ", "d: 'abc' is not a number"), ("", "d: '' is not a number"), ("-inf", "d: '-inf' is not a finite number"),
     ("nan", "d: 'nan' is not a finite number")],
)
def test_typed_number_and_whole_number_refuse_in_the_same_words(typed, reason):
    for parse in (typed_number, whole_number):
        with pytest.raises(ValueError, match=f"^{re.escape(reason)}$"):
            parse("d", typed)


def test_typed_number_is_exact_and_ignores_only_the_separators_it_is_given():
    assert typed_number("d", " 0.1 ") == Decimal(1) / 10  # exact: a float would hold the double nearest 0.1
    assert typed_number("d", "1,024", separators=",") == 1024
    with pytest.raises(ValueError, match=re.escape("d: '1,5' is not a number")):
        typed_number("d", "1,5")  # a decimal comma is not read as 15 where "," is no separator


def test_explorer_keeps_every_other_field_of_its_config():
    toy = GPTConfig(V=65, T_max=32, d=64, H=4, L=2, attn_only=True)
    explorer = ParameterCountExplorer(toy)
    assert explorer.config == toy
    assert explorer.rows[-1].parameters == explorer.closed_form
    assert explorer.closed_form == sum(p.numel() for p in GPT(toy).parameters())  # 45,696 for this toy


def test_the_table_stays_aligned_at_twelve_digit_counts():
    explorer = ParameterCountExplorer()
    set_sizes(explorer, V="50257", T_max="2048", d="12288", H="96", L="96")
    table = format_table(explorer.rows)
    assert len(f"{explorer.rows[-1].parameters:,}") == 15  # 174,6xx,xxx,xxx: twelve digits
    lines = table.splitlines()
    assert len({len(line) for line in lines}) == 1  # every row as wide as the header
    assert len({line.index("%") for line in lines[1:]}) == 1


def test_explorer_controls_carry_css_classes():
    explorer = ParameterCountExplorer()
    classes = {cls for control in (*explorer.controls.values(), explorer.tie, explorer.status, explorer.image)
               for cls in control._dom_classes}
    assert classes == {f"gptlib-count-{n}" for n in ("V", "Tmax", "d", "H", "L", "tie", "message", "output")}
