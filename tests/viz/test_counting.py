"""The Theorem 5.2 explorer widget and Project aside 5.2's variance data, without a browser."""

import json
import re
import shutil
import subprocess

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


def test_explorer_shows_the_course_table_and_closed_form():
    explorer = ParameterCountExplorer()
    assert explorer.rows == component_table(GPT(COURSE_CONFIG))
    assert explorer.closed_form == 816_640  # the lecture's total
    assert "816,640 equals" in explorer.message and "12Ld^2 = 786,432" in explorer.message
    assert explorer.answered == {"typed": explorer.typed, "tie": False}  # the page shows it as the measured count


def set_sizes(explorer, **typed):
    for name, text in typed.items():
        explorer.type_in(name, text)


def test_explorer_counts_large_tied_configs_on_meta():
    explorer = ParameterCountExplorer()
    set_sizes(explorer, V="50,257", T_max="2048", d="12_288", H="96", L="96")
    explorer.tie = True
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
        ("V", "1e19", "V must be an integer <= 9223372036854775807, got 1e19"),  # was torch's TypeError
        ("T_max", "99999999999999999999", "T_max must be an integer <= 9223372036854775807, got 99999999999999999999"),
        ("d", "1e300", "d must be an integer <= 9223372036854775807, got 1e300"),
        ("d", "1e400", "d must be an integer in [1, 9223372036854775807], got 1e400 (more than 400 digits)"),
        ("V", "9" * 400, "V must be an integer <= 9223372036854775807, got 999999999999…(400 characters)"),
        ("V", "1e999999999", "V must be an integer in [1, 9223372036854775807], got 1e999999999 (more "),  # a billion digits
        ("V", "1e9999999999999999999999", "V must be an integer in [1, 9223372036854775807], got 1e9999999"),  # no Decimal
        ("V", "1e" + "9" * 5000, "V must be an integer in [1, 9223372036854775807], got 1e9999999999…(5002 characters)"),
        ("L", "-1e500", "L must be an integer in [1, 10000], got -1e500 (more than 400 digits)"),  # L's own bound
        ("V", "0e500", "V must be an integer >= 1, got 0"),  # zero, whatever its exponent
        ("V", "1e-99999999999999999999", "V: 1e-99999999999999999999 is not a whole number"),
    ],
)
def test_explorer_refuses_what_it_cannot_count_in_words_and_keeps_the_picture(name, typed, words):
    explorer = ParameterCountExplorer()
    picture = explorer.static_png()
    set_sizes(explorer, **{name: typed})
    assert explorer.config is None and explorer.rows is None and explorer.stale
    assert explorer.message.startswith("Cannot draw:") and words in explorer.message and len(explorer.message) < 200
    assert explorer.static_png() == picture and explorer.answered["typed"][name] == typed
    set_sizes(explorer, **{name: str(getattr(COURSE_CONFIG, name))})
    assert explorer.closed_form == 816_640 and not explorer.stale


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
     ("nan", "d: 'nan' is not a finite number"), ("1,5.5", "d: 1,5.5 is not a whole number"),
     ("٣", "d: '٣' is not a number")],  # an Arabic-Indic three: the boxes read ASCII digits only, as the page does
)
def test_whole_number_refuses_in_words(typed, reason):
    with pytest.raises(ValueError, match=f"^{re.escape(reason)}$"):
        whole_number("d", typed)


def test_whole_number_is_exact():
    assert whole_number("d", "1.000") == 1 and whole_number("d", "2.50e1") == 25 and whole_number("d", "-0") == 0
    assert whole_number("d", "0e-99999999999999999999999") == 0
    assert whole_number("d", "1" * 400) == int("1" * 400)  # 400 digits is still read, exactly


@pytest.mark.parametrize("typed", [65, None, ["65"], b"65"])
def test_a_size_that_is_not_text_is_refused_naming_its_box(typed):
    explorer = ParameterCountExplorer()
    with pytest.raises(ValueError, match=f"^V: a size box holds text \\(a str\\), got {re.escape(repr(typed))}$"):
        explorer.type_in("V", typed)
    assert explorer.typed["V"] == "65" and explorer.closed_form == 816_640  # nothing changed
    explorer.typed = {**explorer.typed, "V": typed}  # what a page or code may send: answered, not a crash
    assert explorer.stale and explorer.config is None
    assert explorer.message == f"Cannot draw: invalid configuration: V: a size box holds text (a str), got {typed!r} " \
                               "(the picture still shows the last valid input)."
    assert explorer.answered == {"typed": explorer.typed, "tie": False}  # the page stops saying "Measuring"


