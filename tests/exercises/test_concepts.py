"""Concept questions: each right answer passes, each wrong one fails with its own reason, and in the
notebooks every question is asked in Markdown above an unanswered check (its answer off screen)."""

import dataclasses
import functools
import json
import random
import re

import pytest
import torch

from gptlib import exercises
from gptlib.analysis import attention, cost, layernorm
from gptlib.analysis.counting import measured_table
from gptlib.checking import FAILED, NOT_ATTEMPTED, PASSED, sealed, shifted_seeds
from gptlib.config import COURSE_CONFIG, GPTConfig
from gptlib.exercises import concepts as concept_checks
from gptlib.exercises.answers import concepts
from gptlib.exercises.jacobians import STATEMENTS
from gptlib.model import GPT, attention_matrices_formed
from tests.support import notebook_files

CHOICES = [(q, spec) for q, spec in concepts.QUESTIONS.items() if isinstance(spec, concepts.Choice)]
NUMBERS = [(q, spec) for q, spec in concepts.QUESTIONS.items() if isinstance(spec, concepts.Number)]
ASKED_IN = ["01", "02", "03", "04", "05", "06", "07", "10"]  # notebooks that ask at least three


@pytest.mark.parametrize("question, spec", CHOICES)
def test_a_choice_passes_only_for_its_letter_and_names_why_each_other_letter_fails(question, spec):
    right = exercises.check_concept(question, f" {spec.answer.upper()} ")
    assert right.status == PASSED and right.mistakes == ()
    for letter, reason in spec.wrong.items():
        verdict = exercises.check_concept(question, letter)
        assert verdict.status == FAILED and reason in verdict.message
        assert verdict.mistakes == (reason.id,)  # the class report counts it under this identifier
    assert len(spec.letters()) >= 3 and spec.answer not in spec.wrong


@pytest.mark.parametrize("question, spec", NUMBERS)
def test_a_number_passes_only_for_its_value_and_names_each_typical_mistake(question, spec):
    right = spec.answer()
    assert exercises.check_concept(question, right).status == PASSED
    assert exercises.check_concept(question, float(right)).status == PASSED
    wrong = {name: mistake() for name, mistake in spec.mistakes.items()}
    assert right not in wrong.values() and len(set(wrong.values())) == len(wrong)  # each mistake is told apart
    for name, value in wrong.items():
        verdict = exercises.check_concept(question, value)
        assert verdict.status == FAILED and verdict.message.startswith(name) and verdict.mistakes == (name.id,)
    stray = next(n for n in range(right + 1, right + 10) if n not in wrong.values())
    unnamed = exercises.check_concept(question, stray)
    assert unnamed.status == FAILED and unnamed.mistakes == () and unnamed.message.startswith(f"{stray:,} is not it")


def _numel(params) -> int:
    return sum(p.numel() for p in params)


def _window(T: int, w: int, L: int):
    """Question 6.3: pairs (t, s) beyond L blocks' reach, counted pair by pair: s > t, or t - s > L (w - 1);
    the mistakes: the causal mask alone, one block's reach, a reach of L w."""
    pairs = [(t, s) for t in range(T) for s in range(T)]
    beyond = lambda reach: sum(s > t or t - s > reach for t, s in pairs)  # noqa: E731
    return beyond(L * (w - 1)), [sum(s > t for t, s in pairs), beyond(w - 1), beyond(L * w)]


def _bare_block(d: int):
    """Question 5.3: a block built from torch's own modules, no Linear with a bias (d_ff = 4d) and two RMSNorms with
    their gain; the mistakes: Theorem 5.2's block (12 d^2 + 10 d), with the shifts a LayerNorm has, without the gains."""
    nn = torch.nn
    linears = [nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False), nn.Linear(d, 4 * d, bias=False),
               nn.Linear(4 * d, d, bias=False)]
    norms = [nn.RMSNorm(d), nn.RMSNorm(d)]
    right = _numel(p for part in linears + norms for p in part.parameters())
    gains = _numel(p for norm in norms for p in norm.parameters())
    return right, [12 * d * d + 10 * d, right + gains, right - gains]


def _gained_image(d: int, k: int):
    """Question 4.3: diag(gamma) on 1-perp has rank (d - 1) - (k - 1) (its kernel: vectors on the k zeroed
    coordinates summing to 0), and flattens the sphere into a solid ellipsoid of that dimension: d - k, measured
    as the rank of diag(gamma) times a basis of 1-perp; the mistakes: d - 2, d - k - 2, d - k - 1."""
    gamma = torch.ones(d, dtype=torch.float64)
    gamma[:k] = 0
    basis = (torch.eye(d, dtype=torch.float64) - 1 / d)[:, : d - 1]  # (d, d - 1): spans 1-perp
    rank = int(torch.linalg.matrix_rank(gamma[:, None] * basis))
    return rank, [d - 2, rank - 2, rank - 1]


def _gated_mlp_count(d: int, d_ff: int):
    """Question 2.3: a gated MLP built from torch's Linear layers without bias (W_1, W_3: d -> d_ff, W_2: d_ff -> d);
    the mistakes: without the gate, with the three biases, at d_ff = 4d."""
    layers = [torch.nn.Linear(d, d_ff, bias=False), torch.nn.Linear(d, d_ff, bias=False), torch.nn.Linear(d_ff, d, bias=False)]
    right = _numel(p for layer in layers for p in layer.parameters())
    return right, [right - layers[1].weight.numel(), right + 2 * d_ff + d, 12 * d * d]


