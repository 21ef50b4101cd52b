"""Every hidden variant tells each typical mistake from the right answer, whatever the build's offset.

`assign` draws one secret offset per build; the hidden case runs the checker with its seeds and drawn
points moved by it (gptlib.checking.variants). A draw that happens to miss the one point separating a
mistake (rank_bounds: no shape with T < d_head) would give the whole class the hidden point for that
mistake. Here, for every question with a hidden variant, each wrong answer made from the checker's own
table of typical mistakes (or, for notebook 09, the synthetic class's planted mistake per step) fails
the public case and then the hidden case at every offset tried.
"""

import functools

import pytest
import torch

from gptlib import exercises
from gptlib.analysis import attention as circuits
from gptlib.analysis import jacobians
from gptlib.analysis import layernorm as geometry
from gptlib.analysis.counting import measured_table
from gptlib.checking import shifted_seeds
from gptlib.config import COURSE_CONFIG
from gptlib.exercises import attention as heads
from gptlib.exercises import causality as causal
from gptlib.exercises import cost as flops
from gptlib.exercises import counting as counts
from gptlib.exercises import jacobians as jacobian
from gptlib.exercises import layernorm
from gptlib.exercises.answers import build as build_solutions
from gptlib.exercises.answers import concepts
from tests.support import course_class

pytestmark = pytest.mark.slow  # thousands of checker runs: `pytest -m slow`

# assign draws secrets.randbelow(2**31) + 1: any offsets are as good as random ones. How many, by what moves:
MANY = range(1, 501)  # points drawn from a short list of kinds (shapes, configurations), where a draw can miss one
SOME = range(1, 101)  # configurations, weights and inputs drawn from the shifted seeds, beside a fixed course config
FEW = range(1, 21)  # the same, where each run builds, runs or differentiates models for every answer


def _passing(check, answers: dict, offsets) -> dict[str, list[int]]:
    """{mistake: the offsets at which its answer passes the hidden case}, empty when every one fails everywhere."""
    passing = {}
    for offset in offsets:
        with shifted_seeds(offset):
            for name, answer in answers.items():
                if check(*answer):
                    passing.setdefault(name, []).append(offset)
    return passing


def _table(mistakes: dict) -> dict:
    """A checker's table {mistake: its answer as a function of the checker's arguments}, as one-answer calls."""
    return {name: (answer,) for name, answer in mistakes.items()}


def _head_circuits() -> dict:
    right = {"W_QK": circuits.W_QK, "W_OV": circuits.W_OV}
    answers = {}
    for which, mistakes in (("W_QK", heads.QK_MISTAKES), ("W_OV", heads.OV_MISTAKES)):
        for name, wrong in mistakes.items():
            pair = {**right, which: wrong}
            answers[name] = (lambda attn, h, pair=pair: (pair["W_QK"](attn, h), pair["W_OV"](attn, h)),)
    return answers


def _counts(public: list) -> dict:
    """count(c) = numel + each mistake's difference, for the mistakes that make a difference on the public configs
    (a difference of tied models only is no mistake where every config is untied, and the other way round)."""
    return {name: (lambda c, delta=delta: counts.numel(c) + delta(c),)
            for name, delta in counts.count_mistakes().items() if any(delta(c) for c in public)}


def _table_rows() -> dict:
    public = [COURSE_CONFIG, *counts.random_configs(6, tied=False)]
    answers = {}
    for row in range(5):
        for name, delta in counts.count_mistakes(row=row).items():
            if any(delta(c) for c in public):
                answers[f"row {row}: {name}"] = (
                    lambda c, row=row, delta=delta: [v + (delta(c) if i == row else 0)
                                                     for i, v in enumerate(measured_table(c)[:5])],)
    return answers


def _layer_norm() -> dict:
    answers = {name: (wrong, geometry.radial_rescale) for name, wrong in layernorm.PROJECT_MISTAKES.items()}
    answers.update({name: (geometry.center, wrong) for name, wrong in layernorm.RESCALE_MISTAKES.items()})
    return answers


def _jacobians() -> dict:
    def truth(block, X):
        return jacobians.block_jacobian(jacobian.post_norm_twin(block), X).detach()

    return {name: (lambda block, X, wrong=wrong: wrong(block, X, truth(block, X)),)
            for name, wrong in jacobian.JACOBIAN_MISTAKES.items()}


