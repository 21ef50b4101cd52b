"""Concept questions: short checks a learner answers before moving on, with the answer kept out of sight.

A question is asked in its notebook's Markdown (its id, "7.1", is the notebook's number and its
place there); the learner answers in the code cell below it:

    exercises.check_concept("7.1", None)   # not attempted yet: the committed state
    exercises.check_concept("7.1", "b")    # passed, with the reason; or failed, with what that choice misses

A choice question takes one letter; a number question takes a whole number (a typical wrong
number earns the mistake that produces it), or a function of the sizes the question states that
returns it, which a hidden variant also asks at other sizes (ASKED_ELSEWHERE). Each wrong letter
and typical wrong number is a checking.mistakes.Mistake, named in the class report. `concept_answer(id)`
reveals the answer and why. Numbers that a gptlib function computes are computed by it here, never
typed. The checking itself (checking/sealed.py) reads these questions only through their sealed
records, so that a class release can check answers without this file.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ...analysis import attention, cost, decomposition, jacobians, layernorm
from ...analysis.counting import theorem_5_2
from ...checking.mistakes import Mistake
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


def _final_norm_zero_singular_values(T: int, L: int, d: int = 16) -> int:
    """Singular values of d LN_f(X^(L)) / d X^(0) for a random float64 pre-norm stack (eps = 1e-5) that are zero
    to rounding."""
    with seeded(0):
        model = GPT(GPTConfig(V=5, T_max=T, d=d, H=2, L=L)).double()
        X = torch.randn(T, d, dtype=torch.float64)

    def normalized_top(X):  # (B, T, d) -> (B, T, d): the blocks, then LN_f
        for block in model.blocks:
            X = block(X)
        return model.ln_f(X)

    s = torch.linalg.svdvals(jacobians.jacobian_of(normalized_top, X).detach())  # (T d,), largest first
    return int((s < 1e-13 * s[0]).sum())  # LN_f's damped radial ones sit near 1e-5 x largest


def _attention_rank(d: int, H: int, T: int) -> int:
    """Numerical rank of one random head's causal T x T attention matrix A^h."""
    with seeded(0):
        attn = GPT(GPTConfig(V=5, T_max=T, d=d, H=H, L=1)).blocks[0].attn
        X = torch.randn(1, T, d)
    q, k, _ = attn.qkv(X)
    return attention.numerical_rank(attn.attention_matrices(q, k)[0, 0].detach()).rank


def _mlp_parameters(d: int, d_ff: int) -> int:
    """Parameters of one MLP sublayer of width d and hidden width d_ff, counted from the module."""
    return sum(p.numel() for p in GPT(GPTConfig(V=5, T_max=4, d=d, H=4, L=1, d_ff=d_ff)).blocks[0].mlp.parameters())


def _gained_layer_norm_image_dimension(d: int, k: int) -> int:
    """Rank of u -> gamma * LN(u)'s Jacobian (eps = 0, beta = 0) at a random u, for a random gain gamma whose
    first k entries are 0: the dimension of that map's image."""
    with seeded(0):
        u = torch.randn(1, d, dtype=torch.float64)  # one row
        gamma = torch.randn(d, dtype=torch.float64)
    gamma[:k] = 0
    return attention.numerical_rank(jacobians.jacobian_of(lambda U: gamma * layernorm.layer_norm(U), u)).rank


def _block_parameters(d: int) -> int:
    """Parameters of one block of width d (d_ff = 4d) under Theorem 5.2's convention, counted from the module."""
    return sum(p.numel() for p in GPT(GPTConfig(V=5, T_max=4, d=d, H=4, L=1)).blocks[0].parameters())


def _window_zeros(T: int, w: int, L: int) -> int:
    """Entries (t, s) of the dependency map of L blocks whose heads see s in (t - w, t], that no weights make
    nonzero: those outside the L-step reach of one block's window (the residual path keeps each step's own row)."""
    t, s = torch.arange(T)[:, None], torch.arange(T)[None, :]
    window = ((s <= t) & (s > t - w)).double()  # (T, T): who one block lets row t read
    reach = torch.linalg.matrix_power(window, L)  # (T, T): > 0 where some L-step path exists
    return int((reach == 0).sum())


