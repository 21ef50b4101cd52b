"""Exercise 2 (★): end-to-end causality, checked on ANY model mapping token ids (B, T) to logits (B, T, V).

    check_causality(model)      perturbs every token x_s in turn and reports the first (t, s),
                                s > t, where the logit row Z_t moved; then runs every prefix
                                x_0..x_{k-1} alone, since Z_t must not move when tokens are
                                appended after it either (gptlib's GPT, a learner's from-scratch
                                GPT, a plain function: anything callable)
    check_dependency_map(fn)    the learner's own perturbation test fn(model, idx) -> (T, T) map,
                                run on models whose true dependency patterns differ, on token
                                ids with 0, V - 1 and repeats

A model is only called, never inspected: with no_grad, in eval mode (restored afterwards) so
that dropout cannot fake a dependence. Tokens are seeded, so the verdict is reproducible.

When is a change a dependence and not float rounding? A change counts when it exceeds one of two
tolerances, both relative to the largest logit and scaled to the precision of the logits' own dtype:
- same batch shape (a perturbed copy beside the original, a sequence with other companions): the
  same kernels do the same arithmetic on every row, so an independent row moves by nothing or by
  a few units of rounding; a change counts above RTOL * (1 + max |Z|), RTOL = 1e-5 for float32
  (~84 ulps), the same number of ulps in float64, and RTOL again in float16 and bfloat16.
- different shapes (a sequence alone vs in a batch, a prefix vs the whole sequence): other kernels
  may sum in another order, and with large activations (an init of std 1) their rounding reaches
  ~1e-3 of the logits; a change counts above 4 sqrt(eps) * (1 + max |Z|), 1.4e-3 for float32
  (1e-2 at most, for float16 and bfloat16).
A correct model with large activations amplifies its rounding until, now and then, it crosses either
tolerance; so a tolerance is applied only to a change measured where rounding is far below it
(rounding.py): a change of exactly 0 is none, any other is measured again on a float64 copy of the
model (the learner's own is never changed), and that measurement decides. Only where no float64 copy
can run does the change measured in the model's own dtype decide, and a refusal then says why.
"""

from __future__ import annotations

import torch
from torch import nn

from .. import validation
from ..analysis.causality import change_map, perturbed_batch, weakest_present_dependence
from ..checking.reading import as_matrix
from ..checking.rounding import Float64Copy, Gap, measured_gap, remembered
from ..checking.running import Wrong, call, checker, global_state_kept
from ..checking.variants import variant_seed
from ..config import GPTConfig
from ..model import GPT, eval_mode

EX2 = "Exercise 2 ★"
RTOL = 1e-5  # float32: a logit "moved" when it changed by more than RTOL * (1 + max |Z|), same batch shape


def same_shape_tolerance(Z: torch.Tensor) -> float:
    """Largest change of an independent logit between rows of the same batch shape: RTOL in float32,
    as many units of rounding in a more precise dtype, and never more than RTOL (in float16 or
    bfloat16 84 units of rounding would hide a leak, and rows of one batch round alike anyway)."""
    ulps = RTOL / torch.finfo(torch.float32).eps
    return min(ulps * torch.finfo(Z.dtype).eps, RTOL) * (1 + Z.abs().max().item())


def other_shape_tolerance(Z: torch.Tensor) -> float:
    """Largest change of an independent logit between runs of different shapes: 4 sqrt(eps) relative,
    at most 1e-2 (bfloat16's sqrt(eps) is 0.09, while its rounding across shapes stays near 3e-3).

    Other shapes take other kernels, whose sums round in another order. A correct float32 GPT of
    d = 256, L = 6 and weights of std 1 once moved by about twice sqrt(eps) relative between a batch
    of one and of three (seen in one of a series of unit-test runs on a 2-core machine); mixing
    that depends on the batch or the length moves logits by a fraction of themselves."""
    return min(4 * torch.finfo(Z.dtype).eps ** 0.5, 1e-2) * (1 + Z.abs().max().item())


