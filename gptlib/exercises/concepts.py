"""Concept questions: short checks a learner answers before moving on, with the answer kept out of sight.

A question is asked in its notebook's Markdown (its id, "7.1", is the notebook's number and its
place there); the learner answers in the code cell below it:

    exercises.check_concept("7.1", None)   # not attempted yet: the committed state
    exercises.check_concept("7.1", "b")    # passed, with the reason; or failed, with what that choice misses

A choice question takes one letter; a number question takes a whole number (a typical wrong
number earns the mistake that produces it). `concept_answer(id)` reveals the answer and why.
Numbers that a gptlib function computes are computed by it here, never typed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .. import cost, jacobians
from ..config import GPTConfig
from ..model import GPT
from ..reproducibility import seeded
from .result import FAILED, NOT_ATTEMPTED, PASSED, Result, Wrong, as_int


@dataclass(frozen=True)
class Choice:
    """A multiple-choice question: the right letter, why it is right, and why each other letter is not."""

    answer: str
    why: str
    wrong: dict[str, str]

    def letters(self) -> list[str]:
        return sorted([self.answer, *self.wrong])


@dataclass(frozen=True)
class Number:
    """A question answered by a whole number: `answer()` computes it; `mistakes` maps a typical
    wrong number's computation to the mistake that produces it."""

    answer: Callable[[], int]
    why: str
    mistakes: dict[str, Callable[[], int]] = field(default_factory=dict)


def _width(d: int) -> GPTConfig:
    return GPTConfig(V=65, T_max=64, d=d, H=4, L=4)


def _post_norm_zero_singular_values(T: int = 8, d: int = 16) -> int:
    """Singular values of a random float64 post-norm block's Jacobian (eps = 0) that are zero to rounding."""
    with seeded(0):
        block = GPT(GPTConfig(V=5, T_max=T, d=d, H=2, L=1, norm="post", ln_eps=0.0, init_std=0.3)).double().blocks[0]
        X = torch.randn(T, d, dtype=torch.float64)
    s = torch.linalg.svdvals(jacobians.block_jacobian(block, X).detach())  # (T d,), largest first
    return int((s < 1e-9 * s[0]).sum())


QUESTIONS: dict[str, Choice | Number] = {
    "3.1": Choice(
        "b",
        "the skip contributes its own coefficient times I and the branch its Jacobian: 1/2 I + DF, which part 1's "
        "check tells apart from I + DF.",
        {
            "a": "the identity comes from the skip's coefficient: a skip scaled by 1/2 contributes (1/2) I",
            "c": "only the skip is scaled, not the branch: DF keeps its factor 1",
        },
    ),
    "3.2": Choice(
        "a",
        "in pre-norm the vector rides the identity path; the LayerNorms only see copies of the stream on the branches.",
        {
            "b": "the LayerNorm renormalizes X + w as a whole and shrinks w with it: about 1/sqrt(2) of it survives "
            "the first post-norm block",
            "c": "the additions are there in both, but in post-norm each one is followed by a LayerNorm that rescales "
            "what was added",
        },
    ),
    "3.3": Number(
        _post_norm_zero_singular_values,
        "the last LayerNorm's Jacobian kills two directions per position when eps = 0, the all-ones one and the "
        "row's own radial one: 2 T = 16 (generic weights add no more).",
        {
            "you counted only the all-ones direction per position: with eps = 0 LayerNorm also kills the radial one": lambda: 8,
            "you added both LayerNorms' losses: the first one's directions are not lost again at the output; only the "
            "last LayerNorm's 2 per position remain, for generic weights": lambda: 32,
            "no identity term survives a post-norm block to keep every direction": lambda: 0,
        },
    ),
    "7.1": Choice(
        "b",
        "per token the projections and the MLP cost the same at every T, while each token's query meets T keys "
        "and T values: attention's 4 L T d per token doubles with T.",
        {
            "a": "the projections and the MLP multiply each token by the same weights whatever T is: "
            "their cost per token does not move",
            "c": "only attention's part depends on T, and only linearly per token (quadratically per sequence)",
        },
    ),
    "7.2": Choice(
        "c",
        "for every forward product Y = X W the backward pass forms dL/dX = dL/dY W^T and dL/dW = X^T dL/dY, "
        "two products of the same size: 4 FLOPs per weight per token against the forward pass's 2.",
        {
            "a": "nothing is recomputed in an ordinary backward pass: the forward activations are stored",
            "b": "the elementwise work (softmax, GELU) is not counted at all: it is O(T d), not a matrix product",
        },
    ),
    "7.3": Number(
        lambda: cost.crossover_T(_width(1024)),
        "per block 4 T^2 d = 8 T d^2 + 4 T d d_ff gives T = 2d + d_ff = 6d.",
        {
            "you compared attention's T^2 work with the projections only (T = 2d): add the MLP": lambda: 2 * 1024,
            "you compared attention's T^2 work with the MLP only (T = d_ff): add the projections": lambda: 4 * 1024,
            "that is the course width's crossover (d = 128): this question asks about d = 1024": (
                lambda: cost.crossover_T(_width(128))
            ),
        },
    ),
}


def _question(question: str) -> Choice | Number:
    if question not in QUESTIONS:
        raise ValueError(f"no concept question {question!r}: they are {', '.join(QUESTIONS)}")
    return QUESTIONS[question]


def _judge(spec: Choice | Number, answer) -> tuple[str, str]:
    """(status, message) of an answer that is not None."""
    if isinstance(spec, Choice):
        if not isinstance(answer, str) or answer.strip().lower() not in spec.letters():
            raise Wrong(f"answer with one letter of {spec.letters()}, got {answer!r:.40}")
        letter = answer.strip().lower()
        if letter == spec.answer:
            return PASSED, f"({letter}): {spec.why}"
        return FAILED, f"({letter}) is not it: {spec.wrong[letter]}. Try another letter."
    number = as_int(answer, "your answer")
    if number == spec.answer():
        return PASSED, f"{number:,}: {spec.why}"
    named = [mistake for mistake, wrong in spec.mistakes.items() if wrong() == number]
    return FAILED, (named[0] if named else f"{number:,} is not it") + ". Try again."


def check_concept(question: str, answer) -> Result:
    """Your answer to concept question `question` ("7.1"): a letter, or a whole number; None = not yet."""
    spec = _question(question)
    label = f"Question {question}"
    if answer is None:
        kind = "a letter" if isinstance(spec, Choice) else "a whole number"
        return Result(label, NOT_ATTEMPTED, f"replace None with your answer ({kind}).")
    try:
        status, message = _judge(spec, answer)
    except Wrong as wrong:
        return Result(label, FAILED, wrong.message)
    return Result(label, status, message)


def concept_answer(question: str) -> str:
    """The answer to concept question `question` and the reason, for when you are stuck."""
    spec = _question(question)
    answer = f"({spec.answer})" if isinstance(spec, Choice) else f"{spec.answer():,}"
    return f"Question {question}: {answer}. {spec.why}"