def _multi_query_crossover(d: int, H: int) -> int:
    """The T where a multi-query block's scores + aggregation (4 T^2 d: all H heads, d_head each) equal its
    projections (W_Q, W_O d x d; the shared W_K, W_V d x d_head) and MLP (d_ff = 4d), in FLOPs per token."""
    config = COURSE_CONFIG.replace(d=d, H=H)
    per_token = 2 * (2 * d * d + 2 * d * config.d_head) + 2 * 2 * d * config.d_ff  # multiply-add = 2 FLOPs
    T, remainder = divmod(per_token, 4 * d)  # attention: 4 T d per token
    assert remainder == 0, "the crossover is a whole number for these sizes"
    return T


def _writes_without_P_and_b_O(H: int, ell: int) -> int:
    """Writes that make up X^(ell) of a pre-norm GPT with H heads, no positional embedding and no bias b_O:
    gptlib's labels of the first ell blocks, less P's and the b_O ones."""
    model = GPT(GPTConfig(V=5, T_max=4, d=2 * H, H=H, L=ell))  # the labels read the configuration only
    return len([label for label in decomposition.write_labels(model) if label != "P" and not label.endswith("b_O")])


def window_question(T: int, w: int, L: int) -> Number:
    """Question 6.3: the entries of a T x T dependency map that L blocks with a sliding window of w keep at zero."""
    reach = L * (w - 1)
    return Number(
        {"T": T, "w": w, "L": L},
        lambda: _window_zeros(T, w, L),
        lambda n: f"each block lets row t read w - 1 = {w - 1} rows back, and L blocks chain that to L (w - 1) = "
        f"{reach}: the zeros are the pairs with s > t or t - s > {reach}, {n:,} for T = {T}.",
        {
            Mistake("window-zeros-causal-mask-only",
                "that is the causal mask's count, s > t: the window also cuts pairs too far back"): lambda: T * (T - 1) // 2,
            Mistake("window-zeros-one-block-reach",
                "that is one block's reach, w - 1: the next block reads rows that already hold earlier ones"):
                lambda: _window_zeros(T, w, 1),
            Mistake("window-zeros-reach-w",
                "each block reaches w - 1 rows back, not w: the window (t - w, t] holds t itself"):
                lambda: T * (T - 1) // 2 + sum(T - gap for gap in range(L * w + 1, T)),
        },
    )


def gpt2_block_question(d: int) -> Number:
    """Question 5.3: the parameters of one block of width d (d_ff = 4d) with biases on W_Q, W_K, W_V too."""
    return Number(
        {"d": d},
        lambda: _block_parameters(d) + 3 * d,  # b_Q, b_K, b_V: one vector of width H d_head = d each
        lambda n: f"Theorem 5.2's 12 d^2 + 10 d, plus three bias vectors of width d: 12 d^2 + 13 d = {n:,} for d = {d}.",
        {
            Mistake("gpt2-block-no-qkv-biases",
                "that is Theorem 5.2's block: add b_Q, b_K and b_V"): lambda: _block_parameters(d),
            Mistake("gpt2-block-one-qkv-bias",
                "each of b_Q, b_K, b_V has d = H d_head entries, one per column of its projection"): (
                lambda: _block_parameters(d) + d
            ),
            Mistake("gpt2-block-no-layernorms",
                "you left out the two LayerNorms' gains and shifts (4 d)"): lambda: _block_parameters(d) + 3 * d - 4 * d,
        },
    )


def stream_writes_question(H: int, ell: int) -> Number:
    """Question 10.3: the writes that make up X^(ell) in a pre-norm GPT with H heads, no P and no b_O."""
    return Number(
        {"H": H, "ell": ell},
        lambda: _writes_without_P_and_b_O(H, ell),
        lambda n: f"E[x], then per block H heads and the MLP: 1 + ell (H + 1) = {n:,} for ell = {ell}, H = {H}.",
        {
            Mistake("writes-course-model-count",
                "that is the course model's count, 2 + ell (H + 2): this one has no P and no b_O"): (
                lambda: 2 + ell * (H + 2)
            ),
            Mistake("writes-with-b-o", "this model has no b_O either"): lambda: 1 + ell * (H + 2),
            Mistake("writes-with-p", "this model has no P either"): lambda: 2 + ell * (H + 1),
        },
    )


