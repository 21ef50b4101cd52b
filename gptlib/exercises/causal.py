"""Exercise 2 (★): end-to-end causality, checked on ANY model mapping token ids (B, T) to logits (B, T, V).

    check_causality(model)      perturbs every token x_s in turn and reports the first (t, s),
                                s > t, where the logit row Z_t moved (gptlib's GPT, a learner's
                                from-scratch GPT, a plain function: anything callable)
    check_dependency_map(fn)    the learner's own perturbation test fn(model, idx) -> (T, T) map,
                                run on a causal and on an unmasked gptlib GPT

A model is only called, never inspected: with no_grad, in eval mode (restored afterwards) so
that dropout cannot fake a dependence. Tokens are seeded, so the verdict is reproducible.
"""

from __future__ import annotations

import torch

from .. import checks
from ..causality import change_map, perturbation_map, perturbed_batch, weakest_present_dependence
from ..config import GPTConfig
from ..model import GPT, eval_mode
from .result import Wrong, as_matrix, call, checker

EX2 = "Exercise 2 ★"
RTOL = 1e-5  # a logit "moved" when it changed by more than RTOL * (1 + max |Z|)


def logits(model, idx: torch.Tensor, V: int | None) -> torch.Tensor:
    """model(idx) for idx (B, T), checked to be finite logits (B, T, V); a (logits, loss) tuple is unpacked."""
    Z = call(model, idx, what="idx")
    if isinstance(Z, (tuple, list)) and Z:
        Z = Z[0]
    if not isinstance(Z, torch.Tensor):
        raise Wrong(f"your model returned {type(Z).__name__}, not a tensor of logits (B, T, V)")
    B, T = idx.shape
    if Z.dim() != 3 or tuple(Z.shape[:2]) != (B, T) or (V is not None and Z.shape[2] != V):
        want = f"({B}, {T}, {V if V is not None else 'V'})"
        hint = " (one row per position is needed, not only the last one)" if Z.dim() == 3 and Z.shape[1] == 1 else ""
        raise Wrong(f"for token ids of shape {(B, T)} your model returned shape {tuple(Z.shape)}, expected {want}{hint}")
    if not torch.isfinite(Z).all():
        bad = sorted({int(t) for t in (~torch.isfinite(Z)).nonzero()[:, 1]})
        hint = ""
        if 0 in bad:
            hint = (
                ": at t = 0 this is what a mask that also hides a token from itself does"
                " (nothing is left to attend to, and softmax of all -inf is NaN); mask only s > t"
            )
        raise Wrong(f"your model's logits are NaN or infinite at positions t = {bad}{hint}")
    return Z.detach().to(torch.float64)


def tried_length(T, T_max: int | None) -> int:
    """The sequence length a causality check tries: T, cut to the model's T_max if it has one.
    ValueError unless T is an integer and what is tried is at least 2: a single token has no
    future to depend on."""
    T, name = checks.integer("T", T), "T"  # an integer before it is compared with T_max
    if T_max is not None and T > T_max:
        T, name = T_max, f"T (cut to the model's T_max = {T_max})"
    return checks.integer(name, T, at_least=2)


def sizes(model, V: int | None, T) -> tuple[int, int]:
    """(V, T): T checked by tried_length; V from model.config for a gptlib GPT, else from one call on zeros."""
    config = getattr(model, "config", None)
    if isinstance(config, GPTConfig):
        return V or config.V, tried_length(T, config.T_max)
    T = tried_length(T, None)
    if V is None:
        V = logits(model, torch.zeros(1, T, dtype=torch.long), None).shape[-1]
    return V, T


def batch_independence(model, V: int, T: int, seed: int) -> str | None:
    """None if each sequence's logits are the same alone as in a batch of three; else what differed."""
    generator = torch.Generator().manual_seed(seed + 1)
    batch = torch.randint(0, V, (3, T), generator=generator)
    together = logits(model, batch, V)  # (3, T, V)
    for b in range(3):
        alone = logits(model, batch[b : b + 1], V)[0]  # (T, V)
        gap = (alone - together[b]).abs().max().item()
        if gap > RTOL * (1 + alone.abs().max().item()):
            return f"sequence {b}'s logits change by {gap:.2g} when other sequences share its batch"
    return None