def _maps() -> dict:
    """The wrong maps the checker names, each made from the dependencies it measures itself."""
    def measured(model, idx):
        M, tol = causal.dependency(model, causal._MAP_CONFIG.V, idx)
        return M > tol

    wrong = {"transposed": lambda truth: truth.T, "itself only": lambda truth: torch.eye(len(truth), dtype=torch.bool),
             "x_s and every later token": causal._suffix_closure, "changes piling up": causal._prefix_closure,
             "no dependence": torch.zeros_like}
    return {name: (lambda model, idx, f=f: f(measured(model, idx)).double(),) for name, f in wrong.items()}


def _number_question(question: str) -> tuple:
    """Concept question `question`'s checker for a function answer, and its typical mistakes as such functions:
    each built, by the question's own builder, at the sizes it is called with."""
    build, _ = concepts.ASKED_ELSEWHERE[question]
    stated = concepts.QUESTIONS[question]

    def mistake(index: int):
        return lambda *sizes: list(build(**dict(zip(stated.asked_at, sizes))).mistakes.values())[index]()

    return ((lambda answer: exercises.check_concept(question, answer)),
            {name: (mistake(i),) for i, name in enumerate(stated.mistakes)})


BUILD = {"layer_norm_module": "check_layer_norm_module(LayerNorm)", "attention_head": "check_attention_head(AttentionHead)",
         "multi_head_attention": "check_multi_head_attention(MultiHeadAttention)", "mlp": "check_mlp(MLP)",
         "block": "check_block(Block)", "gpt": "check_gpt(GPT)", "init": "check_init(init_weights, GPT)"}


@functools.cache
def _typical_09() -> dict:
    namespace = {"build_solutions": build_solutions}
    exec(course_class.TYPICAL_09, namespace)
    return namespace


def _build_step(step: str) -> tuple:
    from gptlib.exercises import build_track

    namespace = _typical_09()
    return (lambda: eval(f"build_track.{BUILD[step]}", {**namespace, "build_track": build_track})), {"the planted mistake": ()}


QUESTIONS = {  # question: (checker, {mistake: the answer's arguments}, offsets)
    "factor_pair_dimension": lambda: (heads.check_factor_pair_dimension, _table(heads.FACTOR_MISTAKES), MANY),
    "rank_bounds": lambda: (heads.check_rank_bounds, _table(heads.RANK_MISTAKES), MANY),
    "training_flops": lambda: (flops.check_training_flops, _table(flops.FLOP_MISTAKES), MANY),
    "attention_takeover": lambda: (flops.check_attention_takeover, _table(flops.TAKEOVER_MISTAKES), MANY),
    "weight_decay": lambda: (layernorm.check_weight_decay, _table(layernorm.DECAY_MISTAKES), SOME),  # autograd per scale
    "head_circuits": lambda: (heads.check_head_circuits, _head_circuits(), SOME),
    "layer_norm": lambda: (layernorm.check_layer_norm, _layer_norm(), SOME),
    "parameter_count": lambda: (counts.check_parameter_count,
                                _counts([COURSE_CONFIG, *counts.random_configs(11, tied=None)]), SOME),
    "tied_count": lambda: (counts.check_tied_count, _counts(
        [COURSE_CONFIG.replace(tie_weights=True), *counts.random_configs(7, tied=True, seed=1)]), SOME),
    "parameter_table": lambda: (counts.check_parameter_table, _table_rows(), SOME),
    "post_norm_jacobian": lambda: (jacobian.check_post_norm_jacobian, _jacobians(), FEW),
    "dependency_map": lambda: (causal.check_dependency_map, _maps(), FEW),
    **{step: (lambda step=step: (*_build_step(step), FEW)) for step in BUILD},
    **{f"concept_{q.replace('.', '_')}": (lambda q=q: (*_number_question(q), FEW)) for q in concepts.ASKED_ELSEWHERE},
}


def test_every_question_with_a_hidden_variant_is_here():
    from tests.course.test_assign import MUST_MOVE

    assert set(QUESTIONS) == {q for qs in MUST_MOVE.values() for q in qs} | {"post_norm_jacobian", "dependency_map"}


@pytest.mark.parametrize("question", QUESTIONS)
def test_each_typical_mistake_fails_the_hidden_case_at_every_offset(question):
    check, answers, offsets = QUESTIONS[question]()
    assert answers
    assert not [name for name, answer in answers.items() if check(*answer)], "each mistake fails the public case"
    assert _passing(check, answers, offsets) == {}