def gained_image_question(d: int, k: int) -> Number:
    """Question 4.3: the dimension of the image of u -> gamma * LN(u) (eps = 0) when k >= 2 gains are 0."""
    return Number(
        {"d": d, "k": k},
        lambda: _gained_layer_norm_image_dimension(d, k),
        lambda n: f"LN's image is a sphere in 1-perp (dimension d - 1); on 1-perp diag(gamma) loses the vectors that "
        f"live on the k zeroed coordinates and sum to 0, k - 1 >= 1 dimensions, so it flattens the sphere into a "
        f"solid ellipsoid of dimension (d - 1) - (k - 1) = d - k = {n:,} for d = {d}, k = {k}.",
        {
            Mistake("gained-image-no-zero-gain",
                "that is the image with no zero gain, Proposition 4.2's sphere: a zero gain removes coordinates"): (
                lambda: d - 2
            ),
            Mistake("gained-image-smaller-sphere",
                "a sphere flattened onto fewer dimensions fills them: the image is a solid ellipsoid, not a smaller "
                "sphere"): lambda: d - k - 2,
            Mistake("gained-image-k-minus-1-zeros",
                "the zeroed coordinates also lose their own sum-to-zero direction, so only k - 1 of them count"): (
                lambda: d - k - 1
            ),
        },
    )


def mlp_question(d: int, d_ff: int) -> Number:
    """Question 2.3: the parameters of one MLP sublayer of width d and hidden width d_ff."""
    return Number(
        {"d": d, "d_ff": d_ff},
        lambda: _mlp_parameters(d, d_ff),
        lambda n: f"W_1 and W_2 have d d_ff entries each, b_1 has d_ff and b_2 has d: 2 d d_ff + d_ff + d = {n:,} "
        f"for d = {d}, d_ff = {d_ff}.",
        {
            Mistake("mlp-count-at-4d",
                "that is the count for d_ff = 4d, 8 d^2 + 5 d: this MLP is narrower"): lambda: 8 * d**2 + 5 * d,
            Mistake("mlp-count-no-biases", "you left out the biases b_1 (d_ff) and b_2 (d)"): lambda: 2 * d * d_ff,
            Mistake("mlp-count-b-1-width-d", "b_1 has d_ff entries, not d"): lambda: 2 * d * d_ff + 2 * d,
        },
    )


def attention_rank_question(d: int, H: int, T: int) -> Number:
    """Question 1.5: the rank of one head's causal T x T attention matrix A^h in a model of width d with H heads."""
    d_head = GPTConfig(d=d, H=H).d_head
    return Number(
        {"d": d, "H": H, "T": T},
        lambda: _attention_rank(d, H, T),
        lambda n: f"A^h is lower triangular (the mask) with a positive diagonal (softmax weights are positive), so its "
        f"determinant, the product of that diagonal, is not zero: rank T = {n}. The softmax is not linear and does "
        f"not keep S^h's rank d_head = {d_head}.",
        {
            Mistake("attention-rank-d-head",
                "that is S^h's rank, d_head: the softmax is not linear, and a triangular matrix with a positive diagonal "
                "has full rank"): lambda: d_head,
            Mistake("attention-rank-d", "that is d: A^h is T x T"): lambda: d,
            Mistake("attention-rank-t-minus-1", "the first row is not lost: A_00 = 1"): lambda: T - 1,
        },
    )


def final_norm_question(T: int, L: int, d: int = 16) -> Number:
    """Question 3.3: the zero singular values of d LN_f(X^(L)) / d X^(0) for a pre-norm stack of L blocks on T
    positions (the answer does not depend on d, which the question leaves open)."""
    return Number(
        {"T": T, "L": L},
        lambda: _final_norm_zero_singular_values(T, L, d),
        lambda n: f"the blocks' identity paths skip their own LayerNorms, so the stack loses no direction; LN_f sits on "
        f"every path and removes the all-ones direction at each position exactly: T = {n} zeros. Its radial "
        "direction is only damped, by eps / (sigma^2 + eps), so it leaves a small singular value, not a zero.",
        {
            Mistake("final-norm-no-zero",
                "no identity path goes around LN_f: it removes the all-ones direction at every position"): lambda: 0,
            Mistake("final-norm-radial-counted",
                "you counted the radial direction too: with eps > 0 LayerNorm damps it but does not remove it"): lambda: 2 * T,
            Mistake("final-norm-every-layernorm",
                "you counted every LayerNorm: the 2L inside the blocks sit on branches, which the identity path skips"):
                lambda: (2 * L + 1) * T,
        },
    )


