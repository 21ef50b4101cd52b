"""Progressive hints, `hint(n, level)`, and `show_solution(n)` (the reference source, on request).

The exercises' reference solutions live in exercises/answers/, which a class's student image does not
have and grading hides: there show_solution says they stay with the instructor."""

from __future__ import annotations

import inspect

HINTS = {
    1: (
        "Walk the specification of Section 5 from the token ids to the logits and write down every tensor "
        "that has a name in gptlib/model.py (E, P, W_Q, ..., gamma, beta, W_U) with its shape.",
        "Per block: W_Q, W_K, W_V have H blocks of d x d/H each; W_O is d x d with a bias b_O; the MLP has "
        "W_1 (d_ff x d), b_1, W_2 (d x d_ff), b_2; two LayerNorms with d gains and d shifts each.",
        "Do not forget what is outside the blocks: P, the final LayerNorm, and W_U (which is E^T, no new "
        "parameters, when config.tie_weights).",
    ),
    2: (
        "Run the model on a sequence and on a copy where only x_s is changed; which rows of the logits move?",
        "Do it for every s and collect the changes in a T x T table M[t, s] (max over the vocabulary of "
        "|Z_t changed - Z_t|). Change a clone, never the original ids.",
        "For the proof: which operations of Section 5 mix positions? Only attention; what are its weights "
        "on later positions after the mask? Then induct over the layers.",
    ),
    3: (
        "Remark 1.3: if R is invertible, (W_Q R, W_K R^-T) gives the same W_QK. Are there any other pairs?",
        "If W_Q W_K^T = W_Q' W_K'^T has rank d_head, the columns of W_Q and W_Q' span the same space, so W_Q' = W_Q R.",
        "The set of pairs is then parametrized by R in GL(d_head), the invertible d_head x d_head matrices: "
        "how many free entries does R have?",
    ),
    4: (
        "Part 1: both moves act on the last dimension only; project takes one number away from each row, rescale "
        "divides each row by one number. Part 2: what is LN(c W x) for c > 0, and so what is loss(c W)?",
        "Part 1: project subtracts each row's mean; rescale divides by sqrt(sigma^2 + eps) with sigma^2 = mean(v^2): "
        "divide by d, not d - 1 (torch.var's default), and keep eps under the square root. Part 2: loss(c W) = "
        "loss(W) for every W; differentiate both sides with respect to W.",
        "Part 2: the chain rule gives c * grad(c W) = grad(W), so the gradient grows by 1/c while ||c W|| shrinks by c: "
        "the relative step lr * ||grad|| / ||W|| grows by 1/c^2.",
    ),
    5: (
        "Which single matrix disappears when W_U = E^T? Nothing else changes.",
        "E stays (it now serves both ends); W_U had d x V entries.",
    ),
    6: (
        "W_QK^h = W_Q^h (W_K^h)^T and W_OV^h = W_V^h W_O^h, where W_O^h is a block of d_head ROWS of W_O.",
        "The rank of a product is at most its inner dimension. What is the inner dimension of each circuit?",
        "S^h is T x T, and it equals X W_QK^h X^T / sqrt(d_head): two bounds apply, take the smaller.",
    ),
    7: (
        "Write the post-norm block as a function: Y = LN_1(X + MHA(X)), X' = LN_2(Y + MLP(Y)), using "
        "block.ln_1, block.attn, block.mlp, block.ln_2 on a (1, T, d) tensor.",
        "Flatten X row by row (X.reshape(-1)) and let torch.autograd.functional.jacobian (or torch.func.jacrev) "
        "differentiate the flattened map; the result is (T d, T d).",
        "For the statement: apply the chain rule to X' = LN_2(Y + MLP(Y)) from the outside in, then to "
        "Y = LN_1(X + MHA(X)). Which factors does the straight path from X to X' (through both additions) pass through?",
    ),
    8: (
        "A weight used once per token is one multiply-add (2 FLOPs) forward; the backward pass needs two "
        "products of the same size (input gradient and weight gradient).",
        "Weights per block: 4 d^2 in attention, 2 d d_ff in the MLP; plus d V for W_U. E and P are lookups: no "
        "FLOPs. Attention also computes Q K^T and A V: 2 T d FLOPs each per token per block, forward.",
        "For the takeover: per block and sequence compare 4 T^2 d with 8 T d^2 + 4 T d d_ff and solve for T.",
    ),
}


