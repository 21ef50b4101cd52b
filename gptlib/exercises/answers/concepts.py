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


def _logit_jacobian_rank(T: int, L: int, d: int = 16, V: int = 20) -> int:
    """Singular values of dZ / dX^(0), Z = LN_f(X^(L)) W_U, for a random float64 pre-norm stack of width d
    (eps = 1e-5) with V tokens, that are not zero to rounding."""
    with seeded(0):
        model = GPT(GPTConfig(V=V, T_max=T, d=d, H=2, L=L)).double()
        X = torch.randn(T, d, dtype=torch.float64)

    def logits(X):  # (T, d) -> (T, V): the blocks, LN_f, then W_U
        X = X[None]
        for block in model.blocks:
            X = block(X)
        return (model.ln_f(X) @ model.W_U)[0]

    J = torch.autograd.functional.jacobian(logits, X, vectorize=True).reshape(T * V, T * d)  # batched backward
    s = torch.linalg.svdvals(J)  # (min(T V, T d),), largest first
    return int((s > 1e-13 * s[0]).sum())  # LN_f's damped radial ones sit near 1e-5 x largest, and count


def _attention_rank(d: int, H: int, T: int) -> int:
    """Numerical rank of one random head's causal T x T attention matrix A^h."""
    with seeded(0):
        attn = GPT(GPTConfig(V=5, T_max=T, d=d, H=H, L=1)).blocks[0].attn
        X = torch.randn(1, T, d)
    q, k, _ = attn.qkv(X)
    return attention.numerical_rank(attn.attention_matrices(q, k)[0, 0].detach()).rank


def _gated_mlp_parameters(d: int, d_ff: int) -> int:
    """Parameters of a gated MLP W_2 (GELU(W_1 u) * (W_3 u)) without biases: the course MLP's weight matrices, counted
    from the module, plus a gate W_3 of W_1's shape."""
    mlp = GPT(GPTConfig(V=5, T_max=4, d=d, H=4, L=1, d_ff=d_ff)).blocks[0].mlp
    return mlp.W_1.numel() + mlp.W_2.numel() + mlp.W_1.numel()


def _gained_layer_norm_image_dimension(d: int, k: int) -> int:
    """Rank of u -> gamma * LN(u)'s Jacobian (eps = 0, beta = 0) at a random u, for a random gain gamma whose
    first k entries are 0: the dimension of that map's image."""
    with seeded(0):
        u = torch.randn(1, d, dtype=torch.float64)  # one row
        gamma = torch.randn(d, dtype=torch.float64)
    gamma[:k] = 0
    return attention.numerical_rank(jacobians.jacobian_of(lambda U: gamma * layernorm.layer_norm(U), u)).rank


def _block(d: int) -> torch.nn.Module:
    """One course block of width d (d_ff = 4d), on the meta device: shapes only, no memory, no initialization."""
    with torch.device("meta"):
        return GPT(GPTConfig(V=5, T_max=4, d=d, H=4, L=1)).blocks[0]


def _block_parameters(d: int) -> int:
    """Parameters of one block of width d (d_ff = 4d) under Theorem 5.2's convention, counted from the module."""
    return sum(p.numel() for p in _block(d).parameters())


def _unbiased_gain_only_block_parameters(d: int) -> int:
    """Parameters of one block of width d (d_ff = 4d) with no bias and norms that keep only their gain: the
    course block's parameters, counted from the module, less b_O, b_1, b_2 and each LayerNorm's shift beta."""
    return sum(p.numel() for name, p in _block(d).named_parameters() if not name.rsplit(".", 1)[-1].startswith(("b_", "beta")))


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


