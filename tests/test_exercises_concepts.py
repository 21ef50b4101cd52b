"""Concept questions: each right answer passes, each wrong one fails with its own reason, and in the
notebooks every question is asked in Markdown above an unanswered check (its answer off screen)."""

import re

import pytest
import torch

from gptlib import exercises
from gptlib.analysis import attention
from gptlib.analysis.counting import measured_table
from gptlib.config import COURSE_CONFIG, GPTConfig
from gptlib.exercises.answers import concepts
from gptlib.exercises.result import FAILED, NOT_ATTEMPTED, PASSED
from gptlib.model import GPT
from tests.support import notebook_files

CHOICES = [(q, spec) for q, spec in concepts.QUESTIONS.items() if isinstance(spec, concepts.Choice)]
NUMBERS = [(q, spec) for q, spec in concepts.QUESTIONS.items() if isinstance(spec, concepts.Number)]
ASKED_IN = ["01", "02", "03", "04", "05", "06", "07", "10"]  # notebooks that ask at least three


@pytest.mark.parametrize("question, spec", CHOICES)
def test_a_choice_passes_only_for_its_letter_and_names_why_each_other_letter_fails(question, spec):
    assert exercises.check_concept(question, f" {spec.answer.upper()} ").status == PASSED
    for letter, reason in spec.wrong.items():
        verdict = exercises.check_concept(question, letter)
        assert verdict.status == FAILED and reason in verdict.message
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
        assert verdict.status == FAILED and verdict.message.startswith(name)
    assert exercises.check_concept(question, right + 1).status == FAILED


def _numel(params) -> int:
    return sum(p.numel() for p in params)


def _block(d: int):
    return GPT(GPTConfig(V=5, T_max=4, d=d, H=4, L=1)).blocks[0]


def _pairs(T: int):
    """Question 6.3: (right, [each mistake's value]), counted pair by pair."""
    pairs = [(t, s) for t in range(T) for s in range(T)]
    return sum(s > t for t, s in pairs), [sum(s >= t for t, s in pairs), len(pairs), sum(s != t for t, s in pairs)]


def _block_count(d: int):
    """Question 5.3: Theorem 5.2's per-block count; the mistakes' values counted from a block's tensors."""
    block = _block(d)
    norms = _numel(block.ln_1.parameters()) + _numel(block.ln_2.parameters())
    matrices = _numel(p for p in block.parameters() if p.dim() >= 2)
    return 12 * d * d + 10 * d, [matrices, _numel(block.parameters()) - norms, _numel(block.attn.parameters())]


def _rms_norm_image(d: int):
    """Question 4.3: RMSNorm's image is the sphere of radius sqrt(d) in R^d, whose tangent space at u is
    the complement of u (the rank of I - u u^T / |u|^2); the mistakes: LayerNorm's sphere in 1-perp (one
    fewer than the centring matrix's rank) and d."""
    u = torch.randn(d, dtype=torch.float64)
    tangent = torch.eye(d, dtype=torch.float64) - torch.outer(u, u) / u.dot(u)
    centring = torch.eye(d, dtype=torch.float64) - 1 / d
    return int(torch.linalg.matrix_rank(tangent)), [int(torch.linalg.matrix_rank(centring)) - 1, d]


def _mlp_count(d: int):
    """Question 2.3: 8 d^2 + 5 d; the mistakes' values counted from an MLP's tensors."""
    mlp = _block(d).mlp
    total = _numel(mlp.parameters())
    return 8 * d * d + 5 * d, [mlp.W_1.numel() + mlp.W_2.numel(), total - mlp.b_1.numel() + d, mlp.W_1.numel()]


