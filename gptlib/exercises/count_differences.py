"""What can make a parameter count differ from Theorem 5.2: one table, read by both count checkers.

Exercises 1 and 5 (counting.py) compare a learner's formula with numel() and name every row of the table
that explains the difference: there, each is a mistake, since Theorem 5.2 fixes its conventions. The
own-model check (own_model.py) compares a learner's model with Theorem 5.2: there a CONVENTION is a
bias the learner may choose to have or not (passed, and named), a STRUCTURE is a part missing or extra
(a mistake), and a SLIP is a mistake of counting, looked for in a formula only (forgetting both block
LayerNorms is one: a model without them is rare, a formula without them is not).

Each row: what differs (a noun phrase, shown to the learner by both checkers), the difference it makes
(count - Theorem 5.2) as a function of the configuration (0 where it does not apply: tying decides some),
the row of counting.COMPONENTS it falls in (None when it spans rows, or the count cannot tell which),
and the group of tensors it shows in when a model's parameters are sorted by layer type (None for a SLIP).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..checking.mistakes import Mistake
from ..config import GPTConfig

CONVENTION, STRUCTURE, SLIP = "a bias convention", "a part missing or extra", "a counting slip"
BIASES, NORMS_GROUP, OTHER = "linear-layer biases", "norm layers", "other tensors"  # own_model's groups, by layer type
EMBEDDINGS, ATTENTION, MLPS, BLOCK_NORMS, FINAL = range(5)  # the rows of counting.COMPONENTS


@dataclass(frozen=True)
class Difference:
    what: Mistake  # what differs, with its identifier (checking/mistakes.py)
    delta: Callable[[GPTConfig], int]  # count - Theorem 5.2, for the configuration c
    kind: str  # CONVENTION, STRUCTURE or SLIP
    row: int | None
    group: str | None


NO_P = Mistake("count-no-p", "no positional embedding P (T_max x d)")
NO_MLP_BIASES = Mistake("count-no-mlp-biases", "no MLP biases b_1, b_2 (d_ff + d per block)")
NO_B_1 = Mistake("count-no-b1", "no MLP bias b_1 (d_ff per block)")
NO_LINEAR_BIASES = Mistake("count-no-linear-biases", "no biases in any linear layer (no b_O, b_1, b_2)")
W_U_BIAS = Mistake("count-w-u-bias", "a bias on W_U (V numbers), which Theorem 5.2 leaves out")
TIED_W_U_BIAS = Mistake("count-tied-logit-bias",
    "a bias on the logits beside W_U = E^T (V numbers), which Theorem 5.2 leaves out")

DIFFERENCES = (
    Difference(Mistake("count-qkv-biases",
        "biases on W_Q, W_K, W_V (3d per block), which Theorem 5.2 leaves out"), lambda c: 3 * c.L * c.d,
               CONVENTION, ATTENTION, BIASES),
    Difference(W_U_BIAS, lambda c: 0 if c.tie_weights else c.V, CONVENTION, FINAL, BIASES),
    Difference(TIED_W_U_BIAS, lambda c: c.V if c.tie_weights else 0, CONVENTION, FINAL, BIASES),
    Difference(NO_P, lambda c: -c.T_max * c.d, STRUCTURE, EMBEDDINGS, OTHER),
    Difference(Mistake("count-no-final-ln", "no final LayerNorm LN_f (2d)"), lambda c: -2 * c.d, STRUCTURE, FINAL, NORMS_GROUP),
    Difference(Mistake("count-no-b-o-or-b2",
        "no output bias b_O, or no b_2 (one d-vector per block; the count cannot tell which)"),
               lambda c: -c.L * c.d, CONVENTION, None, BIASES),
    Difference(NO_MLP_BIASES, lambda c: -c.L * (c.d_ff + c.d), CONVENTION, MLPS, BIASES),
    Difference(NO_B_1, lambda c: -c.L * c.d_ff, CONVENTION, MLPS, BIASES),
    Difference(NO_LINEAR_BIASES, lambda c: -c.L * (2 * c.d + c.d_ff), CONVENTION, None, BIASES),
    Difference(Mistake("count-b1-d-entries",
        "b_1 with d entries: it has d_ff, one per hidden unit"), lambda c: -c.L * (c.d_ff - c.d), SLIP, MLPS, None),
    Difference(Mistake("count-b1-4d-entries", "b_1 with 4d entries: it has d_ff, one per hidden unit, and d_ff need not be 4d"),
               lambda c: c.L * (4 * c.d - c.d_ff), SLIP, MLPS, None),
    Difference(Mistake("count-d-ff-4d", "d_ff = 4d built in: W_1, b_1 and W_2 all have config.d_ff, which need not be 4d"),
               lambda c: c.L * (4 * c.d - c.d_ff) * (2 * c.d + 1), SLIP, MLPS, None),
    Difference(Mistake("count-no-block-layernorms",
        "no block LayerNorms (4d per block)"), lambda c: -4 * c.L * c.d, SLIP, BLOCK_NORMS, None),
    Difference(Mistake("count-one-layernorm-per-block",
        "one LayerNorm per block instead of two, LN_1 and LN_2 (2d per block fewer)"), lambda c: -2 * c.L * c.d,
               STRUCTURE, BLOCK_NORMS, NORMS_GROUP),
    Difference(Mistake("count-layernorm-one-vector",
        "LayerNorms with one vector each, not d gains and d shifts (no beta, as nanoGPT's bias=False, or no "
               "gamma): d per LayerNorm fewer"), lambda c: -(2 * c.L + 1) * c.d, CONVENTION, None, NORMS_GROUP),
    Difference(Mistake("count-no-w-o", "no W_O (d x d per block)"), lambda c: -c.L * c.d * c.d, STRUCTURE, ATTENTION, OTHER),
    Difference(Mistake("count-qkv-one-head", "W_Q, W_K, W_V for one head only (3 d d_head per block): there is one per head"),
               lambda c: -3 * c.L * (c.d * c.d - c.d * c.d_head), SLIP, ATTENTION, None),
    Difference(Mistake("count-one-mlp-matrix",
        "one MLP weight matrix: there are two, W_1 (d_ff x d) and W_2 (d x d_ff)"), lambda c: -c.L * c.d * c.d_ff,
               SLIP, MLPS, None),
    Difference(Mistake("count-separate-w-u-tied",
        "a separate W_U (d x V) besides E, though W_U = E^T when tied (E counted twice)"),
               lambda c: c.d * c.V if c.tie_weights else 0, STRUCTURE, None, OTHER),
    Difference(Mistake("count-no-e-when-tied", "no E either, though tying removes only the separate W_U (dV removed twice)"),
               lambda c: -c.d * c.V if c.tie_weights else 0, SLIP, None, None),
    Difference(Mistake("count-no-w-u-untied", "no unembedding W_U (d x V) of its own, though untied (W_U = E^T only when tied)"),
               lambda c: 0 if c.tie_weights else -c.d * c.V, STRUCTURE, FINAL, OTHER),
)