def bare_block_question(d: int) -> Number:
    """Question 5.3: the parameters of one block of width d (d_ff = 4d) with no bias anywhere and, for its two norms,
    RMSNorms that keep a gain but have no shift."""
    return Number(
        {"d": d},
        lambda: _unbiased_gain_only_block_parameters(d),
        lambda n: f"the four d x d attention matrices and the two d x 4d MLP matrices, 12 d^2, plus two gains of d: "
        f"12 d^2 + 2 d = {n:,} for d = {d}.",
        {
            Mistake("bare-block-theorem-5-2",
                "that is Theorem 5.2's block, 12 d^2 + 10 d: this one has no b_O, b_1, b_2 and no shifts"):
                lambda: _block_parameters(d),
            Mistake("bare-block-keeps-shifts",
                "an RMSNorm has a gain but no shift beta: 2 d, not 4 d"): lambda: _unbiased_gain_only_block_parameters(d) + 2 * d,
            Mistake("bare-block-no-gains",
                "each RMSNorm keeps its gain, d entries"): lambda: _unbiased_gain_only_block_parameters(d) - 2 * d,
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


def gated_mlp_question(d: int, d_ff: int) -> Number:
    """Question 2.3: the parameters of a gated MLP W_2 (GELU(W_1 u) * (W_3 u)) of width d and hidden width d_ff,
    without biases."""
    return Number(
        {"d": d, "d_ff": d_ff},
        lambda: _gated_mlp_parameters(d, d_ff),
        lambda n: f"W_1 and W_3 map d to d_ff and W_2 maps back, d d_ff entries each, and there is no bias: 3 d d_ff "
        f"= {n:,} for d = {d}, d_ff = {d_ff}.",
        {
            Mistake("gated-mlp-no-gate", "you left out the gate W_3, a third d x d_ff matrix"): lambda: 2 * d * d_ff,
            Mistake("gated-mlp-with-biases",
                "this MLP has no biases: b_1, b_3 (d_ff each) and b_2 (d) are not there"):
                lambda: 3 * d * d_ff + 2 * d_ff + d,
            Mistake("gated-mlp-at-4d",
                "that is the count for d_ff = 4d, 12 d^2: this MLP is narrower"): lambda: 12 * d * d,
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


def logit_jacobian_question(T: int, L: int, d: int = 16, V: int = 20) -> Number:
    """Question 3.3: the nonzero singular values of the (T V) x (T d) Jacobian dZ / dX^(0), Z = LN_f(X^(L)) W_U,
    for a pre-norm stack of L blocks of width d on T positions with V > d tokens (d and V are stated and fixed;
    the sizes asked elsewhere are T and L)."""
    return Number(
        {"T": T, "L": L},
        lambda: _logit_jacobian_rank(T, L, d, V),
        lambda n: f"the blocks' identity paths skip their own LayerNorms, so the stack loses no direction; LN_f removes "
        f"the all-ones direction at each position (its radial one is only damped, by eps / (sigma^2 + eps)), and "
        f"W_U, with V = {V} > d columns, keeps the d - 1 = {d - 1} left: T (d - 1) = {n:,} for T = {T}.",
        {
            Mistake("logit-rank-no-centring",
                "LN_f removes the all-ones direction at every position: d - 1 directions reach W_U, not d"):
                lambda: T * d,
            Mistake("logit-rank-radial-removed",
                "with eps > 0 LayerNorm damps the radial direction but does not remove it: only the all-ones one goes"):
                lambda: T * (d - 2),
            Mistake("logit-rank-every-layernorm",
                "you removed a direction for every LayerNorm: the 2L inside the blocks sit on branches, which the "
                "identity path skips"): lambda: T * (d - 1 - 2 * L),
            Mistake("logit-rank-shape",
                "a (T V) x (T d) matrix has at most T d singular values, and LN_f takes one direction from each "
                "position"): lambda: T * V,
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
_WIDE_VOCABULARY = COURSE_CONFIG.replace(V=50257)  # Question 5.2's model: GPT-2's vocabulary


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
        f"Theorem 5.2 gives {theorem_5_2(COURSE_CONFIG):,} at V = {COURSE_CONFIG.V} and {theorem_5_2(_WIDE_VOCABULARY):,} at "
        f"V = {_WIDE_VOCABULARY.V:,}, {theorem_5_2(_WIDE_VOCABULARY) / theorem_5_2(COURSE_CONFIG):.1f} times as many: E and "
        f"W_U hold 2 V d = {2 * _WIDE_VOCABULARY.V * _WIDE_VOCABULARY.d:,} of them, while the blocks' L (12 d^2 + 10 d) = "
        f"{_COURSE_BLOCKS:,} do not change. The blocks dominate only while 2 V d is small next to them.",
        {
            "b": Mistake("vocabulary-leaves-count",
                "the blocks do not grow, but E and W_U each have V d entries: at V = 50,257 they dwarf the blocks"),
            "c": Mistake("vocabulary-growth-from-shares",
                "a share of a few percent at V = 65 grows with V: 2 V d, about 770 times larger, now outweighs "
                "everything else"),
        },
    ),
    "5.3": bare_block_question(d=768),
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
        "u + 5 . 1 has mean square mean(u^2) + 10 mean(u) + 25 = 26, so RMSNorm returns (u + 5 . 1) / sqrt(26): "
        "its part along 1 has length 5 sqrt(d / 26) of the output's sqrt(d), a cosine of 5 / sqrt(26), about 0.98. "
        "RMSNorm does not centre; a LayerNorm would remove the shift and give a cosine of 0.",
        {
            "b": Mistake("rmsnorm-removes-shift",
                "RMSNorm does not centre: dividing by the root mean square rescales the shift, it does not remove it"),
            "c": Mistake("rmsnorm-shift-swamps-row",
                "u is still there after the division, orthogonal to 1 with length sqrt(d / 26): the cosine is "
                "5 / sqrt(26), close to 1 but not 1"),
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
        "the mask leaves one weight in row t, A_{t,t-2}, and the weights of a row sum to 1, so it is 1 and the write is "
        "v_{t-2}, whatever the scores: the head copies the value two positions back.",
        {
            "b": Mistake("one-key-mask-blends-values",
                "the mask gives every other position weight exactly 0: the blend is over one key, s = t - 2"),
            "c": Mistake("single-weight-set-by-score", "a softmax over one entry is 1, whatever that entry's score"),
        },
    ),
    "2.3": gated_mlp_question(d=64, d_ff=192),
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
        "each head's write is (A^h X W_V^h) M, a combination of M's d_head rows, and so is their sum: the sublayer's "
        f"write lies in M's row space, of dimension at most d_head = {COURSE_CONFIG.d_head} < d = {COURSE_CONFIG.d}, "
        "whatever the other weights. Own slabs W_O^h, stacked into W_O with d rows, are what lets the heads fill R^d.",
        {
            "a": Mistake("shared-w-o-rows-fill-r-d",
                "whatever W_V^h reads, every head's write is multiplied by the same M last: it lies in M's row space"),
            "c": Mistake("shared-w-o-parallel-writes",
                "a shared M does not make the writes parallel: each head's A^h X W_V^h can be any combination of M's "
                "d_head rows"),
        },
        {"d": 128, "H": 4},
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
        f"each block's Jacobian is alpha I + DF, about alpha I, and the chain rule multiplies the 24 of them: alpha^24, "
        f"within [1/2, 2] exactly when |ln alpha| <= ln 2 / 24, alpha from {2 ** (-1 / 24):.3f} to {2 ** (1 / 24):.3f}. "
        "The exact identity of I + DF is what keeps a deep residual stack's gradient from fading (Remark 3.3): at this "
        "depth a skip off by 3% already costs a factor 2.",
        {
            "a": Mistake("skip-weight-bound-per-block",
                "each block's factor alpha multiplies the others': alpha = 1/2 gives 2^-24 after 24 blocks, not 1/2"),
            "c": Mistake("skip-weight-must-be-one",
                "alpha = 1.01 gives 1.01^24, about 1.27: within a factor 2, as is every alpha within about 3% of 1"),
        },
        {"L": 24},
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
    "3.3": logit_jacobian_question(T=6, L=3),
    "7.1": Choice(
        "c",
        "the projections multiply a row of width d by W_Q, W_K, W_V, W_O, whose H slabs of width d_head still make up "
        "d x d matrices; each head's scores and aggregation take 4 T d_head per query, and H of them take 4 T d. "
        "Section 6's count, 8 L d^2 + 4 L d d_ff + 4 L T d per token, has no H in it.",
        {
            "a": Mistake("more-heads-more-score-flops",
                "twice the heads form twice the T x T score matrices, but each over d_head / 2: 4 T d_head per "
                "query and head, 4 T d in all, as before"),
            "b": Mistake("more-heads-narrower-projections",
                "each head's slab is half as wide, but there are twice as many: W_Q, W_K, W_V, W_O stay d x d"),
        },
        {"d": 128, "H": 8},
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
        "in post-norm each block ends in a LayerNorm of the stream itself, X^(l+1) = LN_2(Y + MLP(Y)): it recentres "
        "the whole row, earlier writes included, and divides it by a spread that depends on all of them, so X^(L) is no "
        "fixed sum of the sublayers' outputs. Pre-norm normalizes only each branch's input and adds every write as it is.",
        {
            "a": Mistake("post-norm-stream-still-sums",
                "the LayerNorm after each addition acts on the whole stream: it recentres and rescales the earlier "
                "writes too, not only the new one"),
            "b": Mistake("post-norm-only-final-norm",
                "the LayerNorms of a post-norm block sit on the stream itself, not on a branch: dropping LN_f leaves "
                "2L of them between the writes and X^(L)"),
            "d": Mistake("post-norm-unit-gain-sums",
                "a gain of 1 and a shift of 0 still leave the centring and the division by the row's spread"),
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
    "2.3": (gated_mlp_question, lambda rng: {"d": 4 * rng.randint(2, 32), "d_ff": 8 * rng.randint(1, 48)}),
    "3.3": (logit_jacobian_question, lambda rng: {"T": rng.randint(2, 8), "L": rng.randint(1, 4)}),
    "4.3": (gained_image_question, _width_and_zeroed_gains),
    "5.3": (bare_block_question, lambda rng: {"d": 4 * rng.randint(4, 96)}),
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