def logits(model, idx: torch.Tensor, V: int | None) -> torch.Tensor:
    """model(idx) for idx (B, T), checked to be finite floating logits (B, T, V), detached in their
    own dtype; a (logits, loss) tuple is unpacked."""
    Z = call(model, idx, what="idx")
    if isinstance(Z, (tuple, list)) and Z:
        Z = Z[0]
    if not isinstance(Z, torch.Tensor) or not Z.is_floating_point():
        raise Wrong(f"your model returned {type(Z).__name__}, not a floating tensor of logits (B, T, V)",
                    mistake="logits-not-a-tensor")
    B, T = idx.shape
    if Z.dim() != 3 or tuple(Z.shape[:2]) != (B, T) or (V is not None and Z.shape[2] != V):
        want = f"({B}, {T}, {V if V is not None else 'V'})"
        hint = " (one row per position is needed, not only the last one)" if Z.dim() == 3 and Z.shape[1] == 1 else ""
        raise Wrong(f"for token ids of shape {(B, T)} your model returned shape {tuple(Z.shape)}, expected {want}{hint}",
                    mistake="logits-shape")
    if not torch.isfinite(Z).all():
        bad = sorted({int(t) for t in (~torch.isfinite(Z)).nonzero()[:, 1]})
        hint = ""
        if 0 in bad:
            hint = (
                ": at t = 0 this is what a mask that also hides a token from itself does"
                " (nothing is left to attend to, and softmax of all -inf is NaN); mask only s > t"
            )
        raise Wrong(f"your model's logits are NaN or infinite at positions t = {bad}{hint}", mistake="logits-not-finite")
    return Z.detach()


def tried_length(T, T_max: int | None) -> int:
    """The sequence length a causality check tries: T, cut to the model's T_max if it has one.
    ValueError unless T is an integer and what is tried is at least 2: a single token has no
    future to depend on."""
    T, name = validation.integer("T", T), "T"  # an integer before it is compared with T_max
    if T_max is not None and T > T_max:
        T, name = T_max, f"T (cut to the model's T_max = {T_max})"
    return validation.integer(name, T, at_least=2)


def float64_copy(model, V: int) -> Float64Copy:
    """The float64 copy (rounding.Float64Copy) that confirms a change of `model`'s logits, called as logits() calls it."""
    return Float64Copy(model, lambda twin, idx: logits(twin, idx, V))


def _runs(model, T: int) -> bool:
    try:
        with global_state_kept(), eval_mode(model):
            model(torch.zeros(1, T, dtype=torch.long))
    except Exception:
        return False
    return True


def refuse_a_length_too_long(model, T: int) -> None:
    """Wrong if the model fails on T tokens but runs on fewer: its T_max is likely below T, which
    the learner is told to pass. Returns if it runs on T, or on no shorter length >= 2 either (the
    checker's own call then reports what it raised)."""
    if isinstance(model, type):
        raise Wrong(f"{model.__name__} is a class, not a model: pass an instance, e.g. {model.__name__}(...)",
                    mistake="model-is-a-class")
    if _runs(model, T):
        return
    shorter = next((k for k in range(T - 1, 1, -1) if _runs(model, k)), None)  # 2 tokens at least: a future
    if shorter is not None:
        raise Wrong(f"your model raises on {T} tokens but runs on {shorter}: if its T_max is {shorter}, "
                    f"pass T={shorter} (or its own T_max)", mistake="model-t-max-too-small")


def refuse_randomness(model, V: int, T: int, exact: Float64Copy | None = None) -> None:
    """Wrong if two calls on the same tokens, with the random generator in two other states, give other
    logits: something random runs in eval mode, and every dependence measured would be noise."""
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(variant_seed(7)))  # (2, T)

    def measure(run):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(variant_seed(1))
            first = run(idx)
            torch.manual_seed(variant_seed(2))
            return (run(idx) - first).abs().max()

    with eval_mode(model):
        first = logits(model, idx, V)
        gap = measured_gap(measure, lambda x: logits(model, x, V), exact or float64_copy(model, V),
                           same_shape_tolerance(first), first.dtype, fresh=True)
    if gap.beyond:
        raise Wrong(f"your model's logits for the same tokens differ {gap.said()} from one call to the next, in eval mode:"
                    " something random runs at evaluation (e.g. F.dropout(x, p), whose default is training=True: pass"
                    " training=self.training), so what the logits depend on cannot be measured", mistake="logits-random-in-eval")