def _score_rank(d: int, H: int, T: int):
    """Question 1.5: min(T, d_head); the mistakes: T, d, and d_head at the course's H."""
    return min(T, d // H), [T, d, d // COURSE_CONFIG.H]


def _post_norm(T: int):
    """Question 3.3: one zero per position; the mistakes: two per position, two for each of two LayerNorms, none."""
    return T, [2 * T, 4 * T, 0]


def _crossover(d: int):
    """Question 7.3: T = 6d (d_ff = 4d); the mistakes: 2d, d_ff, the course width's 6d."""
    return 6 * d, [2 * d, 4 * d, 6 * COURSE_CONFIG.d]


# question, its builder, the values it must have at given sizes (computed here), what its reason must state
# there, and other sizes to build it at: a number typed into a reason or a mistake fails at those.
REBUILT = [
    ("6.3", concepts.masked_pairs_question, _pairs, lambda n, T: [f"= {n:,} for T = {T}"], {"T": 7}),
    ("5.3", concepts.block_question, _block_count, lambda n, d: [f"= {n:,} for d = {d}"], {"d": 64}),
    ("4.3", concepts.rms_norm_image_question, _rms_norm_image, lambda n, d: [f"d - 1 = {n:,} for d = {d}"], {"d": 12}),
    ("2.3", concepts.mlp_question, _mlp_count, lambda n, d: [f"= {n:,} for d = {d}"], {"d": 32}),
    ("1.5", concepts.score_rank_question, _score_rank,
     lambda n, d, H, T: [f"d_head = d/H = {d // H} dimensions", f"min(T, d_head) = {n}"], {"d": 96, "H": 6, "T": 32}),
    ("3.3", concepts.post_norm_question, _post_norm, lambda n, T: [f"T = {n} zeros"], {"T": 6}),
    ("7.3", concepts.crossover_question, _crossover, lambda n, d: [f"6d = {n:,} for d = {d}"], {"d": 256}),
]


def _large_numbers(text: str) -> set[int]:
    """The numbers above 12 in a text (the coefficients of its formulas, 12 d^2 + 10 d, are 12 or less)."""
    return {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\d|\d", text)} - set(range(13))


def _agrees(spec: concepts.Number, values, stated, sizes: dict) -> None:
    right, wrong = values(**sizes)
    assert spec.asked_at == sizes
    assert spec.answer() == right
    assert [mistake() for mistake in spec.mistakes.values()] == wrong
    why, statements = spec.why(right), stated(right, **sizes)
    assert all(statement in why for statement in statements), why
    assert _large_numbers(why) == _large_numbers(" ".join(statements)), why  # no other size's number in it


@pytest.mark.parametrize("question, build, values, stated, other", REBUILT, ids=[case[0] for case in REBUILT])
def test_a_number_question_reasons_and_predicts_mistakes_from_its_own_sizes(question, build, values, stated, other):
    asked = concepts.QUESTIONS[question]
    _agrees(asked, values, stated, asked.asked_at)
    _agrees(build(**other), values, stated, other)
    assert exercises.concept_answer(question).endswith(asked.why(asked.answer()))


def test_the_course_model_choices_state_its_own_numbers():
    table = measured_table(COURSE_CONFIG)  # the five rows, then the total, counted from a model
    blocks, total = sum(table[1:4]), table[-1]
    why = concepts.QUESTIONS["5.2"].why
    assert f"= {blocks / total:.0%} of the course model's {total:,};" in why
    assert _large_numbers(why) == _large_numbers(f"{blocks / total:.0%} {total:,}")
    torch.manual_seed(0)
    attn = GPT(COURSE_CONFIG).double().blocks[0].attn
    d_head = attention.numerical_rank(attention.W_OV(attn, 0)).rank  # measured: W_OV^h's rank
    spec = concepts.QUESTIONS["1.4"]
    assert f"at most d_head = {d_head}." in spec.why and f"rank at most {d_head}:" in spec.wrong["a"]
    assert _large_numbers(spec.why + spec.wrong["a"]) == {d_head}


def test_unanswered_bad_and_unknown_questions():
    question, spec = CHOICES[0]
    assert exercises.check_concept(question, None).status == NOT_ATTEMPTED
    assert "one letter of" in exercises.check_concept(question, "z").message
    assert "whole number" in exercises.check_concept(NUMBERS[0][0], "many").message
    with pytest.raises(ValueError, match="no concept question '0.9'"):
        exercises.check_concept("0.9", "a")
    assert spec.answer in exercises.concept_answer(question)


def _asked(number):
    """{question id: (the Markdown cell before its check, the check's output texts)} in one notebook."""
    cells = notebook_files.cells(notebook_files.notebook(number))
    asked = {}
    for i, cell in enumerate(cells):
        for question, answer in re.findall(r'check_concept\("([\d.]+)", (\w+)\)', cell.source):
            assert answer == "None", f"question {question} is answered in the committed notebook"
            markdown = next(c.source for c in reversed(cells[:i]) if c.cell_type == "markdown")
            asked[question] = (markdown, [t for output in cell.outputs for t in notebook_files.texts(output)])
    return asked


@pytest.mark.parametrize("number", ASKED_IN)
def test_each_notebook_asks_its_questions_above_an_unanswered_check(number):
    asked = _asked(number)
    mine = [q for q in concepts.QUESTIONS if q.split(".")[0] == str(int(number))]
    assert sorted(asked) == sorted(mine) and len(mine) >= 3
    for question, (markdown, shown) in asked.items():
        assert f"Question {question}" in markdown
        spec = concepts.QUESTIONS[question]
        assert all(f"${name} = {value}$" in markdown for name, value in spec.asked_at.items())  # the sizes it is built at
        if isinstance(spec, concepts.Choice):
            assert re.findall(r"^\(([a-z])\) ", markdown, re.M) == spec.letters()
        assert shown and all("not attempted yet" in text for text in shown)


def _options() -> dict[str, dict[str, str]]:
    """{choice question id: {letter: the option's text as its notebook's Markdown asks it}}."""
    options = {}
    for number in ASKED_IN:
        for question, (markdown, _) in _asked(number).items():
            if isinstance(concepts.QUESTIONS[question], concepts.Choice):
                options[question] = dict(re.findall(r"^\(([a-z])\) (.*?)\s*$", markdown, re.M))
    return options


def _shown_length(option: str) -> int:
    """About how many characters an option shows once its LaTeX is rendered: $\\mathbb R^{d_{\\text{head}}}$
    counts as R d head, a symbol (\\partial, \\top) as one character, and markup as none."""
    shown = re.sub(r"\\(operatorname|text|mathrm|mathbf|mathbb|tfrac|,|\s)", "", option)
    shown = re.sub(r"\\[A-Za-z]+", "x", shown)
    return len(re.sub(r"[${}^_*]", "", shown))


def test_guessing_by_position_or_length_scores_what_chance_scores():
    """Over all choice questions, always answering the same place (a, b, c, d or the last option) or the
    longest or shortest option is right about as often as a random guess: within one question of it."""
    options = _options()
    assert sorted(options) == sorted(q for q, _ in CHOICES)
    chance = sum(1 / len(letters) for letters in options.values())  # expected score of a uniform guess
    right = {q: concepts.QUESTIONS[q].answer for q in options}

    def score(pick) -> float:  # pick(options of one question) -> the letters it picks, one of them at random
        return sum((right[q] in picks) / len(picks) for q, picks in ((q, pick(o)) for q, o in options.items()) if picks)

    for letter in "abcd":
        by_letter = score(lambda o, letter=letter: [letter] if letter in o else [])
        assert abs(by_letter - sum(1 / len(o) for o in options.values() if letter in o)) <= 1, (letter, by_letter)
    assert abs(score(lambda o: [max(o)]) - chance) <= 1  # the last letter
    for extreme in (max, min):
        def picks(o, extreme=extreme):
            best = extreme(_shown_length(text) for text in o.values())
            return [letter for letter, text in o.items() if _shown_length(text) == best]

        assert abs(score(picks) - chance) <= 1, (extreme.__name__, score(picks), chance)


def test_question_1_6_parameters_stay_and_scores_grow_with_the_heads():
    """At d = 96, 2 heads and 6 heads: the same parameter count, and three times as many scores S^h_ts."""
    counts, scores = [], []
    for H in (2, 6):
        attn = GPT(GPTConfig(V=5, T_max=8, d=96, H=H, L=1)).blocks[0].attn
        q, k, _ = attn.qkv(torch.randn(1, 8, 96))
        counts.append(_numel(attn.parameters()))
        scores.append(attn.attention_matrices(q, k).numel())  # (1, H, T, T)
    assert counts[0] == counts[1] and scores[1] == 3 * scores[0]
    assert "three times as many" in concepts.QUESTIONS["1.6"].why and concepts.QUESTIONS["1.6"].answer == "b"


def test_question_7_2_a_step_with_frozen_weights_costs_about_two_forward_passes():
    """FlopCounterMode on the course model (meta device): with every weight frozen and the gradient taken
    only at X^(0), forward + backward is about twice the forward pass (a little more: attention's own
    products still need both gradients), not three times."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = GPT(COURSE_CONFIG).requires_grad_(False)
        X0 = torch.randn(4, 64, COURSE_CONFIG.d, requires_grad=True)  # (B, T, d)
    counted = []
    for backward in (False, True):
        counter = FlopCounterMode(display=False)
        with counter:
            Z = model.forward_from_embeddings(X0, explicit=True)  # (B, T, V)
            if backward:
                Z.sum().backward()
        counted.append(counter.get_total_flops())
    ratio = counted[1] / counted[0]
    assert 2 < ratio < 2.2, ratio
    assert "a little over two forward passes" in concepts.QUESTIONS["7.2"].why