def multi_query_crossover_question(d: int, H: int) -> Number:
    """Question 7.3: the T at which a multi-query block's T^2 work equals its projections and MLP, at width d."""
    d_head = COURSE_CONFIG.replace(d=d, H=H).d_head
    return Number(
        {"d": d, "H": H},
        lambda: _multi_query_crossover(d, H),
        lambda n: f"per block 4 T^2 d = 4 T d^2 (W_Q, W_O) + 4 T d d_head (the shared W_K, W_V) + 4 T d d_ff (MLP) "
        f"gives T = d + d_head + d_ff = {n:,} for d = {d}, d_head = {d_head}.",
        {
            Mistake("multi-query-crossover-multi-head",
                "that is multi-head attention's crossover, 2d + d_ff: the shared W_K and W_V are d x d_head"): (
                lambda: cost.crossover_T(COURSE_CONFIG.replace(d=d, H=H))
            ),
            Mistake("multi-query-no-k-v",
                "the shared W_K and W_V shrink to d x d_head, they do not vanish"): lambda: d + 4 * d,
            Mistake("multi-query-mlp-only",
                "you compared attention's T^2 work with the MLP only: add the projections"): lambda: 4 * d,
        },
    )


_COURSE_BLOCKS = COURSE_CONFIG.L * (12 * COURSE_CONFIG.d**2 + 10 * COURSE_CONFIG.d)  # Theorem 5.2's blocks, d_ff = 4d
_WIDER = COURSE_CONFIG.replace(d=2 * COURSE_CONFIG.d)  # Question 5.2's model