def sizes(model, V: int | None, T) -> tuple[int, int]:
    """(V, T): T checked by tried_length; V from model.config for a gptlib GPT, else from one call on zeros."""
    config = getattr(model, "config", None)
    if isinstance(config, GPTConfig):
        return V or config.V, tried_length(T, config.T_max)
    T = tried_length(T, None)
    refuse_a_length_too_long(model, T)
    if V is None:
        V = logits(model, torch.zeros(1, T, dtype=torch.long), None).shape[-1]
    return V, T


def batch_independence(model, V: int, T: int, seed: int, exact: Float64Copy | None = None) -> str | None:
    """None if each sequence's logits are the same whatever else is in its batch, and the same
    alone (up to rounding across batch shapes, told apart as the module docstring says); else what differed."""
    generator = torch.Generator().manual_seed(variant_seed(seed + 1))
    batch, others = torch.randint(0, V, (2, 3, T), generator=generator)  # (3, T) each
    exact = exact or float64_copy(model, V)
    own = remembered(lambda idx: logits(model, idx, V))
    together = own(batch)  # (3, T, V)

    def beside_others(run):  # (3,): sequence b's change when the other two sequences change
        Z = run(batch)
        return torch.stack([(run(torch.where(torch.arange(3)[:, None] == b, batch, others))[b] - Z[b]).abs().max()
                            for b in range(3)])

    def alone(run):  # (3,): sequence b's change between a batch of one and the batch of three
        Z = run(batch)
        return torch.stack([(run(batch[b : b + 1])[0] - Z[b]).abs().max() for b in range(3)])

    gap = measured_gap(beside_others, own, exact, same_shape_tolerance(together), together.dtype)
    if gap.beyond:
        b, = gap.largest()
        return (f"sequence {b}'s logits change {gap.said()} when the other sequences of its batch change"
                f" (tolerance {gap.tolerance:.1g})")
    gap = measured_gap(alone, own, exact, other_shape_tolerance(together), together.dtype)
    if gap.beyond:
        b, = gap.largest()
        return (f"sequence {b}'s logits change {gap.said()} between a batch of one and a batch of three"
                f" (tolerance for rounding across batch shapes {gap.tolerance:.1g})")
    return None


def dependency(model, V: int, idx: torch.Tensor, seed: int = 0, exact: Float64Copy | None = None) -> Gap:
    """The change map of one sequence idx (T,), as a rounding.Gap whose gaps are M[t, s] = max_v |Z_{t,v}(x
    with x_s changed) - Z_{t,v}(x)|, shape (T, T), x_s changed to a random other token, and whose tolerance
    is the one above which an entry counts as a dependence. One batch: the original and T copies. Where
    some Z_t moved with a later x_s at all, M is measured again on the float64 copy (when one runs), and
    that measurement (gap.deciding) decides."""
    generator = torch.Generator().manual_seed(variant_seed(seed))
    shifts = torch.randint(1, max(V, 2), idx.shape, generator=generator)  # (T,): a random change per position
    batch = perturbed_batch(idx, shifts, V)
    Z = logits(model, batch, V)  # (T+1, T, V)
    gap = measured_gap(lambda run: change_map(run(batch).double()), lambda x: logits(model, x, V),
                       exact or float64_copy(model, V), same_shape_tolerance(Z), Z.dtype,
                       needed=lambda M: bool(M.triu(1).any()), measured=change_map(Z.double()))
    return gap


def picture(depends: torch.Tensor) -> list[str]:
    """The dependency pattern as text: '#' Z_t depends on x_s (s <= t), '!' a future leak, '.' none."""
    T = depends.shape[0]
    rows = ["t\\s " + " ".join(str(s % 10) for s in range(T))]
    for t in range(T):
        cells = (("!" if s > t else "#") if depends[t, s] else "." for s in range(T))
        rows.append(f"{t:>3} " + " ".join(cells))
    return rows


def _band(k: int, T: int) -> set[tuple[int, int]]:
    """Every (t, s) with 0 < s - t <= k: each Z_t sees the next k tokens."""
    return {(t, s) for t in range(T) for s in range(t + 1, min(t + k, T - 1) + 1)}


