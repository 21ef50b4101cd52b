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


# The build track of notebook 09, one step per piece of the GPT (gptlib.exercises.build_track checks them).
# Each piece of code between backquotes runs as printed when pasted into the step's stub in 09, in the
# method the hint names (`__init__` or `forward`; `forward` where it names none; init's function body),
# using only the stub's own arguments, 09's first cell's imports and what an earlier piece defined:
# tests/notebooks/test_build_notebook.py builds each step from its stub and these pieces alone.
BUILD_HINTS = {
    "layer_norm": (
        "Work on the last dimension only: in `forward`, each row of d features has its own mean, "
        "`mean = u.mean(dim=-1, keepdim=True)`, of shape (..., 1), and `centred = u - mean`.",
        "sigma^2 divides by d, not d - 1: `variance = u.var(dim=-1, unbiased=False, keepdim=True)`, the mean of the "
        "squared centred row. eps goes inside the square root.",
        "In `__init__`: `self.gamma = nn.Parameter(torch.ones(d))`, `self.beta = nn.Parameter(torch.zeros(d))` and "
        "`self.eps = eps`; then in `forward`: `return self.gamma * centred / torch.sqrt(variance + self.eps) + self.beta`.",
    ),
    "attention_head": (
        "In `__init__`, one (d, d_head) matrix per role: `self.W_Q = nn.Parameter(torch.randn(d, d_head) / math.sqrt(d))`, "
        "`self.W_K = nn.Parameter(torch.randn(d, d_head) / math.sqrt(d))`, "
        "`self.W_V = nn.Parameter(torch.randn(d, d_head) / math.sqrt(d))`. In `forward`: "
        "`Q, K, V = X @ self.W_Q, X @ self.W_K, X @ self.W_V`, each (B, T, d_head); the scores "
        "`S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])` are (B, T, T).",
        "The causal mask hides s > t: with `T = X.shape[-2]`, `future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)` "
        "marks exactly those; fill them with -inf BEFORE the softmax, and keep the diagonal (t sees itself).",
        "`A = S.masked_fill(future, float('-inf')).softmax(dim=-1)`: each row t (a query) is a distribution over the "
        "keys s. Then `return A @ V`.",
    ),
    "multi_head_attention": (
        "H heads of width d_head = d / H, each with its own W_Q^h, W_K^h, W_V^h: in `__init__`, "
        "`self.heads = nn.ModuleList(AttentionHead(d, d // H) for _ in range(H))` holds heads of your Step 2 class.",
        "Still in `__init__`: `self.W_O = nn.Parameter(torch.randn(d, d) / math.sqrt(d))` and "
        "`self.b_O = nn.Parameter(torch.zeros(d))`. In `forward`, the head outputs side by side in head order, "
        "[C^1 | ... | C^H]: `C = torch.cat([head(X) for head in self.heads], dim=-1)`.",
        "If you batch the heads in one (B, H, T, d_head) tensor instead, such as "
        "`stacked = torch.stack([head(X) for head in self.heads], dim=1)`, put them back side by side before W_O: "
        "`C = stacked.transpose(1, 2).flatten(-2)`. Either way, `return C @ self.W_O + self.b_O`.",
    ),
    "mlp": (
        "Two affine maps with GELU between, d -> d_ff -> d. In `__init__`: "
        "`self.W_1 = nn.Parameter(torch.randn(d, d_ff) / math.sqrt(d))`, `self.b_1 = nn.Parameter(torch.zeros(d_ff))`, "
        "`self.W_2 = nn.Parameter(torch.randn(d_ff, d) / math.sqrt(d_ff))`, `self.b_2 = nn.Parameter(torch.zeros(d))`. "
        "In `forward`: `hidden = X @ self.W_1 + self.b_1` is (B, T, d_ff).",
        "GELU is t Phi(t) with Phi the normal CDF: `gelu = 0.5 * hidden * (1 + torch.erf(hidden / math.sqrt(2)))`, or "
        "`gelu = F.gelu(hidden)` (exact by default), not the tanh form `F.gelu(hidden, approximate='tanh')`. "
        "Then `return gelu @ self.W_2 + self.b_2`.",
    ),
    "block": (
        "Pre-norm: the LayerNorm goes INSIDE each branch, on the branch's input; inside the blocks the stream itself is "
        "never normalized. In `__init__`: `self.ln_1, self.attn = LayerNorm(d), MultiHeadAttention(d, H)` and "
        "`self.ln_2, self.mlp = LayerNorm(d), MLP(d, d_ff)`, your classes of Steps 1, 3 and 4.",
        "In `forward`: `Y = X + self.attn(self.ln_1(X))`; then `return Y + self.mlp(self.ln_2(Y))`: the MLP sees Y, "
        "after the attention's write.",
    ),
    "gpt": (
        "X^(0) = E[x] + P[:T]. In `__init__`: `self.E = nn.Parameter(torch.randn(V, d))` and "
        "`self.P = nn.Parameter(torch.randn(T_max, d))`; in `forward`: `X = self.E[idx] + self.P[: idx.shape[-1]]`, "
        "a row lookup for the tokens and the first T rows of P for the positions (broadcast over B).",
        "Then the L blocks in order. In `__init__`: `self.blocks = nn.ModuleList(Block(d, H, d_ff) for _ in range(L))`, "
        "`self.ln_f = LayerNorm(d)` and `self.W_U = nn.Parameter(torch.randn(d, V))`; in `forward`: "
        "`for block in self.blocks: X = block(X)`.",
        "Return the logits Z themselves, shape (B, T, V), no softmax: `return self.ln_f(X) @ self.W_U`.",
    ),
    "init": (
        "GPT-2's conventions: every matrix, E and P from N(0, 0.02^2); gains 1; biases 0. The names are yours: "
        "`for name, p in model.named_parameters(): print(name, tuple(p.shape))` lists them with their shapes.",
        "By role, with torch.nn.init, whose functions write in place without recording gradients: a matrix or an "
        "embedding (2-d) gets `torch.nn.init.normal_(p, 0.0, 0.02)`, a LayerNorm's gain `torch.nn.init.ones_(p)`, a "
        "bias or a LayerNorm's shift `torch.nn.init.zeros_(p)`.",
        "Two writes per block go into the residual stream: W_O (attention) and W_2 (MLP), 2L in all. Count your blocks, "
        "`L = sum(isinstance(m, Block) for m in model.modules())`, and give exactly those two matrices std "
        "`0.02 / math.sqrt(2 * L)`: the variances of 2L independent writes then add up to about 0.02^2. "
        "Finally `return model`.",
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
    print(f"# {_label(n)}: reference solution (gptlib/exercises/{where})")
    if n in BUILD_HINTS:  # written for the reference's own classes: a learner's names and layout differ
        print("# The reference's version, for its own classes and attribute names (block.attn.heads, head.W_Q, "
              "ln_1.gamma, model.E, ...): yours may differ, so read each line by the role it gives a tensor.")
    print(f"\n{source}")