@pytest.mark.parametrize("tie", [1, 0, "True", None])
def test_the_tie_switch_takes_only_true_or_false(tie):
    explorer = ParameterCountExplorer()
    with pytest.raises(ValueError, match=f"^tie must be True or False, got {re.escape(repr(tie))}$"):
        explorer.tie = tie
    assert explorer.tie is False and explorer.closed_form == 816_640


def test_after_a_refusal_the_static_copy_shows_the_last_valid_input():
    explorer = ParameterCountExplorer()
    explorer.type_in("L", "6")
    six_blocks, state = explorer.static_png(), explorer.state()
    explorer.type_in("L", "abc")
    assert explorer.stale
    assert explorer.static_png() == six_blocks and explorer.state() == state  # not the defaults, not greyed
    assert state["typed"]["L"] == "6" and state["stale"] is False and state["live"] is False
    assert "L=6" in explorer.alt_text()


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


def test_explorer_names_a_config_that_is_not_one():
    with pytest.raises(ValueError, match=re.escape("config must be a GPTConfig, got None")):
        ParameterCountExplorer(None)
    with pytest.raises(ValueError, match="name must be one of"):
        ParameterCountExplorer().type_in("W", "3")


NODE = shutil.which("node")
JS_CONFIGS = [COURSE_CONFIG, COURSE_CONFIG.replace(tie_weights=True), GPTConfig(V=65, T_max=32, d=64, H=4, L=2, attn_only=True),
              GPTConfig(V=50257, T_max=2048, d=12288, H=96, L=96), GPTConfig(V=7, T_max=3, d=6, H=2, L=5, d_ff=5)]
JS_TYPED = ["65", " 50,257 ", "12_288", "1e3", "1.5e3", "12.5", "abc", "", "nan", "-inf", "99999999999999999999", "1e400",
            "0.0", "-3", "1.000", "1e-2", "2.50e1", "0e500", "-0", "1e9999999999999999999999", "1e-9999999999999999999999",
            "0e-99999999999999999999999", "1e" + "9" * 5000, "1e-" + "9" * 5000, "1" * 400, "1" * 401, "٣", "1,5.5"]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_front_ends_theorem_and_reading_of_sizes_are_the_kernels(tmp_path):
    """js/counting.js evaluates Theorem 5.2 in the page and reads typed sizes itself: both must agree with gptlib."""
    source = tmp_path / "count.mjs"
    source.write_text(ParameterCountExplorer._esm)
    configs = [{"V": c.V, "T_max": c.T_max, "d": c.d, "L": c.L, "d_ff": c.d_ff, "tie": c.tie_weights,
                "attn_only": c.attn_only} for c in JS_CONFIGS]
    runner = tmp_path / "run.mjs"
    runner.write_text(
        f"import {{theorem52, wholeNumber}} from {json.dumps(source.as_uri())};\n"
        "const big = (c) => Object.fromEntries(Object.entries(c).map(([k, v]) => [k, typeof v === 'number' ? BigInt(v) : v]));\n"
        f"const totals = {json.dumps(configs)}.map((c) => String(theorem52(big(c)).total));\n"
        f"const read = {json.dumps(JS_TYPED)}.map((t) => {{ try {{ return String(wholeNumber('d', t)); }}"
        " catch (e) { return 'error: ' + e.message; } });\n"
        "console.log(JSON.stringify({totals, read}));\n")
    done = json.loads(subprocess.run([NODE, str(runner)], capture_output=True, text=True, timeout=60, check=True).stdout)
    assert done["totals"] == [str(theorem_5_2(c)) for c in JS_CONFIGS]
    assert done["totals"][2] == str(sum(p.numel() for p in GPT(JS_CONFIGS[2]).parameters()))
    for typed, read in zip(JS_TYPED, done["read"], strict=True):
        try:
            expected = str(whole_number("d", typed))
        except ValueError as error:
            expected = f"error: {error}"
        assert read == expected, typed