def _reach(leaks: list[tuple[int, int]], T: int) -> tuple[int, bool] | None:
    """(k, whole) if every Z_t sees x_(t+1) and nothing beyond x_(t+k), k the farthest leak; whole
    when the leaks fill that band (a step further can be too weak to measure in some rows); else None."""
    k = max(s - t for t, s in leaks)
    if not _band(1, T) <= set(leaks):
        return None
    return k, set(leaks) == _band(k, T)


def leak_report(depends: torch.Tensor, L: int | None = None) -> tuple[str, list[str]] | None:
    """None if nothing above the diagonal; else the message naming the first (t, s), what the
    pattern of leaks is, and the mistakes that make that pattern (all of them, when it could be
    several); L, when known, is the model's number of layers."""
    T = depends.shape[0]
    leaks = [(t, s) for t in range(T) for s in range(t + 1, T) if depends[t, s]]
    if not leaks:
        return None
    t, s = leaks[0]
    message = f"Z_{t} depends on the later token x_{s} (positions counted from 0): the model sees the future"
    k, whole = _reach(leaks, T) or (None, False)
    if k == 1 and T > 2:
        message += ("; every Z_t sees exactly one token ahead, x_(t+1): the mask is off by one (it hides s > t + 1,"
                    " not s > t; triu(diagonal=1) is the right one)")
    elif k is not None and k < T - 1:
        sees = (f"the next {k} tokens x_(t+1)..x_(t+{k})" if whole else
                f"x_(t+1), {len(leaks)} of the {len(_band(k, T))} pairs up to x_(t+{k}) leak")
        message += (f"; every Z_t sees {sees} and none further: the pattern of a mask"
                    " off by one (hiding s > t + 1, not s > t; triu(diagonal=1) is the right one), which reaches one step"
                    f" further in each layer that has it ({k} layers, or more if a step further is too weak to measure)")
        if L != k:
            message += f", or of a mask off by {k}"
    elif len(leaks) == T * (T - 1) // 2:
        message += ("; every later token leaks into every row, so something mixes all positions: an attention"
                    " head without its mask, or an operation over the T axis (a mean, sum, normalization or"
                    " softmax over positions)")
        if L is not None and L >= T - 1:
            message += f", or a mask off by one in each of the {L} layers (more than T - 1 = {T - 1})"
    else:
        columns = sorted({s for _, s in leaks})
        message += f"; {len(leaks)} of the {T * (T - 1) // 2} future pairs leak"
        if len(columns) <= 3:
            message += ", all from " + ", ".join(f"x_{s}" for s in columns)
    return message + ".", picture(depends)


def _prefix_report(model, V: int, x: torch.Tensor, exact: Float64Copy) -> str | None:
    """None if Z_t of every prefix x_0..x_{k-1} run alone equals row t of the logits (T, V) of the
    whole sequence x (T,) up to rounding across lengths (told apart as the module docstring says);
    else what moved."""
    T = x.shape[0]

    def appended(run):  # (T - 1, T): [k - 1, t] the change of Z_t (t < k) between x_0..x_{k-1} alone and all of x
        Z = run(x[None])[0].double()  # (T, V)
        gaps = torch.zeros(T - 1, T, dtype=torch.float64)
        for k in range(1, T):
            gaps[k - 1, :k] = (run(x[None, :k])[0].double() - Z[:k]).abs().amax(dim=-1)
        return gaps

    own = remembered(lambda idx: logits(model, idx, V))
    Z = own(x[None])
    gap = measured_gap(appended, own, exact, other_shape_tolerance(Z), Z.dtype)
    if gap.beyond:
        k, t = gap.largest()
        k += 1
        return (f"Z_{t} changes {gap.said((k - 1, t))} when tokens are appended after it: run alone, x_0..x_{k - 1}"
                f" give other logits than as the start of the {T} tokens (tolerance for rounding across lengths"
                f" {gap.tolerance:.1g}), though perturbing a later token's value moved nothing. Z_t depends on how"
                    " many tokens follow it: e.g. positions read from the end of P (P[-T:]), a mask applied after the"
                    " softmax (its sum still runs over the later positions), or a mask, scale or normalization that"
                    " depends on the length T")
    return None


