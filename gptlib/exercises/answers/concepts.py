"""Concept questions: short checks a learner answers before moving on, with the answer kept out of sight.

A question is asked in its notebook's Markdown (its id, "7.1", is the notebook's number and its
place there); the learner answers in the code cell below it:

    exercises.check_concept("7.1", None)   # not attempted yet: the committed state
    exercises.check_concept("7.1", "b")    # passed, with the reason; or failed, with what that choice misses

A choice question takes one letter; a number question takes a whole number (a typical wrong
number earns the mistake that produces it). `concept_answer(id)` reveals the answer and why.
Numbers that a gptlib function computes are computed by it here, never typed. The checking itself
(exercises/sealed.py) reads these questions only through their sealed records, so that a class
release can check answers without this file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ...analysis import attention, cost, decomposition, jacobians, layernorm
from ...analysis.counting import theorem_5_2
from ...config import COURSE_CONFIG, GPTConfig
from ...model import GPT
from ...reproducibility import seeded


@dataclass(frozen=True)
class Choice:
    """A multiple-choice question: the right letter, why it is right, and why each other letter is not.
    asked_at: the sizes its Markdown states, where its reasons depend on them."""

    answer: str
    why: str
    wrong: dict[str, str]
    asked_at: dict[str, int] = field(default_factory=dict)

    def letters(self) -> list[str]:
        return sorted([self.answer, *self.wrong])


@dataclass(frozen=True)
class Number:
    """A question answered by a whole number, built for the sizes it is asked at (`asked_at`, which its
    Markdown states): `answer()` computes it, `why(answer)` explains it, and `mistakes` maps each
    typical wrong number's computation to the mistake that produces it. All three read those sizes, so
    a question asked at other sizes has no stale number."""

    asked_at: dict[str, int]
    answer: Callable[[], int]
    why: Callable[[int], str]
    mistakes: dict[str, Callable[[], int]]


def _post_norm_zero_singular_values(T: int, d: int) -> int:
    """Singular values of a random float64 post-norm block's Jacobian (eps = 1e-5) that are zero to rounding."""
    with seeded(0):
        block = GPT(GPTConfig(V=5, T_max=T, d=d, H=2, L=1, norm="post")).double().blocks[0]
        X = torch.randn(T, d, dtype=torch.float64)
    s = torch.linalg.svdvals(jacobians.block_jacobian(block, X).detach())  # (T d,), largest first
    return int((s < 1e-13 * s[0]).sum())  # the damped radial ones sit near 1e-10 x largest


def _score_rank(d: int, H: int, T: int) -> int:
    """Numerical rank of one random head's T x T score matrix S^h."""
    with seeded(0):
        attn = GPT(GPTConfig(V=5, T_max=T, d=d, H=H, L=1)).blocks[0].attn
        X = torch.randn(1, T, d)
    return attention.numerical_rank(attention.scores(attn, X)[0, 0].detach()).rank


def _mlp_parameters(d: int) -> int:
    """Parameters of one MLP sublayer of a model of width d (d_ff = 4d), counted from the module."""
    return sum(p.numel() for p in GPT(GPTConfig(V=5, T_max=4, d=d, H=4, L=1)).blocks[0].mlp.parameters())


def _rms_norm_image_dimension(d: int) -> int:
    """Rank of RMSNorm's Jacobian (eps = 0, gamma = 1) at a random u: the dimension of RMSNorm's image."""
    with seeded(0):
        u = torch.randn(1, d, dtype=torch.float64)  # one row
    return attention.numerical_rank(jacobians.jacobian_of(layernorm.rms_norm, u)).rank


def _block_parameters(d: int) -> int:
    """Parameters of one block of a model of width d (d_ff = 4d), counted from the module."""
    return sum(p.numel() for p in GPT(GPTConfig(V=5, T_max=4, d=d, H=4, L=1)).blocks[0].parameters())