# The build track of notebook 09, one step per piece of the GPT (gptlib.exercises.build checks them).
# The code between backquotes runs as printed in 09, whose first cell imports torch, nn, F and math
# (tests/test_build_notebook.py pastes each piece there, with the learner's tensors named as here).
BUILD_HINTS = {
    "layer_norm": (
        "Work on the last dimension only: each row of d features has its own mean, "
        "`x.mean(dim=-1, keepdim=True)`, of shape (..., 1).",
        "sigma^2 divides by d, not d - 1: `x.var(dim=-1, unbiased=False, keepdim=True)`, or the mean of the squared "
        "centred row. eps goes inside the square root.",
        "gamma and beta are `nn.Parameter(torch.ones(d))` and `nn.Parameter(torch.zeros(d))`; the output is "
        "`gamma * centred / torch.sqrt(variance + eps) + beta`.",
    ),
    "attention_head": (
        "`Q, K, V = X @ W_Q, X @ W_K, X @ W_V`, each (B, T, d_head); the scores "
        "`S = Q @ K.transpose(-2, -1) / math.sqrt(d_head)` are (B, T, T).",
        "The causal mask hides s > t: `future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)` marks exactly "
        "those; fill them with -inf BEFORE the softmax, and keep the diagonal (t sees itself).",
        "`A = S.masked_fill(future, float('-inf')).softmax(dim=-1)`: each row t (a query) is a distribution over the "
        "keys s. Then return `A @ V`.",
    ),
    "multi_head_attention": (
        "H heads of width d_head = d / H, each with its own W_Q^h, W_K^h, W_V^h: "
        "`nn.ModuleList(AttentionHead(d, d // H) for _ in range(H))` holds your heads.",
        "Concatenate the head outputs along the features in head order, [C^1 | ... | C^H], "
        "`C = torch.cat([head(X) for head in heads], dim=-1)`, then multiply by W_O (d x d) and add b_O.",
        "If you batch the heads as (B, H, T, d_head), put them back side by side before W_O: "
        "`heads_out.transpose(1, 2).reshape(B, T, d)`.",
    ),
    "mlp": (
        "Two affine maps with GELU between: d -> d_ff -> d, with biases b_1 (d_ff) and b_2 (d): "
        "`hidden = X @ W_1 + b_1` is (B, T, d_ff).",
        "GELU is t Phi(t) with Phi the normal CDF: `0.5 * t * (1 + torch.erf(t / math.sqrt(2)))`, or `F.gelu(t)` "
        "(exact by default); not `F.gelu(t, approximate='tanh')`.",
    ),
    "block": (
        "Pre-norm: the LayerNorm goes INSIDE each branch, on the branch's input; the residual stream itself is never "
        "normalized.",
        "`Y = X + self.attn(self.ln_1(X))`; then `X_next = Y + self.mlp(self.ln_2(Y))`: the MLP sees Y, after the "
        "attention's write.",
    ),
    "gpt": (
        "X^(0) = E[x] + P[:T]: `X = E[idx] + P[:T]`, a row lookup for the tokens and the first T rows of P for the "
        "positions (broadcast over B).",
        "Then the L blocks in order, `nn.ModuleList(Block(d, H, d_ff) for _ in range(L))`, the final LayerNorm, and "
        "`Z = ln_f(X) @ W_U` with W_U of shape (d, V).",
        "Return the logits Z themselves, shape (B, T, V): no softmax.",
    ),
    "init": (
        "GPT-2's conventions: every matrix, E and P from N(0, 0.02^2), `with torch.no_grad(): W.normal_(0.0, 0.02)`; "
        "gains 1, `gamma.data.fill_(1.0)`; biases 0, `b.data.zero_()`.",
        "Two writes per block go into the residual stream: W_O (attention) and W_2 (MLP). With L blocks there are 2L.",
        "Project aside 5.2: give exactly those two std `0.02 / math.sqrt(2 * L)`; the variances of 2L independent "
        "writes then add up to about 0.02^2.",
    ),
}

def _check_exercise(n) -> None:
    if n not in HINTS and n not in BUILD_HINTS:
        raise ValueError(f"exercises are numbered 1 to 8 (build steps: {', '.join(map(repr, BUILD_HINTS))}), got {n!r}")


def _label(n) -> str:
    return f"Exercise {n}" if n in HINTS else f"Build step {n!r}"


def hint(n: int | str, level: int = 1) -> None:
    """Print hint `level` (1 = a nudge, higher = more) for Exercise n, or for a build step ('layer_norm', ...)."""
    _check_exercise(n)
    hints = HINTS[n] if n in HINTS else BUILD_HINTS[n]
    if not isinstance(level, int) or not 1 <= level <= len(hints):
        raise ValueError(f"{_label(n)} has hint levels 1 to {len(hints)}, got {level!r}")
    more = (f" (more: `exercises.hint({n!r}, {level + 1})`)" if level < len(hints)
            else f" (last hint; the solution: `exercises.show_solution({n!r})`)")
    print(f"{_label(n)}, hint {level} of {len(hints)}{more}:\n{hints[level - 1]}")


def solution_source(n: int | str) -> str:
    """The source of Exercise n's reference solution(s), or of a build step's."""
    _check_exercise(n)
    if n in BUILD_HINTS:
        from .answers import build  # ModuleNotFoundError in a class release

        return "\n\n".join(inspect.getsource(part) for part in build.SOLUTIONS[n])
    from .answers import solutions  # ModuleNotFoundError in a class release

    parts = [inspect.getsource(fn) for fn in solutions.SOLUTIONS[n]]
    if n == 7:
        parts.append(f'post_norm_statement = "{solutions.post_norm_statement}"\n')
    return "\n\n".join(parts)


def show_solution(n: int | str) -> None:
    """Print Exercise n's (or build step n's) reference solution(s), with the argument in each docstring."""
    where = "answers/solutions.py" if n in HINTS else "answers/build.py"
    try:
        source = solution_source(n)
    except ModuleNotFoundError:
        print(f"# {_label(n)}: the reference solution stays with your instructor in this class release.")
        return
    print(f"# {_label(n)}: reference solution (gptlib/exercises/{where})\n\n{source}")