def causality_verdict(model, V: int, T: int, seed: int, L: int | None = None,
                      exact: Float64Copy | None = None) -> tuple[str, list[str]]:
    """Exercise 2's verdict on a model already known to compute each sequence on its own (exact: the float64
    copy that confirms changes, shared with the other checks of the same model):
    (message, the dependency picture) if Z_t depends on x_0..x_t only, else Wrong naming the first leak."""
    x = torch.randint(0, V, (T,), generator=torch.Generator().manual_seed(variant_seed(seed)))
    exact = exact or float64_copy(model, V)
    with eval_mode(model):
        gap = dependency(model, V, x, seed, exact)
        M, tol = gap.deciding, gap.tolerance
        depends = M > tol
        leak = leak_report(depends, L)
        if leak:
            message, details = leak
            raise Wrong(message, details + ([f"(not measured again in float64: {gap.why_not})"]
                                            if gap.why_not else []), mistake="causality-leak")
        appended = _prefix_report(model, V, x, exact)
    if appended:
        raise Wrong(appended + ".", picture(depends), mistake="causality-prefix-changes")
    details = picture(depends)
    if weakest_present_dependence(M) <= tol:
        details.append("(causal; note some Z_t ignore an earlier x_s, '.', which a GPT normally uses)")
    return (f"perturbing each of the {T} tokens moved no earlier logit row, and no row moved when tokens were"
            f" appended: Z_t depends on x_0..x_t only."), details


@checker(EX2)
def check_causality(model, V: int | None = None, T: int = 8, seed: int = 0) -> tuple[str, list[str]]:
    """Exercise 2: is Z_t a function of x_0..x_t only? `model` is anything callable on token ids
    (B, T) returning logits (B, T, V) (or a tuple whose first item is), e.g. your own GPT. V is
    read from model.config (gptlib) or from the output; T (default 8) is the sequence length tried:
    pass a shorter one if your model's T_max is below 8."""
    with eval_mode(model):
        V, T = sizes(model, V, T)
        exact = float64_copy(model, V)
        refuse_randomness(model, V, T, exact)
        mixed = batch_independence(model, V, T, seed, exact)
    if mixed:
        raise Wrong(f"{mixed}: each sequence must be computed on its own before causality can be checked.",
                    mistake="causality-mixes-batch")
    return causality_verdict(model, V, T, seed, exact=exact)


# ---- the learner's own dependency map ----------------------------------------------------------

# The models a learner's dependency map is run on: small, so it is fast, and seeded.
_MAP_CONFIG = GPTConfig(V=13, T_max=8, d=16, H=2, L=2)
# Token ids that hit the edge cases: token 0 (where "replace x_s by 0" changes nothing), V - 1
# (where x_s + 1 leaves the vocabulary), and repeats (where "take the next token" changes nothing).
_MAP_IDS = torch.tensor([0, 12, 3, 3, 0, 7, 12, 1])  # (T,)


class _Reader(nn.Module):
    """A model whose logit row Z_t reads only the tokens at the given offsets back (t - o, when
    t - o >= 0) and, with first=True, the first token x_0: a dependency pattern that is not
    "everything before". Z_t = sum of E_o[x_{t-o}] (+ E_first[x_0]); called like a GPT, on (T,) or (B, T)."""

    def __init__(self, config: GPTConfig, offsets: tuple[int, ...], first: bool = False):
        super().__init__()
        self.config, self.offsets = config, offsets
        self.tables = nn.Parameter(torch.randn(len(offsets) + first, config.V, config.V))  # one V x V table each

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = idx if idx.dim() == 2 else idx[None]  # (B, T)
        Z = torch.zeros(*x.shape, self.config.V)  # (B, T, V)
        for table, o in zip(self.tables, self.offsets):
            Z[:, o:] += table[x[:, : x.shape[1] - o]]
        if len(self.tables) > len(self.offsets):
            Z += self.tables[-1][x[:, :1]]  # every row reads x_0
        return Z if idx.dim() == 2 else Z[0]


