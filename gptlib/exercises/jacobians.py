"""Exercise 7: the Jacobian of one post-norm block, against one pre-norm block's I + DF.

    check_post_norm_jacobian(fn)       fn(block, X) -> d vec(X') / d vec(X) of the POST-norm block
                                       built from a pre-norm block's parts (ln_1, attn, mlp, ln_2):
                                       Y = LN_1(X + MHA(X)), X' = LN_2(Y + MLP(Y)). Compared with
                                       autograd on gptlib's own post-norm Block holding the same weights.
    check_post_norm_statement(letter)  which of STATEMENTS says where it departs from I + DF ('a',
                                       '(a)' or the whole line as statements() prints it)

vec flattens X (T, d) row by row (position-major, X.reshape(-1)), so the Jacobian is (T d, T d)
with rows indexing the output X' and columns the input X.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ..analysis import jacobians
from ..checking.mistakes import Mistake, close, name_mistake, scale_of
from ..checking.reading import as_matrix
from ..checking.result import PASSED
from ..checking.running import Wrong, call, checker, not_attempted
from ..checking.variants import variant_seed
from ..config import GPTConfig
from ..model import Block, PostNormBlock
from . import concepts

EX7 = "Exercise 7"
# Entries agree when they differ by at most RTOL times the largest |entry| of the true Jacobian. A Jacobian
# computed in float32 (the block and X cast down) is off by at most 1.3e-6 of it over 200 hidden variants
# (tests/exercises/test_jacobians.py), every typical mistake by at least 0.05: RTOL sits 80 times above the
# one and 500 times below the other, so neither rounding nor a mistake lands near it.
RTOL = 1e-4
_CONFIG = GPTConfig(V=11, T_max=4, d=8, H=2, L=1)
T = 3


def example() -> tuple[Block, torch.Tensor]:
    """A float64 pre-norm block with every parameter random (gains, shifts and biases too) and X (T, d).
    Its attention forms every A^h (forms_A), so that a learner's block.attn(Z) can be differentiated in
    forward mode (torch.func.jacfwd) as well as in reverse mode: the fused kernel has no forward-mode
    derivative. Same weights, same values."""
    torch.manual_seed(variant_seed(0))
    block = Block(_CONFIG)
    block.attn.forms_A = True
    block = block.double()
    with torch.no_grad():
        for name, p in block.named_parameters():
            p.copy_(0.5 * torch.randn_like(p) + (1.0 if name.endswith("gamma") else 0.0))  # gains near 1
    return block, torch.randn(T, _CONFIG.d, dtype=torch.float64)


def post_norm_twin(block: Block) -> PostNormBlock:
    """gptlib's post-norm block with the pre-norm block's weights (the independent reference)."""
    twin = PostNormBlock(_CONFIG.replace(norm="post")).double()
    twin.load_state_dict(block.state_dict())
    return twin


# Typical wrong Jacobians, each a function of (block, X, J) with J the true Jacobian: those built
# from the block's parts are differentiated by autograd, every A^h formed.
JACOBIAN_MISTAKES = {
    Mistake("jacobian-pre-norm",
        "that is the pre-norm block's Jacobian I + DF: in a post-norm block the LayerNorm comes after the addition"):
        lambda block, X, J: jacobians.block_jacobian(block, X),
    Mistake("jacobian-transposed",
        "your Jacobian is transposed: rows index the output X', columns the input X"): lambda block, X, J: J.T,
    Mistake("jacobian-no-ln2",
        "you left out LN_2 at the end of the block: X' = LN_2(Y + MLP(Y))"): lambda block, X, J: jacobians.jacobian_of(
        lambda Z: (lambda Y: Y + block.mlp(Y))(block.ln_1(Z + _attn(block, Z))), X
    ),
    Mistake("jacobian-no-residual",
        "you left out the residual additions: post-norm still adds X and Y inside the LayerNorms"): lambda block, X, J: (
        jacobians.jacobian_of(lambda Z: block.ln_2(block.mlp(block.ln_1(_attn(block, Z)))), X)
    ),
    Mistake("jacobian-attention-half",
        "you stopped after the attention half, Y = LN_1(X + MHA(X)): the block goes on to X' = LN_2(Y + MLP(Y))"):
        lambda block, X, J: jacobians.jacobian_of(lambda Z: block.ln_1(Z + _attn(block, Z)), X),
    Mistake("jacobian-ln1-twice",
        "you used LN_1 in both places: the second LayerNorm is block.ln_2, with its own gamma and beta"): lambda block, X, J: (
        jacobians.jacobian_of(lambda Z: (lambda Y: block.ln_1(Y + block.mlp(Y)))(block.ln_1(Z + _attn(block, Z))), X)
    ),
    Mistake("jacobian-diagonal-blocks", "you kept only each position's dependence on itself (the T diagonal blocks): "
    "attention makes X'_t depend on every X_s, s <= t"): lambda block, X, J: J * _same_position(*X.shape),
    Mistake("jacobian-feature-major", "you flattened feature-major: vec must go row by row (X.reshape(-1), position-major)"):
        lambda block, X, J: J[_feature_major(*X.shape)][:, _feature_major(*X.shape)],
}


def _attn(block: Block, Z: torch.Tensor) -> torch.Tensor:
    return block.attn(Z)  # example()'s attention forms every A^h, which jacfwd can differentiate too


def _same_position(T: int, d: int) -> torch.Tensor:
    """(T d, T d) mask, 1 where output and input entries belong to the same position."""
    return torch.block_diag(*[torch.ones(d, d, dtype=torch.float64)] * T)


def _feature_major(T: int, d: int) -> torch.Tensor:
    """The position-major index of each feature-major slot of vec(X), (T d,)."""
    return torch.arange(T * d).reshape(T, d).T.reshape(-1)


def _as_jacobian(answer, T: int, d: int) -> torch.Tensor:
    """The learner's Jacobian as (T d, T d), also from the (T, d, T, d) layout jacrev gives on X
    itself; size-1 dimensions (a batch of one kept on both sides) are ignored."""
    if isinstance(answer, (torch.Tensor, np.ndarray)) and tuple(n for n in answer.shape if n != 1) in (
        (T * d, T * d),
        (T, d, T, d),
    ):
        answer = answer.reshape(T * d, T * d)
    return as_matrix(answer, (T * d, T * d), "your Jacobian")


@checker(EX7)
def check_post_norm_jacobian(post_norm_jacobian) -> tuple[str, list[str]]:
    """Exercise 7: post_norm_jacobian(block, X) -> (T d, T d) (or (T, d, T, d)), torch or numpy.
    `block` is (a copy of) a float64 pre-norm gptlib Block; use its parts block.ln_1, block.attn,
    block.mlp, block.ln_2 (each maps (B, T, d) to (B, T, d)) to form the post-norm block, and
    return its Jacobian at X (T, d), by reverse or forward mode (block.attn(Z) forms every A^h,
    which torch.func.jacfwd can differentiate), or by finite differences."""
    block, X = example()
    d = X.shape[1]
    truth = jacobians.block_jacobian(post_norm_twin(block), X).detach()
    got = _as_jacobian(call(post_norm_jacobian, block, X, what="block, X"), T, d)

    same = functools.partial(close, rtol=RTOL, of_largest=True)
    if not same(got, truth):
        named = name_mistake({(block, X, truth): got}, JACOBIAN_MISTAKES, same)
        s = scale_of(got, truth, 0.0, RTOL * truth.abs().max().item())
        if not named and s is not None:
            named = f"your Jacobian is the right one times {s:.4g}: no constant factor belongs in it"
        gap = (got - truth).abs().max().item()
        raise Wrong(
            (named or "your Jacobian differs from autograd's on gptlib's post-norm block") + ".",
            [f"T = {T}, d = {d}, float64; largest entry difference {gap:.3g}"], mistake=None)
    identity_gap = (truth - torch.eye(T * d, dtype=truth.dtype)).abs().max().item()
    return (
        f"equal to autograd's Jacobian of gptlib's post-norm block (to within {RTOL:g} of its largest entry).",
        [f"J - I has entries as large as {identity_gap:.2f}: no identity term survives the final LayerNorm"],
    )


STATEMENTS = {  # every choice is a formula, so the learner has to derive J to choose
    "a": "J = I + DF, with F the two branches: the LayerNorms only change what F is, so the identity path survives.",
    "b": "J = DLN_2 (I + DMLP) DLN_1 (I + DMHA): even the straight path passes through both LayerNorms' Jacobians.",
    "c": "J = DF: post-norm drops the residual additions, so only the branches' Jacobians remain.",
    "d": "J = gamma (I + DF), with gamma the last LayerNorm's gain: the identity survives, rescaled.",
    "e": "J = (I + DLN_2 DMLP)(I + DLN_1 DMHA): each LayerNorm sits on its branch, so an identity survives in every factor.",
}


@checker(EX7)
def check_post_norm_statement(letter) -> tuple[str, list[str]]:
    """Exercise 7: the letter of the statement in STATEMENTS that says where a post-norm block's
    Jacobian departs from I + DF."""
    if letter is None:
        not_attempted("no statement chosen yet: set it to one of the letters printed by statements().")
    choice = _chosen_letter(letter)
    if choice is None:
        raise Wrong(f"answer with one letter of {sorted(STATEMENTS)} (as 'a' or '(a)'), got {letter!r:.40}",
                    mistake="statement-not-a-letter")
    status, message = concepts.verdict("post_norm_statement", choice)  # the answer is not in this file: answers/
    if status != PASSED:
        raise Wrong(message, mistake=None)
    return message, []


def _chosen_letter(answer) -> str | None:
    """The letter a learner chose: 'a', 'A', '(a)', 'a)', or the whole line '(a) ...' as statements() prints it."""
    if not isinstance(answer, str):
        return None
    for letter, text in STATEMENTS.items():
        if answer.strip().lower().strip("().") == letter or answer.strip() == f"({letter}) {text}":
            return letter
    return None


def statements() -> str:
    """The choices of check_post_norm_statement, one per line."""
    return "\n".join(f"({letter}) {text}" for letter, text in STATEMENTS.items())