QUESTIONS: dict[str, Choice | Number] = {
    "6.1": Choice(
        "b",
        "statistics over the positions mix every row into every other, later rows included, so Z_t would move when a "
        "later token changes. P is added to each row alone, and a window of earlier positions is still a causal mask "
        "(Lecture 4, Proposition 4.3): the model stays causal after either.",
        {
            "a": Mistake("dropping-p-breaks-causality",
                "P is added to each row alone: dropping it changes what each row holds, not which positions attention may read"),
            "c": Mistake("window-breaks-causality",
                "a window keeps only positions s <= t (and fewer of them): every later one still gets weight 0"),
        },
    ),
    "6.2": Choice(
        "a",
        "block 0's heads write later tokens' information into row t, and the identity path carries that row up to "
        "Z_t: the masks of the later blocks only stop them from reading later rows, not row t's own contents.",
        {
            "b": Mistake("later-masks-cut-block-0-leak",
                "the later masks cut reads of later rows, but row t itself already holds what block 0 read there, "
                "and the identity path carries it up"),
            "c": Mistake("unmasked-block-averages-away",
                "row t keeps reading earlier positions in every block: attention mixes them into it"),
        },
    ),
    "6.3": window_question(T=10, w=4, L=2),
    "5.1": Choice(
        "c",
        "q_t . b_K / sqrt(d_head) does not depend on s: every score of row t moves by the same amount, and "
        "softmax(z + c 1) = softmax(z), so the weights do not change (a masked score stays at -infinity). That is "
        "one reason a key bias can be left out.",
        {
            "a": Mistake("key-bias-shifts-weights",
                "every key moves by the same vector, so every score of a row moves by the same amount, q_t . b_K; "
                "softmax ignores a shift common to its row"),
            "b": Mistake("key-bias-blurs-weights",
                "the bias adds the same amount to every score of a row, which leaves their differences, and so the "
                "softmax, as they were"),
        },
    ),
    "5.2": Choice(
        "a",
        f"Theorem 5.2 gives {theorem_5_2(COURSE_CONFIG):,} at d = {COURSE_CONFIG.d} and {theorem_5_2(_WIDER):,} at "
        f"d = {_WIDER.d}, {theorem_5_2(_WIDER) / theorem_5_2(COURSE_CONFIG):.2f} times as many: the blocks' "
        f"L (12 d^2 + 10 d) are {_COURSE_BLOCKS / theorem_5_2(COURSE_CONFIG):.0%} of the count and grow as d^2; only "
        "the embeddings, LN_f and W_U grow as d.",
        {
            "b": Mistake("embeddings-dominate-count",
                "the embeddings and W_U are only a few percent of the course model: most parameters sit in the "
                "blocks' d x d and d x d_ff matrices"),
            "c": Mistake("doubling-d-eightfold",
                "a d x d matrix has d^2 entries: doubling d quadruples it, and the number of matrices stays the same"),
        },
    ),
    "5.3": gpt2_block_question(d=768),
    "4.1": Choice(
        "b",
        "the centring removes 3 . 1 (a multiple of 1), and c = -2 flips the sign of the centred vector while sigma "
        "stays positive: LN(3 . 1 - 2u) = -LN(u). Remark 4.3's invariance is for c > 0 only.",
        {
            "a": Mistake("ln-ignores-negative-scale",
                "the shift is centred away, but the scale invariance of Remark 4.3 holds for c > 0 only: c = -2 flips "
                "the centred vector"),
            "c": Mistake("ln-passes-shift",
                "the centring removes any multiple of 1 before the rescaling: the shift does not reach the output"),
        },
    ),
    "4.2": Choice(
        "a",
        "LayerNorm subtracts the row's mean, which is all of a constant row, and returns (nearly) 0 = beta; RMSNorm "
        "only divides by the root mean square, 3 here, and returns (nearly) 1.",
        {
            "b": Mistake("layernorm-keeps-constant-row",
                "LayerNorm centres first: a constant row is all mean, so nothing is left to rescale"),
            "c": Mistake("rmsnorm-centres",
                "RMSNorm does not centre: it divides the row by its root mean square and keeps its direction"),
        },
    ),
    "4.3": gained_image_question(d=20, k=3),
    "2.1": Choice(
        "c",
        "the scores permute with the rows, S(PX) = P S P^T, and softmax acts on each row, so Attn(PX) = P Attn(X): "
        "attention moves information between positions yet ignores their order. The causal mask and P are what tie "
        "it to positions.",
        {
            "a": Mistake("unmasked-head-scrambles-rows",
                "each output row does mix all input rows, but permuting them permutes each query's weights with "
                "them: Attn(PX) = P Attn(X)"),
            "b": Mistake("unmasked-head-ignores-permutation",
                "each query's weights depend on its own row, so the output rows differ, and move with their queries"),
        },
    ),
    "2.2": Choice(
        "a",
        "the reversed mask leaves one weight in row T - 1, A_{T-1,T-1}, and the weights of a row sum to 1, so it is 1 "
        "and the write is v_{T-1}: at the last position every head writes its own position's value, whatever the "
        "scores (under the causal mask the same holds at the first position).",
        {
            "b": Mistake("reversed-mask-blends-values",
                "the mask gives every earlier position weight exactly 0: the blend is over s >= T - 1, one value"),
            "c": Mistake("single-weight-set-by-score", "a softmax over one entry is 1, whatever that entry's score"),
        },
    ),
    "2.3": mlp_question(d=64, d_ff=192),
    "1.1": Choice(
        "a",
        "sum_h W_V W_O^h = W_V (sum_h W_O^h): one product through the inner dimension d_head, so its rank is at most "
        "d_head however many heads add to it. With their own W_V^h the H terms could together reach rank d.",
        {
            "b": Mistake("shared-w-v-rank-h-d-head",
                "the terms share their first factor W_V: their sum is W_V times one d_head x d matrix"),
            "c": Mistake("shared-w-v-rank-h",
                "a shared W_V does not make the writes parallel: W_V (sum_h W_O^h) can have rank up to d_head"),
        },
    ),
    "1.2": Choice(
        "d",
        "W_V R R^-1 W_O = W_V W_O = W_OV: R^-1 undoes R between the two factors. W_QK's R^-T comes from the transpose "
        "in W_Q W_K^T, which W_OV does not have.",
        {
            "a": Mistake("ov-gauge-r-transpose", "W_V R R^T W_O equals W_OV only when R R^T = I, i.e. R orthogonal"),
            "b": Mistake("ov-gauge-r-inverse-transpose",
                "W_V R R^-T W_O equals W_OV only when R R^-T = I, i.e. R symmetric: the R^-T of W_QK comes from the "
                "transpose in W_Q W_K^T, which W_OV does not have"),
            "c": Mistake("ov-gauge-r-on-the-left",
                "R W_V is not even defined for R of size d_head x d_head: W_V has d rows"),
        },
    ),
    "1.3": Choice(
        "c",
        "below full rank the factors' own ranks are free: W_QK = 0 comes from (W_Q, 0) with W_Q of rank d_head and from "
        "(0, W_K). Every invertible R keeps rank(W_Q R) = rank(W_Q), so no R links such pairs: the R-family is all "
        "there is only when W_QK has rank d_head.",
        {
            "a": Mistake("low-rank-factors-always-linked",
                "an invertible R keeps W_Q's rank, and below full rank two pairs with the same product can have "
                "factors of different ranks (W_QK = 0 from (W_Q, 0) and from (0, W_K))"),
            "b": Mistake("low-rank-factors-orthogonal-r",
                "orthogonality plays no part: when the family is all there is, any invertible R works; below full rank "
                "even that fails"),
        },
    ),
    "1.4": Choice(
        "b",
        "each head writes W_V^h W_O^h, into the row space of its slab W_O^h, and the H slabs stacked are W_O, with "
        f"H d_head = {2 * 32} rows: the sublayer's write lies in W_O's row space, of dimension at most {2 * 32} < d = "
        "128, whatever the weights. Only when H d_head = d, as in the course model, can the heads together fill R^d.",
        {
            "a": Mistake("w-o-rows-fill-r-d",
                "W_O has only H d_head rows here, fewer than d: its row space cannot be all of R^d"),
            "c": Mistake("heads-share-one-row-space",
                "the heads write through different slabs W_O^h, whose row spaces differ: together they span up to "
                "H d_head dimensions, more than one head's"),
        },
        {"d": 128, "H": 2},
    ),
    "1.5": attention_rank_question(d=128, H=8, T=64),
    "1.6": Choice(
        "b",
        "no weight of W_Q, W_K, W_V or W_O has a side of length T: the parameters (4 d^2 + d) stay; each head forms "
        "a T x T score matrix, so twice the length makes four times as many scores.",
        {
            "a": Mistake("attention-weights-per-position",
                "the same weights act on every position: attention has no weight per position (only P does)"),
            "c": Mistake("scores-double-with-t",
                "each head forms a T x T score matrix: its T^2 entries quadruple when T doubles"),
        },
    ),
    "3.1": Choice(
        "b",
        "each block's Jacobian is 1/2 I + DF, about 1/2 I, and the chain rule multiplies L of them: about "
        "(1/2)^L = 2^-L. The exact identity of I + DF is what keeps a deep residual stack's gradient from fading "
        "(Remark 3.3).",
        {
            "a": Mistake("half-skip-keeps-identity",
                "the skip contributes its own coefficient times I: 1/2 I here, not I"),
            "c": Mistake("half-skip-one-factor",
                "every block contributes its own factor 1/2, and the chain rule multiplies all L of them"),
        },
    ),
    "3.2": Choice(
        "c",
        "LN_f divides each row by its own spread: the longer the rows the later blocks build, the smaller w's "
        "share of the normalized row, though w itself arrived intact.",
        {
            "a": Mistake("ln-f-passes-w-unchanged",
                "w arrives intact, but LN_f divides the whole row, w included, by the row's spread, which the later "
                "writes increase"),
            "b": Mistake("longer-rows-carry-w-further",
                "LN_f removes the rows' scale before W_U reads them: a longer row does not carry w further"),
        },
    ),
    "3.3": final_norm_question(T=6, L=3),
    "7.1": Choice(
        "c",
        "per token the projections and the MLP multiply a row of width d by d x d and d x d_ff matrices: (8 d^2 + "
        "4 d d_ff) L quadruples; each query's scores and aggregation take 4 L T d, which doubles.",
        {
            "a": Mistake("attention-flops-quadratic-in-d",
                "attention's scores and aggregation take 4 L T d per token: linear in d, so they only double"),
            "b": Mistake("projection-flops-linear-in-d",
                "the projections and the MLP take 8 L d^2 + 4 L d d_ff per token: quadratic in d"),
        },
    ),
    "7.2": Choice(
        "a",
        "autograd forms only the gradients a trainable weight needs: the backward pass runs through LN_f and W_U "
        "(small) and the last block, at about twice its forward cost, and stops there. The last block is about 1/L "
        "of the forward work, so a step costs about 1 + 2/L forward passes.",
        {
            "b": Mistake("backward-always-two-forwards",
                "no gradient is needed below the last block: the backward pass stops there"),
            "c": Mistake("backward-through-frozen-blocks",
                "d loss/dX below the last block is needed by no trainable weight: autograd does not form it"),
        },
    ),
    "7.3": multi_query_crossover_question(d=1024, H=16),
    "10.1": Choice(
        "c",
        "X^(L) is built by the blocks' additions alone (pre-norm); LN_f, whichever norm it is, acts only after "
        "X^(L) is complete. What changes is how each write reaches the logits, not the split of the stream.",
        {
            "a": Mistake("rmsnorm-breaks-stream-split",
                "the final norm acts after X^(L) is complete: the writes add up to X^(L) whatever comes after it"),
            "b": Mistake("split-needs-centred-writes",
                "the split is of X^(L), before any final norm: centred or not, the writes add up to it"),
            "d": Mistake("split-reads-final-gain",
                "the final norm's gain acts after X^(L) is complete: the split of X^(L) does not read it"),
        },
    ),
    "10.2": Choice(
        "b",
        "patching measures what changes when the clean write replaces the corrupted one: if the head writes about "
        "the same in both runs, putting the clean write back changes little, however much that write adds to the "
        "logits in both.",
        {
            "a": Mistake("all-ones-write-direct-contribution",
                "LN_f's centring removes a write along the all-ones direction, so such a write would have a direct "
                "contribution near zero, not a large one"),
            "c": Mistake("patching-restores-attention-pattern",
                "patching, as part 4 defines it, replaces the head's write itself: what the head wrote in the clean "
                "run is put back, whatever its attention pattern was"),
        },
    ),
    "10.3": stream_writes_question(H=8, ell=4),
}