def dependency(model, V: int, T: int, seed: int = 0) -> tuple[torch.Tensor, float]:
    """(M, tol): M[t, s] = max_v |Z_{t,v}(x with x_s changed) - Z_{t,v}(x)|, shape (T, T), and the
    tolerance above which an entry counts as a dependence. One batch: the original and T copies."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randint(0, V, (T,), generator=generator)
    shifts = torch.randint(1, max(V, 2), (T,), generator=generator)  # (T,): a random change per position
    Z = logits(model, perturbed_batch(x, shifts, V), V)  # (T+1, T, V)
    return change_map(Z), RTOL * (1 + Z.abs().max().item())


def picture(depends: torch.Tensor) -> list[str]:
    """The dependency pattern as text: '#' Z_t depends on x_s (s <= t), '!' a future leak, '.' none."""
    T = depends.shape[0]
    rows = ["t\\s " + " ".join(str(s % 10) for s in range(T))]
    for t in range(T):
        cells = (("!" if s > t else "#") if depends[t, s] else "." for s in range(T))
        rows.append(f"{t:>3} " + " ".join(cells))
    return rows


def leak_report(depends: torch.Tensor) -> tuple[str, list[str]] | None:
    """None if nothing above the diagonal; else the message naming the first (t, s) and the pattern."""
    T = depends.shape[0]
    leaks = [(t, s) for t in range(T) for s in range(t + 1, T) if depends[t, s]]
    if not leaks:
        return None
    t, s = leaks[0]
    message = f"Z_{t} depends on the later token x_{s} (positions counted from 0): the model sees the future"
    if all(s == t + 1 for t, s in leaks) and len(leaks) == T - 1:
        message += "; every leak is exactly one step ahead, so the mask is off by one (mask s > t, i.e. triu(diagonal=1))"
    elif len(leaks) == T * (T - 1) // 2:
        message += "; every later token leaks, so some attention is unmasked (one head of one layer is enough)"
    else:
        message += f"; {len(leaks)} of the {T * (T - 1) // 2} future pairs leak"
    return message + ".", picture(depends)


def causality_verdict(model, V: int, T: int, seed: int) -> tuple[str, list[str]]:
    """Exercise 2's verdict on a model already known to compute each sequence on its own:
    (message, the dependency picture) if Z_t depends on x_0..x_t only, else Wrong naming the first leak."""
    with eval_mode(model):
        M, tol = dependency(model, V, T, seed)
    depends = M > tol
    leak = leak_report(depends)
    if leak:
        raise Wrong(*leak)
    details = picture(depends)
    if weakest_present_dependence(M) <= tol:
        details.append("(causal; note some Z_t ignore an earlier x_s, '.', which a GPT normally uses)")
    return f"perturbing each of the {T} tokens moved no earlier logit row: Z_t depends on x_0..x_t only.", details


@checker(EX2)
def check_causality(model, V: int | None = None, T: int = 8, seed: int = 0) -> tuple[str, list[str]]:
    """Exercise 2: is Z_t a function of x_0..x_t only? `model` is anything callable on token ids
    (B, T) returning logits (B, T, V) (or a tuple whose first item is), e.g. your own GPT. V is
    read from model.config (gptlib) or from the output; T (default 8) is the sequence length tried."""
    with eval_mode(model):
        V, T = sizes(model, V, T)
        mixed = batch_independence(model, V, T, seed)
    if mixed:
        raise Wrong(f"{mixed}: each sequence must be computed on its own before causality can be checked.")
    return causality_verdict(model, V, T, seed)


# The models a learner's dependency map is run on: small, so it is fast, and seeded.
_MAP_CONFIG = GPTConfig(V=13, T_max=8, d=16, H=2, L=2)


def _map_models() -> dict[str, GPT]:
    torch.manual_seed(0)
    return {"causal": GPT(_MAP_CONFIG).eval(), "unmasked": GPT(_MAP_CONFIG.replace(causal=False)).eval()}


@checker(EX2)
def check_dependency_map(dependency_map) -> tuple[str, list[str]]:
    """Exercise 2, your own perturbation test: dependency_map(model, idx) -> (T, T) tensor M with
    M[t, s] > 0 exactly when the logit row Z_t changes when token x_s changes (idx has shape (T,),
    model(idx) has shape (T, V)). Run on a causal and on an unmasked gptlib GPT."""
    idx = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])  # (T,)
    T = idx.shape[0]
    for name, model in _map_models().items():
        truth = perturbation_map(model, idx) > 0  # (T, T)
        M = as_matrix(call(dependency_map, model, idx.clone(), what="model, idx"), (T, T), "your map")
        got = M.abs() > RTOL * M.abs().max().clamp(min=1e-30)
        if got.equal(truth):
            continue
        details = [f"on the {name} model, yours:"] + picture(got) + ["expected:"] + picture(truth)
        if not got.any():
            raise Wrong(f"your map shows no dependence at all on the {name} model: "
                        "compare perturbed logits with the original's", details)
        if got.equal(truth.T):
            raise Wrong("your map is transposed: row t should be the logit position, column s the perturbed token", details)
        if got.equal(torch.eye(T, dtype=torch.bool)):
            raise Wrong("your map only sees Z_t depend on x_t itself: perturb x_s and look at every row t", details)
        raise Wrong(f"your map differs from the measured one on the {name} model", details)
    return "your map matches the measured dependencies of a causal and of an unmasked GPT.", []