def masked_pairs_question(T: int) -> Number:
    """Question 6.3: the entries (t, s) of a T x T dependency map that a causal model keeps at zero."""
    entries = torch.ones(T, T)  # (t, s)
    return Number(
        {"T": T},
        lambda: int(entries.triu(1).sum()),
        lambda n: f"the pairs with s > t: T (T - 1) / 2 = {n:,} for T = {T}.",
        {
            "you counted the diagonal too: Z_t may depend on x_t itself": lambda: int(entries.triu().sum()),
            "that is every entry: Z_t may depend on x_1, ..., x_t": lambda: int(entries.sum()),
            "that is both off-diagonal triangles: only s > t is forbidden": lambda: int(entries.sum() - entries.trace()),
        },
    )


def block_question(d: int) -> Number:
    """Question 5.3: the parameters of one block of width d (d_ff = 4d)."""
    return Number(
        {"d": d},
        lambda: _block_parameters(d),
        lambda n: f"attention 4 d^2 + d, MLP 8 d^2 + 5 d, two LayerNorms 4 d: 12 d^2 + 10 d = {n:,} for d = {d}.",
        {
            "you left out every bias and LayerNorm parameter: 12 d^2 is only the weight matrices": lambda: 12 * d**2,
            "you left out the two LayerNorms' gains and shifts (4 d)": lambda: 12 * d**2 + 6 * d,
            "that is the attention sublayer alone: add the MLP's 8 d^2 + 5 d and the LayerNorms' 4 d": lambda: 4 * d**2 + d,
        },
    )


def stream_writes_question(L: int, H: int) -> Number:
    """Question 10.3: how many writes make up the final stream of a pre-norm GPT with L blocks of H heads."""
    model = GPT(GPTConfig(V=5, T_max=4, d=2 * H, H=H, L=L))  # the count reads the configuration only
    return Number(
        {"L": L, "H": H},
        lambda: len(decomposition.write_labels(model)),
        lambda n: f"E[x] and P, then per block H heads, the bias b_O and the MLP: 2 + L (H + 2) = {n:,} for L = {L}, "
        f"H = {H}.",
        {
            "b_O belongs to no head, so it is a write of its own in every block": lambda: 2 + L * (H + 1),
            "the embedding is two writes, E[x] and P": lambda: 1 + L * (H + 2),
            "attention writes one term per head, not one per block (Proposition 1.2)": lambda: 2 + 3 * L,
        },
    )


def rms_norm_image_question(d: int) -> Number:
    """Question 4.3: the dimension of RMSNorm's image at width d (eps = 0, gamma = 1)."""
    return Number(
        {"d": d},
        lambda: _rms_norm_image_dimension(d),
        lambda n: f"RMSNorm keeps only the radial move: its image is the whole sphere of radius sqrt(d) in R^d, "
        f"d - 1 = {n:,} for d = {d}.",
        {
            "that is LayerNorm's image, a sphere inside 1-perp: RMSNorm does not centre, so its sphere lies in all "
            "of R^d": lambda: d - 2,
            "that is d: the radial move leaves a sphere, which has one dimension fewer than the space around it":
                lambda: d,
        },
    )


def mlp_question(d: int) -> Number:
    """Question 2.3: the parameters of one MLP sublayer of width d (d_ff = 4d)."""
    return Number(
        {"d": d},
        lambda: _mlp_parameters(d),
        lambda n: f"W_1 and W_2 have d d_ff = 4 d^2 entries each, b_1 has 4d and b_2 has d: 8 d^2 + 5 d = {n:,} "
        f"for d = {d}.",
        {
            "you left out the biases b_1 (4d) and b_2 (d)": lambda: 8 * d**2,
            "b_1 has d_ff = 4d entries, not d": lambda: 8 * d**2 + 2 * d,
            "that is one weight matrix: the MLP has two, W_1 and W_2": lambda: 4 * d**2,
        },
    )


def score_rank_question(d: int, H: int, T: int) -> Number:
    """Question 1.5: the rank of one head's T x T score matrix S^h in a model of width d with H heads."""
    d_head = GPTConfig(d=d, H=H).d_head
    return Number(
        {"d": d, "H": H, "T": T},
        lambda: _score_rank(d, H, T),
        lambda n: f"S^h = X W_QK^h X^T / sqrt(d_head) passes through d_head = d/H = {d_head} dimensions: "
        f"rank min(T, d_head) = {n}.",
        {
            "that is T: a T x T matrix could have rank T, but S^h factors through d_head dimensions": lambda: T,
            "that is d: the score matrix passes through W_QK^h, of rank d_head = d/H": lambda: d,
            f"that is d_head for H = {COURSE_CONFIG.H}; here H = {H}": lambda: COURSE_CONFIG.replace(d=d).d_head,
        },
    )