def _attention_rank(d: int, H: int, T: int):
    """Question 1.5: a lower-triangular matrix with a nonzero diagonal has rank T; the mistakes: d_head, d, T - 1."""
    return T, [d // H, d, T - 1]


def _logit_rank(T: int, L: int, d: int = 16, V: int = 20):
    """Question 3.3: LN_f leaves d - 1 directions at each position (the all-ones one removed), and W_U with V > d
    columns keeps them: T (d - 1); the mistakes: T d, T (d - 2), T (d - 1 - 2L), T V."""
    return T * (d - 1), [T * d, T * (d - 2), T * (d - 1 - 2 * L), T * V]


def _multi_query_crossover(d: int, H: int):
    """Question 7.3: the T where FlopCounterMode counts as many FLOPs in a multi-query block's scores and
    aggregation as in its projections and MLP (meta tensors, one sequence); the mistakes: 2d + d_ff, d + d_ff, d_ff."""
    from torch.utils.flop_counter import FlopCounterMode

    d_head, right = d // H, d + d // H + 4 * d
    with torch.device("meta"):
        X = torch.randn(right, d)  # (T, d)
        W = {"Q": torch.randn(d, d), "K": torch.randn(d, d_head), "V": torch.randn(d, d_head), "O": torch.randn(d, d),
             "1": torch.randn(d, 4 * d), "2": torch.randn(4 * d, d)}
        counted = []
        for part in ("weights", "attention"):
            counter = FlopCounterMode(display=False)
            with counter:
                if part == "weights":
                    X @ W["Q"], X @ W["K"], X @ W["V"], X @ W["O"], (X @ W["1"]) @ W["2"]
                else:
                    q, k, v = (torch.randn(H, right, d_head) for _ in range(3))  # k, v: the shared one, per head
                    (q @ k.transpose(1, 2)) @ v
            counted.append(counter.get_total_flops())
    assert counted[0] == counted[1], counted
    return right, [2 * d + 4 * d, d + 4 * d, 4 * d]


def _writes(H: int, ell: int):
    """Question 10.3: E[x], then per block H heads and the MLP; the mistakes: with P and b_O, with b_O, with P."""
    return 1 + ell * (H + 1), [2 + ell * (H + 2), 1 + ell * (H + 2), 2 + ell * (H + 1)]


# question, its builder, the values it must have at given sizes (computed here), what its reason must state
# there, and other sizes to build it at: a number typed into a reason or a mistake fails at those.
REBUILT = [
    ("6.3", concepts.window_question, _window,
     lambda n, T, w, L: [f"L (w - 1) = {L * (w - 1)}", f"{n:,} for T = {T}"], {"T": 12, "w": 3, "L": 3}),
    ("5.3", concepts.bare_block_question, _bare_block, lambda n, d: [f"12 d^2 + 2 d = {n:,} for d = {d}"], {"d": 64}),
    ("4.3", concepts.gained_image_question, _gained_image,
     lambda n, d, k: [f"d - k = {n:,} for d = {d}, k = {k}"], {"d": 14, "k": 2}),
    ("2.3", concepts.gated_mlp_question, _gated_mlp_count, lambda n, d, d_ff: [f"= {n:,} for d = {d}, d_ff = {d_ff}"],
     {"d": 32, "d_ff": 64}),
    ("1.5", concepts.attention_rank_question, _attention_rank,
     lambda n, d, H, T: [f"rank T = {n}.", f"d_head = {d // H}."], {"d": 96, "H": 6, "T": 32}),
    ("3.3", concepts.logit_jacobian_question, _logit_rank,
     lambda n, T, L: [f"T (d - 1) = {n:,} for T = {T}", "V = 20 > d", "d - 1 = 15"], {"T": 4, "L": 2}),
    ("7.3", concepts.multi_query_crossover_question, _multi_query_crossover,
     lambda n, d, H: [f"= {n:,} for d = {d}, d_head = {d // H}."], {"d": 256, "H": 4}),
    ("10.3", concepts.stream_writes_question, _writes, lambda n, H, ell: [f"= {n:,} for ell = {ell}, H = {H}."],
     {"H": 4, "ell": 3}),
]


def _large_numbers(text: str) -> set[int]:
    """The numbers above 12 in a text (the coefficients of its formulas, 12 d^2 + 13 d, are 13 or less)."""
    return {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\d|\d", text)} - set(range(14))


def _agrees(spec: concepts.Number, values, stated, sizes: dict) -> None:
    right, wrong = values(**sizes)
    assert spec.asked_at == sizes
    assert spec.answer() == right
    assert [mistake() for mistake in spec.mistakes.values()] == wrong
    why, statements = spec.why(right), stated(right, **sizes)
    assert all(statement in why for statement in statements), why
    assert _large_numbers(why) <= _large_numbers(" ".join(statements)) | _large_numbers(str(sizes)), why  # no other size's


def test_every_number_question_is_rebuilt_at_other_sizes():
    assert sorted(case[0] for case in REBUILT) == sorted(q for q, _ in NUMBERS)


@pytest.mark.parametrize("question, build, values, stated, other", REBUILT, ids=[case[0] for case in REBUILT])
def test_a_number_question_reasons_and_predicts_mistakes_from_its_own_sizes(question, build, values, stated, other):
    asked = concepts.QUESTIONS[question]
    _agrees(asked, values, stated, asked.asked_at)
    _agrees(build(**other), values, stated, other)
    assert exercises.concept_answer(question).endswith(asked.why(asked.answer()))


def _of_sizes(values, asked_at: dict, pick=lambda right, wrong: right):
    """A learner's function of a question's sizes (positional, in the order it states them) built on an
    independent reference `values` (REBUILT): its right count, or what `pick` takes of (right, mistakes)."""
    return lambda *sizes: pick(*values(**dict(zip(asked_at, sizes))))


@pytest.mark.parametrize("question, build, values, stated, other", REBUILT, ids=[case[0] for case in REBUILT])
def test_a_number_question_takes_a_function_of_its_sizes_and_a_hidden_variant_asks_it_elsewhere(
        question, build, values, stated, other):
    """A function computed by the independent reference passes at the stated sizes, and at the sizes every hidden
    variant tried draws; each mistake's function fails with that mistake's words. A number, or a function right at
    the stated sizes only, passes the public check and fails every hidden one."""
    asked = concepts.QUESTIONS[question].asked_at
    right = _of_sizes(values, asked)
    count = values(**asked)[0]
    table = lambda *sizes: count if sizes == tuple(asked.values()) else -1  # noqa: E731  (no count is negative)
    assert exercises.check_concept(question, right).status == PASSED
    assert exercises.check_concept(question, table).status == PASSED
    for i, name in enumerate(concepts.QUESTIONS[question].mistakes):
        verdict = exercises.check_concept(question, _of_sizes(values, asked, lambda _, wrong, i=i: wrong[i]))
        assert verdict.status == FAILED and name in verdict.message and verdict.mistakes == (name.id,)
        assert verdict.message.startswith(f"your function gives {values(**asked)[1][i]:,} at ")
    drawn = set()
    for offset in range(1, 9):
        seen = []
        with shifted_seeds(offset):
            assert exercises.check_concept(question, lambda *sizes: seen.append(sizes) or right(*sizes)).status == PASSED
            assert exercises.check_concept(question, table).status == FAILED
            verdict = exercises.check_concept(question, count)
        assert seen[0] == tuple(asked.values()) and len(seen) == 1 + concept_checks.VARIANT_SIZES
        assert verdict.status == FAILED and "a whole number answers the stated sizes only" in verdict.message
        drawn.update(seen[1:])
    assert len(drawn) > 8 and tuple(asked.values()) not in drawn, "the drawn sizes move with the offset"


def test_a_hidden_variant_draws_sizes_of_the_kind_each_number_question_states():
    """Every number question can be asked elsewhere, under the same names, by its own builder."""
    assert sorted(concepts.ASKED_ELSEWHERE) == sorted(q for q, _ in NUMBERS)
    for question, (build, draw) in concepts.ASKED_ELSEWHERE.items():
        assert build(**concepts.QUESTIONS[question].asked_at).asked_at == concepts.QUESTIONS[question].asked_at
        for seed in range(20):
            sizes = draw(random.Random(seed))
            assert build(**sizes).asked_at == sizes and list(sizes) == list(concepts.QUESTIONS[question].asked_at)


def test_a_function_answer_that_raises_or_returns_no_whole_number_is_told_so():
    question, asked = "6.3", concepts.QUESTIONS["6.3"].asked_at
    where = ", ".join(f"{name} = {value}" for name, value in asked.items())

    def stub(T, w, L):
        raise NotImplementedError

    def lying(T, w, L):  # an object that claims to equal everything
        return type("Liar", (), {"__eq__": lambda self, other: True, "__int__": lambda self: 0})()

    verdicts = {
        "stub": (exercises.check_concept(question, stub), NOT_ATTEMPTED, "still raises NotImplementedError"),
        "raises": (exercises.check_concept(question, lambda T, w, L: 1 // 0), "error", "raised ZeroDivisionError"),
        "arity": (exercises.check_concept(question, lambda T: T), "error", "raised TypeError"),
        "text": (exercises.check_concept(question, lambda T, w, L: "many"), FAILED, f"value at {where} should be a whole"),
        "half": (exercises.check_concept(question, lambda T, w, L: 51.5), FAILED, "should be a whole number, got 51.5"),
        "none": (exercises.check_concept(question, lambda T, w, L: None), FAILED, "should be a whole number"),
        "bool": (exercises.check_concept(question, lambda T, w, L: True), FAILED, "should be a whole number"),
        "liar": (exercises.check_concept(question, lying), FAILED, "should be a whole number"),
        "huge": (exercises.check_concept(question, lambda T, w, L: 10**400), FAILED, "is not it"),
    }
    for name, (verdict, status, words) in verdicts.items():
        assert verdict.status == status and words in verdict.message, (name, verdict.message)


def test_a_released_record_calls_a_function_answer_at_its_stated_sizes_in_their_order(monkeypatch):
    """A class release's record, read back from JSON as concepts.json holds it (keys sorted, even), states the
    question's sizes in its order: the student's kernel calls a function there, without the answers."""
    spec = concepts.QUESTIONS["1.5"]  # d, H, T: not in sorted order
    record = json.loads(json.dumps(sealed.seal("1.5", spec, bytes(16)), sort_keys=True))
    monkeypatch.setattr(concept_checks, "_RELEASED", {"1.5": record})
    monkeypatch.setattr(concept_checks, "_self_study_record", None)  # any use of the answers here fails the test
    seen = []
    assert exercises.check_concept("1.5", lambda *sizes: seen.append(sizes) or spec.answer()).status == PASSED
    assert seen == [tuple(spec.asked_at.values())]
    name, mistake = next(iter(spec.mistakes.items()))
    where = ", ".join(f"{size} = {value}" for size, value in spec.asked_at.items())
    verdict = exercises.check_concept("1.5", lambda *sizes: mistake())
    assert verdict.status == FAILED and verdict.message.startswith(f"your function gives {mistake():,} at {where}: {name}")


def test_the_course_model_choices_state_its_own_numbers():
    """Question 5.2's counts are Theorem 5.2's, measured on models (V = 65 and GPT-2's 50,257); the course model's
    heads' W_OV^h stacked have rank d (their row spaces fill R^d); Question 1.4's variant, one output slab M for
    every head, writes in a subspace of rank d_head, its stated bound."""
    wide = COURSE_CONFIG.replace(V=50257)
    counts = [measured_table(config)[-1] for config in (COURSE_CONFIG, wide)]
    blocks = [sum(measured_table(config)[1:4]) for config in (COURSE_CONFIG, wide)]
    why = concepts.QUESTIONS["5.2"].why
    assert f"{counts[0]:,} at V = 65 and {counts[1]:,} at V = 50,257, {counts[1] / counts[0]:.1f} times" in why
    assert blocks[0] == blocks[1] and f"L (12 d^2 + 10 d) = {blocks[0]:,} do not change" in why
    assert 15 < counts[1] / counts[0] < 18 and f"2 V d = {2 * 50257 * 128:,}" in why  # about seventeenfold (16.7)
    torch.manual_seed(0)
    attn = GPT(COURSE_CONFIG).double().blocks[0].attn
    ranks = [attention.numerical_rank(attention.W_OV(attn, h)).rank for h in range(COURSE_CONFIG.H)]
    stacked = torch.cat([attention.W_OV(attn, h) for h in range(COURSE_CONFIG.H)])  # (H d, d)
    assert set(ranks) == {COURSE_CONFIG.d_head} and attention.numerical_rank(stacked).rank == COURSE_CONFIG.d
    spec = concepts.QUESTIONS["1.4"]
    d, H, d_head = spec.asked_at["d"], spec.asked_at["H"], 32  # the variant: one output slab M shared by all heads
    W_V, M = torch.randn(H, d, d_head, dtype=torch.float64), torch.randn(d_head, d, dtype=torch.float64)
    X = torch.randn(64, d, dtype=torch.float64)
    writes = sum(X @ W_V[h] @ M for h in range(H))  # (64, d): the sublayer's write at 64 > d_head positions, A^h = I
    rank = attention.numerical_rank(writes).rank
    own = sum(X @ W_V[h] @ torch.randn(d_head, d, dtype=torch.float64) for h in range(H))  # each head its own slab
    assert attention.numerical_rank(own).rank == 64  # the control: as many directions as positions here
    assert rank == d_head < d and f"d_head = {rank} < d = {d}," in spec.why
    assert spec.answer == "b" and _large_numbers(spec.why) == {rank, d}


def test_unanswered_bad_and_unknown_questions():
    question, spec = CHOICES[0]
    assert exercises.check_concept(question, None).status == NOT_ATTEMPTED
    assert "one letter of" in exercises.check_concept(question, "z").message
    assert "whole number" in exercises.check_concept(NUMBERS[0][0], "many").message
    for number, built in NUMBERS:  # a number question takes a function of its sizes too, and says which
        assert f"a function of {', '.join(built.asked_at)} that returns it" in exercises.check_concept(number, None).message
    with pytest.raises(ValueError, match="no concept question '0.9'"):
        exercises.check_concept("0.9", "a")
    assert spec.answer in exercises.concept_answer(question)


@functools.cache  # read once per process: 40 tests read the same notebooks, 0.2 s a reading
def _asked(number):
    """{question id: (the Markdown cell before its check, the check's output texts, the text of every cell above
    that Markdown cell, sources and outputs)} in one notebook."""
    cells = notebook_files.cells(notebook_files.notebook(number))
    asked = {}
    for i, cell in enumerate(cells):
        for question, answer in re.findall(r'check_concept\("([\d.]+)", (\w+)\)', cell.source):
            assert answer == "None", f"question {question} is answered in the committed notebook"
            at = next(j for j in reversed(range(i)) if cells[j].cell_type == "markdown")
            above = " ".join(c.source + " ".join(t for o in c.get("outputs", []) for t in notebook_files.texts(o))
                             for c in cells[:at])
            asked[question] = (cells[at].source, tuple(t for output in cell.outputs for t in notebook_files.texts(output)),
                               above)
    return asked


LATEX = {"d_ff": "d_{ff}", "ell": r"\ell"}  # a size's name as the Markdown writes it, where the two differ


@pytest.mark.parametrize("number", ASKED_IN)
def test_each_notebook_asks_its_questions_above_an_unanswered_check(number):
    asked = _asked(number)
    mine = [q for q in concepts.QUESTIONS if q.split(".")[0] == str(int(number))]
    assert sorted(asked) == sorted(mine) and len(mine) >= 3
    for question, (markdown, shown, _) in asked.items():
        assert f"Question {question}" in markdown
        spec = concepts.QUESTIONS[question]
        assert all(f"${LATEX.get(name, name)} = {value}$" in markdown for name, value in spec.asked_at.items())
        if isinstance(spec, concepts.Choice):
            assert re.findall(r"^\(([a-z])\) ", markdown, re.M) == spec.letters()
        assert shown and all("not attempted yet" in text for text in shown)


@dataclasses.dataclass(frozen=True)
class Asked:
    """A choice question as the learner meets it: its options' texts by letter, its right letter, and the
    words of every cell above it in its notebook."""

    options: dict[str, str]
    right: str
    above: frozenset[str]


@functools.cache  # 47 tests ask for it; callers copy what they change (_plant)
def _real_set() -> dict[str, Asked]:
    found = {}
    for number in ASKED_IN:
        for question, (markdown, _, above) in _asked(number).items():
            spec = concepts.QUESTIONS[question]
            if isinstance(spec, concepts.Choice):
                options = dict(re.findall(r"^\(([a-z])\) (.*?)\s*$", markdown, re.M))
                found[question] = Asked(options, spec.answer, frozenset(_words(above)))
    return found


def _shown_length(option: str) -> int:
    """About how many characters an option shows once its LaTeX is rendered: $\\mathbb R^{d_{\\text{head}}}$
    counts as R d head, a symbol (\\partial, \\top) as one character, and markup as none."""
    shown = re.sub(r"\\(operatorname|text|mathrm|mathbf|mathbb|tfrac|,|\s)", "", option)
    shown = re.sub(r"\\[A-Za-z]+", "x", shown)
    return len(re.sub(r"[${}^_*]", "", shown))


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def _justified(option: str) -> bool:
    """Whether an option gives a reason: a colon outside its formulas ("Yes: ..."), as the options are written."""
    return ":" in re.sub(r"\$[^$]*\$", "", option)


def _extremes(scores: dict[str, float], extreme) -> list[str]:
    best = extreme(scores.values())
    return [letter for letter, value in scores.items() if value == best]


def _single(letters: list[str], among: int) -> list[str]:
    """The letter a strategy picks when exactly one option has its trait (and others lack it); else none."""
    return letters if len(letters) == 1 and among > 1 else []


STRATEGIES = {  # name -> pick(question as asked, the commonest right letter of the set) -> the letters it picks
    "commonest letter": lambda q, common: [common] if common in q.options else [],
    "last letter": lambda q, common: [max(q.options)],
    "longest option": lambda q, common: _extremes({k: _shown_length(v) for k, v in q.options.items()}, max),
    "shortest option": lambda q, common: _extremes({k: _shown_length(v) for k, v in q.options.items()}, min),
    "the one bare option among justified ones": lambda q, common: _single(
        [k for k, v in q.options.items() if not _justified(v)], sum(_justified(v) for v in q.options.values())),
    "the only option with a digit": lambda q, common: _single(
        [k for k, v in q.options.items() if re.search(r"\d", v)], sum(not re.search(r"\d", v) for v in q.options.values())),
    "most words shared with the cells above": lambda q, common: _extremes(
        {k: len(set(_words(v)) & q.above) for k, v in q.options.items()}, max),
    **{f"always ({letter})": (lambda q, common, letter=letter: [letter] if letter in q.options else [])
       for letter in "abcd"},
}


def form_scores(asked: dict[str, Asked]) -> dict[str, tuple[float, float]]:
    """{strategy: (its expected score, a uniform guess's expected score over the same questions)}. A strategy with
    no pick on a question guesses there (always (d) is scored only where there is a (d))."""
    rights = [q.right for q in asked.values()]
    common = max(sorted(set(rights)), key=rights.count)
    scores = {}
    for name, pick in STRATEGIES.items():
        score = chance = 0.0
        for q in asked.values():
            picks = pick(q, common)
            if not picks and name.startswith("always"):
                continue
            picks = picks or list(q.options)
            score += (q.right in picks) / len(picks)
            chance += 1 / len(q.options)
        scores[name] = (score, chance)
    return scores


def giveaways(asked: dict[str, Asked]) -> dict[str, tuple[float, float]]:
    """The strategies that score more than one question away from chance."""
    return {name: (s, c) for name, (s, c) in form_scores(asked).items() if abs(s - c) > 1}


def test_guessing_by_form_scores_what_chance_scores():
    """Over all choice questions, answering by position (each letter, the last one, the commonest right one), by
    length, by the one bare or the one digit-bearing option, or by the words the option shares with the notebook
    above it, is right about as often as a random guess: within one question of it."""
    asked = _real_set()
    assert sorted(asked) == sorted(q for q, _ in CHOICES)
    assert giveaways(asked) == {}, form_scores(asked)


LONGEST_MARGIN = 1.05  # the right option may be the longest, but by no more than 5% of the longest wrong one


def length_giveaway(options: dict[str, str], right: str) -> float | None:
    """The right option's shown length over the longest wrong option's, when that ratio exceeds LONGEST_MARGIN: a
    right option clearly the longest, which a learner can pick by its form alone. None when within the margin."""
    ratio = _shown_length(options[right]) / max(_shown_length(text) for letter, text in options.items() if letter != right)
    return ratio if ratio > LONGEST_MARGIN else None


@pytest.mark.parametrize("question", [q for q, _ in CHOICES])
def test_no_right_option_is_clearly_the_longest(question):
    """Per question, not only in aggregate: the right option is at most 5% longer (as rendered) than the longest wrong one."""
    asked = _real_set()[question]
    assert length_giveaway(asked.options, asked.right) is None, asked.options[asked.right]


def test_exercise_7s_true_statement_is_not_clearly_the_longest():
    assert length_giveaway(STATEMENTS, concepts.POST_NORM_STATEMENT.answer) is None


SINGLING_OUT = ("the one bare option among justified ones", "the only option with a digit")


@pytest.mark.parametrize("question", [q for q, _ in CHOICES])
def test_no_right_option_is_the_only_one_without_a_reason_or_the_only_one_with_a_digit(question):
    """Per question, not only in aggregate: the right option is not the one option that gives no reason where the
    others give one, nor the one option with a digit where the others have none: either could be picked by its form."""
    asked = _real_set()[question]
    for trait in SINGLING_OUT:
        assert STRATEGIES[trait](asked, None) != [asked.right], (trait, asked.options[asked.right])


def test_the_singling_out_rules_catch_a_right_option_of_that_form():
    bare = Asked({"a": "Yes: it adds.", "b": "No, it does not.", "c": "Only once: at the top."}, "b", frozenset())
    digit = Asked({"a": "Yes: twice as many.", "b": "No: as many.", "c": "About 3: a third more."}, "c", frozenset())
    assert [STRATEGIES[trait](q, None) for trait, q in zip(SINGLING_OUT, (bare, digit))] == [["b"], ["c"]]


def test_the_length_rule_catches_a_right_option_padded_by_a_tenth():
    options = {"a": "x" * 100, "b": "y" * 96}
    assert length_giveaway(options, "a") is None and length_giveaway(options, "b") is None
    assert length_giveaway({**options, "a": "x" * 110}, "a") == pytest.approx(110 / 96)


def _plant(asked: dict[str, Asked], strategy: str) -> dict[str, Asked]:
    """The same questions with a giveaway of the strategy's kind planted in every right option."""
    planted = {}
    for question, q in asked.items():
        options = dict(q.options)
        right = q.right
        if strategy in ("commonest letter", "always (a)"):  # the right text moves to (a)
            options[right], options["a"], right = options["a"], options[right], "a"
        elif strategy == "last letter":
            last = max(options)
            options[right], options[last], right = options[last], options[right], last
        elif strategy == "longest option":
            options[right] += " Because the lecture's argument, applied with care to every case, leaves no other choice."
        elif strategy == "shortest option":
            options[right] = "Yes."
        elif strategy == "the one bare option among justified ones":
            options = {k: (v.split(":")[0] if k == right else f"{v.split(':')[0]}: for a reason") for k, v in options.items()}
        elif strategy == "the only option with a digit":
            options = {k: re.sub(r"\d", "n", v) + (" (at most 2)" if k == right else "") for k, v in options.items()}
        elif strategy == "most words shared with the cells above":
            options[right] += " " + " ".join(sorted(q.above)[:200])
        planted[question] = Asked(options, right, q.above)
    return planted


@pytest.mark.parametrize("strategy", [name for name in STRATEGIES if not name.startswith("always (") or name == "always (a)"])
def test_a_planted_giveaway_is_caught(strategy):
    """Each strategy's check fails on the real set with that giveaway planted in it: the test above can fail."""
    caught = giveaways(_plant(_real_set(), strategy))
    assert strategy in caught, form_scores(_plant(_real_set(), strategy))[strategy]


def _attention(causal: bool, T: int = 6, d: int = 16, H: int = 2):
    torch.manual_seed(0)
    return GPT(GPTConfig(V=5, T_max=T, d=d, H=H, L=1, causal=causal)).double().blocks[0].attn


def test_questions_1_1_and_1_3_the_rank_arguments():
    """1.1: heads sharing W_V sum to rank d_head, with their own W_V^h to rank d. 1.3: below full rank two pairs with
    one product need not be linked by an invertible R (their factors' ranks differ)."""
    d, H = 12, 3
    d_head = d // H
    torch.manual_seed(0)
    W_V, W_O = torch.randn(d, d_head, dtype=torch.float64), torch.randn(H, d_head, d, dtype=torch.float64)
    own = torch.randn(H, d, d_head, dtype=torch.float64)
    assert int(torch.linalg.matrix_rank(sum(W_V @ W_O[h] for h in range(H)))) == d_head
    assert int(torch.linalg.matrix_rank(sum(own[h] @ W_O[h] for h in range(H)))) == d
    W_Q, W_K = torch.randn(d, d_head, dtype=torch.float64), torch.zeros(d, d_head, dtype=torch.float64)
    assert torch.equal(W_Q @ W_K.T, W_K @ W_Q.T)  # (W_Q, 0) and (0, W_Q): the same product, 0
    assert int(torch.linalg.matrix_rank(W_Q)) != int(torch.linalg.matrix_rank(W_K))
    assert [concepts.QUESTIONS[q].answer for q in ("1.1", "1.3")] == ["a", "c"]


def test_question_1_2_only_the_inverse_leaves_W_OV_unchanged():
    torch.manual_seed(0)
    W_V, W_O, R = (torch.randn(*shape, dtype=torch.float64) for shape in ((8, 4), (4, 8), (4, 4)))
    W_OV = W_V @ W_O
    options = {"a": W_V @ R @ R.T @ W_O, "b": W_V @ R @ torch.linalg.inv(R).T @ W_O,
               "d": W_V @ R @ torch.linalg.inv(R) @ W_O}
    assert [k for k, v in options.items() if torch.allclose(v, W_OV)] == [concepts.QUESTIONS["1.2"].answer]


def test_questions_2_1_and_2_2_permuted_rows_and_the_first_position():
    """2.1: an unmasked head's output permutes with its input rows. 2.2: under the causal mask the first row of A^h
    is (1, 0, ..., 0), and under a mask that leaves query t only key t - 2 the write at t is v_{t-2}, whatever the
    weights."""
    X = torch.randn(1, 6, 16, dtype=torch.float64)
    perm = torch.randperm(6)
    attn = _attention(causal=False)
    torch.testing.assert_close(attn(X[:, perm]), attn(X)[:, perm])
    q, k, _ = _attention(causal=True).qkv(X)
    A = _attention(causal=True).attention_matrices(q, k)  # (1, H, T, T)
    assert torch.equal(A[0, :, 0], torch.eye(6, dtype=torch.float64)[0].expand(A.shape[1], 6))
    q, k, v = attn.qkv(X)  # the unmasked head's queries, keys and values, (1, H, T, d_head)
    two_back = torch.full((6, 6), float("-inf"), dtype=torch.float64)
    two_back[torch.arange(2, 6), torch.arange(0, 4)] = 0  # query t >= 2 sees key t - 2 only
    A = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5 + two_back)[..., 2:, :].softmax(-1)  # (1, H, T - 2, T)
    torch.testing.assert_close(A @ v, v[:, :, :4], rtol=0, atol=0)  # the write at t is v_{t-2}, exactly
    assert [concepts.QUESTIONS[q].answer for q in ("2.1", "2.2")] == ["c", "a"]


def test_questions_3_1_and_3_2_skip_weights_and_the_final_norm():
    """3.1: 24 blocks X' = alpha X + F(X) with a tiny F pass about alpha^24 of the gradient down: within a factor 2
    of the top for alpha within about 3% of 1 (1.01, 0.975), outside it for 1.04 and 1/2. 3.2: LN of a longer row
    moves less when w is added to it."""
    torch.manual_seed(0)
    L, d = 24, 5
    Ws = [1e-6 * torch.randn(d, d, dtype=torch.float64) for _ in range(L)]

    def gain(alpha):  # the factor the stack's Jacobian applies, measured by autograd
        def stack(x):
            for W in Ws:
                x = alpha * x + torch.tanh(x @ W)
            return x
        return float(torch.linalg.matrix_norm(torch.autograd.functional.jacobian(stack, torch.randn(d, dtype=torch.float64)), 2))

    within = {alpha: 0.5 <= gain(alpha) <= 2 for alpha in (1.0, 1.01, 0.975, 1.04, 0.96, 0.5)}
    assert within == {1.0: True, 1.01: True, 0.975: True, 1.04: False, 0.96: False, 0.5: False}
    assert abs(gain(2 ** (1 / 24)) - 2) < 1e-3 and f"{2 ** (1 / 24):.3f}" in concepts.QUESTIONS["3.1"].why
    x, w = torch.randn(16, dtype=torch.float64), 0.1 * torch.randn(16, dtype=torch.float64)
    moved = [float((layernorm.layer_norm(c * x + w) - layernorm.layer_norm(c * x)).norm()) for c in (1, 4, 16)]
    assert moved[0] > moved[1] > moved[2]
    assert [concepts.QUESTIONS[q].answer for q in ("3.1", "3.2")] == ["b", "c"]


def test_questions_4_1_and_4_2_shift_sign_and_a_shifted_row():
    """4.1: LN(3 . 1 - 2u) = -LN(u). 4.2: RMSNorm of a mean-0, RMS-1 row shifted by 5 has cosine 5/sqrt(26) with 1,
    neither 0 nor 1 (measured on rows of several widths)."""
    u = torch.randn(12, dtype=torch.float64)
    torch.testing.assert_close(layernorm.layer_norm(3 - 2 * u), -layernorm.layer_norm(u))
    for d in (3, 12, 500):
        u = torch.randn(d, dtype=torch.float64)
        u = (u - u.mean()) / (u - u.mean()).pow(2).mean().sqrt()  # mean 0, root mean square 1
        out = layernorm.rms_norm(u + 5, eps=0.0)
        cosine = float(out @ torch.ones(d, dtype=torch.float64) / (out.norm() * d**0.5))
        assert abs(cosine - 5 / 26**0.5) < 1e-12 and 0.9 < cosine < 0.99
    assert [concepts.QUESTIONS[q].answer for q in ("4.1", "4.2")] == ["b", "a"]


def test_question_5_1_a_key_bias_leaves_the_weights():
    attn = _attention(causal=True)
    X = torch.randn(1, 6, 16, dtype=torch.float64)
    q, k, _ = attn.qkv(X)  # k: (B, H, T, d_head)
    b_K = torch.randn(1, k.shape[1], 1, k.shape[-1], dtype=torch.float64)
    torch.testing.assert_close(attn.attention_matrices(q, k + b_K), attn.attention_matrices(q, k))
    assert concepts.QUESTIONS["5.1"].answer == "c"


def _depends_on_last(model: GPT) -> bool:
    """Whether Z_0 moves when the last token changes."""
    idx = torch.zeros(1, 6, dtype=torch.long)
    other = idx.clone()
    other[0, -1] = 3
    with torch.no_grad():
        return not torch.allclose(model(idx)[0][0, 0], model(other)[0][0, 0])


def test_questions_6_1_and_6_2_what_breaks_causality():
    """6.1: normalizing over positions makes row 0 depend on the last row; a sliding window does not. 6.2: a GPT
    whose block 0 alone is unmasked has Z_0 depend on the last token."""
    X = torch.randn(6, 8, dtype=torch.float64)
    later = X.clone()
    later[-1] += 1
    over_positions = lambda X: (X - X.mean(0)) / X.std(0)  # noqa: E731
    assert not torch.allclose(over_positions(X)[0], over_positions(later)[0])
    torch.manual_seed(0)
    masked = GPT(GPTConfig(V=5, T_max=6, d=16, H=2, L=2))
    assert not _depends_on_last(masked)
    masked.blocks[0].attn = GPT(GPTConfig(V=5, T_max=6, d=16, H=2, L=1, causal=False)).blocks[0].attn
    assert _depends_on_last(masked)
    assert [concepts.QUESTIONS[q].answer for q in ("6.1", "6.2")] == ["b", "a"]


def test_question_1_6_parameters_stay_and_scores_grow_with_T():
    """The course model's attention at T = 64 and T = 128: the same parameters, four times as many scores."""
    counts, scores = [], []
    for T in (64, 128):
        attn = GPT(COURSE_CONFIG.replace(T_max=T)).blocks[0].attn
        q, k, _ = attn.qkv(torch.randn(1, T, COURSE_CONFIG.d))
        counts.append(_numel(attn.parameters()))
        scores.append(attn.attention_matrices(q, k).numel())  # (1, H, T, T)
    assert counts[0] == counts[1] and scores[1] == 4 * scores[0]
    assert concepts.QUESTIONS["1.6"].answer == "b"


def test_question_7_1_more_heads_of_the_same_width_cost_the_same():
    """FlopCounterMode on the course model (meta device) with 4 heads of 32 and 8 heads of 16: the same forward
    FLOPs, while doubling d (a control the count can see) changes them."""
    counted = [cost.measured_flops(COURSE_CONFIG.replace(H=H), T=64) for H in (4, 8)]
    assert counted[0] == counted[1] != cost.measured_flops(COURSE_CONFIG.replace(d=256), T=64)
    assert concepts.QUESTIONS["7.1"].answer == "c"


def test_question_7_2_training_the_last_block_costs_about_1_plus_2_over_L_forward_passes():
    """FlopCounterMode on the course model (meta device): with only the last block trainable, forward + backward
    is about 1 + 2/L forward passes (L = 4: 1.5)."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = GPT(COURSE_CONFIG).requires_grad_(False)
        model.blocks[-1].requires_grad_(True)
        X0 = torch.randn(4, 64, COURSE_CONFIG.d)  # (B, T, d): no gradient wanted here
    counted = []
    for backward in (False, True):
        counter = FlopCounterMode(display=False)
        with counter, attention_matrices_formed(model):
            Z = model.forward_from_embeddings(X0)  # (B, T, V)
            if backward:
                Z.sum().backward()
        counted.append(counter.get_total_flops())
    ratio = counted[1] / counted[0]
    assert abs(ratio - (1 + 2 / COURSE_CONFIG.L)) < 0.1, ratio
    assert "1 + 2/L forward passes" in concepts.QUESTIONS["7.2"].why and concepts.QUESTIONS["7.2"].answer == "a"


def test_question_10_1_a_post_norm_stream_is_no_sum_of_its_sublayers_outputs():
    """X^(L) = X^(0) + the sum of the sublayers' outputs in the pre-norm GPT (to rounding), not in the post-norm one
    with the same weights, LN_f dropped or not (X^(L) is before it), at initialization (gains 1, shifts 0) too."""
    torch.manual_seed(0)
    idx = torch.tensor([[0, 1, 2, 3, 4, 0]])
    pre = GPT(GPTConfig(V=5, T_max=6, d=16, H=2, L=2)).double()
    post = GPT(GPTConfig(V=5, T_max=6, d=16, H=2, L=2, norm="post")).double()
    post.load_state_dict(pre.state_dict())
    gaps = {}
    for name, model in (("pre", pre), ("post", post)):
        X = model.embed(idx[0]).unsqueeze(0)  # (1, T, d): X^(0)
        total = X.clone()
        with torch.no_grad():
            for block in model.blocks:  # X^(l+1) from the model's own block; the two sublayer outputs alongside
                norm_1, norm_2 = (block.ln_1, block.ln_2) if name == "pre" else (torch.nn.Identity(), torch.nn.Identity())
                attn_write = block.attn(norm_1(X))
                Y = X + attn_write if name == "pre" else block.ln_1(X + attn_write)
                total = total + attn_write + block.mlp(norm_2(Y))
                X = block(X)
        gaps[name] = float((X - total).abs().max() / X.abs().max())
    assert gaps["pre"] < 1e-12 and gaps["post"] > 0.1, gaps
    assert concepts.QUESTIONS["10.1"].answer == "c"