def map_models() -> dict[str, nn.Module]:
    """The models a dependency map is tried on, by what their dependency pattern is."""
    torch.manual_seed(variant_seed(0))
    return {
        "causal GPT": GPT(_MAP_CONFIG).eval(),
        "unmasked GPT": GPT(_MAP_CONFIG.replace(causal=False)).eval(),
        "model whose Z_t reads x_t and x_(t-2) only": _Reader(_MAP_CONFIG, (0, 2)),
        "model whose Z_t reads x_0 and x_t only": _Reader(_MAP_CONFIG, (0,), first=True),
    }


def _suffix_closure(truth: torch.Tensor) -> torch.Tensor:
    """[t, s] = Z_t depends on some x_r with r >= s: the map of perturbing x_s..x_{T-1} together."""
    return truth.flip(-1).cummax(dim=-1).values.flip(-1)


def _prefix_closure(truth: torch.Tensor) -> torch.Tensor:
    """[t, s] = Z_t depends on some x_r with r <= s: the map of changes to x_0..x_s piling up."""
    return truth.cummax(dim=-1).values


def _name_wrong_map(got: torch.Tensor, truth: torch.Tensor, idx: torch.Tensor, name: str) -> str:
    T = truth.shape[0]
    if not got.any():
        return f"your map shows no dependence at all on the {name}: compare perturbed logits with the original's"
    if got.equal(truth.T):
        return "your map is transposed: row t should be the logit position, column s the perturbed token"
    if got.equal(torch.eye(T, dtype=torch.bool)):
        return "your map only sees Z_t depend on x_t itself: perturb x_s and look at every row t"
    if got.equal(_suffix_closure(truth)):
        return (f"on the {name} your map marks Z_t as depending on x_s whenever it depends on any of x_s..x_(T-1):"
                " it changes x_s and every later token together; change x_s alone")
    if got.equal(_prefix_closure(truth)):
        return (f"on the {name} your map marks Z_t as depending on x_s whenever it depends on any of x_0..x_s:"
                " the changes pile up (x_0..x_s all changed, as when idx is changed in place and never restored);"
                " change x_s alone, on a copy")
    missing = [s for s in range(T) if truth[:, s].any() and not got[:, s].any()]
    rest = [s for s in range(T) if s not in missing]
    if missing and got[:, rest].equal(truth[:, rest]):
        found = f"your map finds no dependence on x_s at s = {missing} and is right elsewhere"
        if all(idx[s] == 0 for s in missing):
            return found + ": there x_s is token 0, so a change to token 0 changes nothing; change x_s to another token"
        if all(int(idx[s]) in [int(idx[j]) for j in (s - 1, s + 1) if 0 <= j < T] for s in missing):
            return found + ": there x_s equals a neighbour, so taking the neighbour's token changes nothing"
        return found + f": its change is a no-op for the tokens {sorted({int(idx[s]) for s in missing})} there"
    return f"your map differs from the measured one on the {name}"


@checker(EX2)
def check_dependency_map(dependency_map) -> tuple[str, list[str]]:
    """Exercise 2, your own perturbation test: dependency_map(model, idx) -> (T, T) tensor M with
    M[t, s] > 0 exactly when the logit row Z_t changes when token x_s changes (idx has shape (T,),
    model(idx) has shape (T, V)). Run on a causal and an unmasked gptlib GPT and on two models that
    read only some earlier positions, with token ids that include 0, V - 1 and repeats."""
    idx, V = _MAP_IDS, _MAP_CONFIG.V
    T = idx.shape[0]
    models = map_models()
    for name, model in models.items():
        with eval_mode(model):
            gap = dependency(model, V, idx)
        truth = gap.deciding > gap.tolerance  # (T, T)
        M = as_matrix(call(dependency_map, model, idx.clone(), what="model, idx"), (T, T), "your map")
        got = M.abs() > RTOL * M.abs().max().clamp(min=1e-30)
        if not got.equal(truth):
            details = [f"on the {name}, ids {idx.tolist()}, yours:"] + picture(got) + ["measured:"] + picture(truth)
            raise Wrong(_name_wrong_map(got, truth, idx, name) + ".", details, mistake="dependency-map-differs")
    return f"your map matches the measured dependencies of all {len(models)} models.", [f"models: {', '.join(models)}"]