def post_norm_question(T: int, d: int = 16) -> Number:
    """Question 3.3: the zero singular values of a post-norm block's (T d) x (T d) Jacobian (the answer
    does not depend on d, which the question leaves open)."""
    return Number(
        {"T": T},
        lambda: _post_norm_zero_singular_values(T, d),
        lambda n: f"the last LayerNorm's Jacobian removes the all-ones direction at each position exactly: T = {n} "
        "zeros. The row's own radial direction is only damped, by eps / (sigma^2 + eps), so it leaves a tiny singular "
        "value, not a zero.",
        {
            "you counted the radial direction too: with eps > 0 LayerNorm damps it but does not remove it": lambda: 2 * T,
            "you added both LayerNorms' losses: the first one's directions are not lost again at the output; only the "
            "last LayerNorm's one per position remains, for generic weights": lambda: 2 * 2 * T,  # 2 LayerNorms x 2 directions
            "no identity term survives a post-norm block to keep every direction": lambda: 0,
        },
    )


def crossover_question(d: int) -> Number:
    """Question 7.3: the T at which attention's T^2 work equals a block's projections and MLP, at width d."""
    config = COURSE_CONFIG.replace(d=d)  # d_ff = 4d
    return Number(
        {"d": d},
        lambda: cost.crossover_T(config),
        lambda n: f"per block 4 T^2 d = 8 T d^2 + 4 T d d_ff gives T = 2d + d_ff = 6d = {n:,} for d = {d}.",
        {
            "you compared attention's T^2 work with the projections only (T = 2d): add the MLP": lambda: 2 * config.d,
            "you compared attention's T^2 work with the MLP only (T = d_ff): add the projections": lambda: config.d_ff,
            f"that is the course width's crossover (d = {COURSE_CONFIG.d}): this question asks about d = {d}": (
                lambda: cost.crossover_T(COURSE_CONFIG)
            ),
        },
    )


_COURSE_BLOCKS = COURSE_CONFIG.L * (12 * COURSE_CONFIG.d**2 + 10 * COURSE_CONFIG.d)  # Theorem 5.2's blocks, d_ff = 4d