def _heads_and_width(rng: random.Random) -> dict[str, int]:
    H = rng.choice((1, 2, 4, 8, 16))
    return {"d": H * rng.randint(2, 24), "H": H}


def _width_and_zeroed_gains(rng: random.Random) -> dict[str, int]:
    d = rng.randint(6, 40)
    return {"d": d, "k": rng.randint(2, d - 2)}


# Each number question's builder, and the sizes of the kind it states that a hidden variant
# (gptlib.checking.variants) asks it at instead, drawn from the variant's offset: each measured in
# well under a second. A learner who answers with a function of the sizes answers there too.
ASKED_ELSEWHERE: dict[str, tuple[Callable[..., Number], Callable[[random.Random], dict[str, int]]]] = {
    "1.5": (attention_rank_question, lambda rng: {**_heads_and_width(rng), "T": rng.randint(2, 48)}),
    "2.3": (mlp_question, lambda rng: {"d": 4 * rng.randint(2, 32), "d_ff": 8 * rng.randint(1, 48)}),
    "3.3": (final_norm_question, lambda rng: {"T": rng.randint(2, 8), "L": rng.randint(1, 4)}),
    "4.3": (gained_image_question, _width_and_zeroed_gains),
    "5.3": (gpt2_block_question, lambda rng: {"d": 4 * rng.randint(4, 96)}),
    "6.3": (window_question, lambda rng: {"T": rng.randint(4, 40), "w": rng.randint(2, 6), "L": rng.randint(1, 4)}),
    "7.3": (multi_query_crossover_question, _heads_and_width),
    "10.3": (stream_writes_question, lambda rng: {"H": rng.randint(1, 16), "ell": rng.randint(1, 12)}),
}