QUESTIONS: dict[str, Choice | Number] = {
    "6.1": Choice(
        "b",
        "embeddings, LayerNorms, MLPs, residual additions and W_U act on each position alone; only attention mixes "
        "positions, and the mask gives every later position weight exactly 0.",
        {
            "a": "the MLP acts on each position alone: it cannot bring in another position's token",
            "c": "LN_f normalizes each row by its own statistics: it never looks at another position",
        },
    ),
    "6.2": Choice(
        "a",
        "without the mask every head spreads weight over all positions, so Z_t moves when a later token changes "
        "(the upper triangle of Figure 6.2).",
        {
            "b": "the position-wise parts stay position-wise, but attention now reads later positions, and the "
            "blocks pass that on to Z_t",
            "c": "attention still reads earlier positions too: the model does not become position-wise",
        },
    ),
    "6.3": masked_pairs_question(T=10),
    "5.1": Choice(
        "c",
        "Theorem 5.2's convention: no bias on W_Q, W_K, W_V or W_U; biases on W_O, W_1 and W_2.",
        {
            "a": "the output projection carries a bias b_O (the 4d^2 + d of attention)",
            "b": "the MLP's W_1 carries a bias b_1 of d_ff entries",
        },
    ),
    "5.2": Choice(
        "a",
        f"the blocks hold L (12 d^2 + 10 d) = {_COURSE_BLOCKS / theorem_5_2(COURSE_CONFIG):.0%} of the course model's "
        f"{theorem_5_2(COURSE_CONFIG):,}; the embeddings, LN_f and W_U do not grow with L.",
        {
            "b": "the count is linear in L, not quadratic: each block adds the same 12 d^2 + 10 d",
            "c": "every block has its own weights: nothing is shared between blocks",
        },
    ),
    "5.3": block_question(d=COURSE_CONFIG.d),
    "4.1": Choice(
        "b",
        "c = -2 flips the sign of u - mean(u) 1 and leaves sigma positive: LN(-2u) = -LN(u). Remark 4.3's "
        "invariance is for c > 0 only.",
        {
            "a": "the scale invariance of Remark 4.3 holds for c > 0: a negative c flips the centred vector",
            "c": "the radial move divides by sigma(cu) = |c| sigma(u), so no factor of 2 survives",
        },
    ),
    "4.2": Choice(
        "a",
        "RMSNorm divides by the root mean square without centring first, so its output need not sum to zero.",
        {
            "b": "RMSNorm keeps the radial rescaling (that is all it does): its outputs all have length sqrt(d); it is "
            "the centring it drops",
            "c": "they agree only on inputs that are already centred, as the Aside 4.4 cells showed",
        },
    ),
    "4.3": rms_norm_image_question(d=20),
    "2.1": Choice(
        "c",
        "only attention mixes rows; the MLP, LayerNorm and the residual additions act on each position alone.",
        {
            "a": "the MLP applies the same map to each row separately: permuting positions permutes its output",
            "b": "the MLP passed both position-wise tests above; attention failed them",
        },
    ),
    "2.2": Choice(
        "a",
        "the weights A_ts are nonnegative and sum to 1 over s <= t: a convex combination, inside the hull.",
        {
            "b": "softmax weights are rarely exactly 0 or 1: the write is a blend of the value rows, not one of them",
            "c": "the weights are nonnegative and sum to 1, so only convex combinations are reachable, not the whole span",
        },
    ),
    "2.3": mlp_question(d=64),
    "1.1": Choice(
        "a",
        "W_OV^h = W_V^h W_O^h maps R^d into R^d_head and back: every output is a combination of the d_head rows of "
        "W_O^h, and the rank of a product is at most its inner dimension.",
        {
            "b": "W_OV^h = W_V^h W_O^h is d x d, with d rows; what limits its rank is the inner dimension d_head that "
            "the product passes through",
            "c": "the softmax acts on the scores, not on W_OV^h: the bound is a property of the weights alone",
        },
    ),
    "1.2": Choice(
        "d",
        "W_Q R (W_K R^-T)^T = W_Q R R^-1 W_K^T = W_QK: the inverse transpose undoes R exactly.",
        {
            "a": "W_Q R (W_K R)^T = W_Q R R^T W_K^T, which equals W_QK only when R is orthogonal",
            "b": "W_Q R (W_K R^-1)^T = W_Q R R^-T W_K^T, which equals W_QK only when R R^-T = I, i.e. R symmetric",
            "c": "R W_Q is not even defined for R of size d_head x d_head: W_Q has d rows",
        },
    ),
    "1.3": Choice(
        "c",
        "when W_Q' W_K'^T = W_Q W_K^T has rank d_head, both W_Q and W_Q' have that matrix's column space, so "
        "W_Q' = W_Q R with R invertible, and then W_K' = W_K R^-T: the R-family is all there is.",
        {
            "a": "W_Q' must have the column space of W_QK (rank d_head), so it is tied to W_Q by an invertible R",
            "b": "orthogonality plays no part: any invertible R works, and only those do",
        },
    ),
    "1.4": Choice(
        "b",
        "each row of A^h X W_OV^h is a combination of rows of W_OV^h, so it lies in W_OV^h's row space, of "
        f"dimension at most d_head = {COURSE_CONFIG.d_head}.",
        {
            "a": "the write is X W_OV^h averaged over positions, and W_OV^h has rank at most "
            f"{COURSE_CONFIG.d_head}: its outputs fill only a {COURSE_CONFIG.d_head}-dimensional subspace",
            "c": "the write is built from the values of the positions the head attends to, not from the query's row",
        },
        {"d": COURSE_CONFIG.d, "H": COURSE_CONFIG.H},
    ),
    "1.5": score_rank_question(d=128, H=8, T=64),
    "1.6": Choice(
        "b",
        "3 H d (d/H) + d^2 + d = 4 d^2 + d for every H that divides d, while each head forms its own T x T score "
        "matrix: H T^2 entries, so three times as many heads form three times as many scores.",
        {
            "a": "each head is narrower, but there are more of them: H d (d/H) = d^2 per projection whatever H is",
            "c": "the parameters stay, but each head forms its own T x T score matrix: H T^2 entries in all",
        },
    ),
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
        "c",
        "in pre-norm the vector rides the identity path; the LayerNorms only see copies of the stream on the branches.",
        {
            "a": "the LayerNorm renormalizes X + w as a whole and shrinks w with it: about 1/sqrt(2) of it survives "
            "the first post-norm block",
            "b": "the additions are there in both, but in post-norm each one is followed by a LayerNorm that rescales "
            "what was added",
        },
    ),
    "3.3": post_norm_question(T=5),
    "7.1": Choice(
        "c",
        "per token the projections and the MLP cost the same at every T, while each token's query meets T keys "
        "and T values: attention's 4 L T d per token doubles with T.",
        {
            "a": "the projections and the MLP multiply each token by the same weights whatever T is: "
            "their cost per token does not move",
            "b": "only attention's part depends on T, and only linearly per token (quadratically per sequence)",
        },
    ),
    "7.2": Choice(
        "a",
        "for each product Y = X W the backward pass still forms dL/dX = dL/dY W^T, a product of the forward one's "
        "size, and skips only dL/dW = X^T dL/dY: 2 + 2 FLOPs per weight per token. Attention's own products, whose "
        "operands are both activations, still need both gradients, so a step costs a little over two forward passes.",
        {
            "b": "the second backward product of each Y = X W, dL/dW = X^T dL/dY, is exactly what freezing the "
            "weights skips",
            "c": "dL/dX = dL/dY W^T is a product as large as the forward one, and the backward pass needs it at "
            "every layer to reach X^(0)",
        },
    ),
    "7.3": crossover_question(d=1024),
    "10.1": Choice(
        "c",
        "a post-norm block applies LN_2 to Y + MLP(Y): every earlier write is shifted and divided by one row statistic, "
        "so X^(L) is no longer the plain sum of what each head and MLP wrote.",
        {
            "a": "the additions are the same, but in post-norm a LayerNorm follows each of them and rescales the "
            "whole stream, the earlier writes included",
            "b": "the heads' writes are rescaled by the LayerNorm after the attention addition just as the MLP's are",
            "d": "a unit gain still divides by sigma and subtracts the mean: the rescaling stays, whatever gamma is",
        },
    ),
    "10.2": Choice(
        "b",
        "patching puts the clean write into the stream and reruns every later layer, so it sees effects that go "
        "through them; direct attribution reads only what the write says to W_U through LN_f.",
        {
            "a": "a head whose clean write restores most of the gap is needed: removing its information costs the "
            "prediction, whatever its direct contribution",
            "c": "the two measure different things: the direct path ignores later layers, patching includes them, so "
            "they need not agree",
        },
    ),
    "10.3": stream_writes_question(L=6, H=8),
}


# Exercise 7's statement (exercises.check_post_norm_statement): the right one of jacobian.STATEMENTS, and what
# each other one misses. Checked, like the questions above, through its sealed record (exercises/sealed.py).
POST_NORM_STATEMENT = Choice(
    "b",
    "in post-norm every path through the block, the straight one included, passes through LayerNorm Jacobians.",
    {
        "a": "the LayerNorm after the addition multiplies the whole of I + DF by its own Jacobian",
        "c": "the residual additions are still there, inside the LayerNorms; only the order changed",
        "d": "LayerNorm's Jacobian is not a constant: it projects out the all-ones direction and divides by sigma at "
        "each row",
        "e": "in post-norm each LayerNorm comes after its addition, so it multiplies the identity path too. Nor is (e) "
        "how a pre-norm block factors: there each branch reads the LayerNorm's output, so with the outermost map on the "
        "left the LayerNorm's Jacobian stands to the right, J = (I + DMLP DLN_2)(I + DMHA DLN_1); (e) reverses each "
        "branch's two factors",
    },
)
SEALED = {**QUESTIONS, "post_norm_statement": POST_NORM_STATEMENT}  # everything exercises/sealed.py checks, by id