# Exercise 7's statement (exercises.check_post_norm_statement): the right one of jacobian.STATEMENTS, and what
# each other one misses. Checked, like the questions above, through its sealed record (checking/sealed.py).
POST_NORM_STATEMENT = Choice(
    "b",
    "in post-norm every path through the block, the straight one included, passes through LayerNorm Jacobians.",
    {
        "a": Mistake("post-norm-identity-survives",
            "the LayerNorm after the addition multiplies the whole of I + DF by its own Jacobian"),
        "c": Mistake("post-norm-drops-residual",
            "the residual additions are still there, inside the LayerNorms; only the order changed"),
        "d": Mistake("post-norm-gain-rescales-identity",
            "LayerNorm's Jacobian is not a constant: it projects out the all-ones direction and divides by sigma at "
            "each row"),
        "e": Mistake("post-norm-as-pre-norm-branches",
            "in post-norm each LayerNorm comes after its addition, so it multiplies the identity path too. Nor is (e) "
            "how a pre-norm block factors: there each branch reads the LayerNorm's output, so with the outermost map on the "
            "left the LayerNorm's Jacobian stands to the right, J = (I + DMLP DLN_2)(I + DMHA DLN_1); (e) reverses each "
            "branch's two factors"),
    },
)
SEALED = {**QUESTIONS, "post_norm_statement": POST_NORM_STATEMENT}  # everything exercises/concepts.py checks, by id
