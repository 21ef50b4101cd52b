"""Bring your own model: one call checks a learner's GPT against what Lecture 5 says must hold.

    check_own_model(model, V=..., T_max=..., d=..., L=...)

`model` is anything mapping token ids (B, T) to logits (B, T, V); parameters are read only if it
is an nn.Module. Four checks, each its own verdict in one report:

    batch independence   a sequence's logits do not depend on the rest of its batch
    causality            Exercise 2: Z_t moves with x_0..x_t only, and not when tokens are appended
    parameter count      Theorem 5.2 for the model's own bias conventions
    initial loss         near ln V, as for a freshly initialized model (Project aside 5.2)

The parameter count never reads parameter names, which are the learner's own. It counts distinct
tensors (a tensor shared by two modules, or a view of another one, once), and reads tying from the
model itself: W_U = E^T when a single V x d tensor exists (it then serves as both), untied when two
do. Where shapes cannot tell (V equal to T_max, d or d_ff), tying is whatever explains the total
best, said as an assumption the learner can override with `tied=`. The total is then compared
with Theorem 5.2 plus the bias conventions a learner may choose (biases on W_Q, W_K, W_V or W_U;
none on W_O, in the MLP or as LayerNorm shifts), and a difference they do not explain is matched
with the parts a model can miss or have extra (no P, no LN_f, ...): both are rows of the table
count_differences.DIFFERENCES, which Exercises 1 and 5 read too. When several explain it, all are
listed as candidates.
"""

from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F
from torch import nn

from .. import validation
from ..analysis.counting import theorem_5_2
from ..checking.mistakes import explaining, note
from ..checking.result import FAILED, NOT_ATTEMPTED, PASSED, Result
from ..checking.running import Wrong, checker
from ..config import GPTConfig
from ..model import LayerNorm, eval_mode
from .causality import (
    batch_independence,
    causality_verdict,
    float64_copy,
    logits,
    refuse_a_length_too_long,
    refuse_randomness,
    tried_length,
)
from .count_differences import (
    BIASES,
    CONVENTION,
    DIFFERENCES,
    NO_B_1,
    NO_LINEAR_BIASES,
    NO_MLP_BIASES,
    NO_P,
    NORMS_GROUP,
    OTHER,
    SLIP,
    TIED_W_U_BIAS,
    W_U_BIAS,
)

OWN = "Your own GPT"
LOSS_RTOL = 0.1  # initial loss within 10% of ln V
NORMS = (nn.LayerNorm, nn.RMSNorm, LayerNorm)  # norm layers recognised by type, as evidence about LayerNorm slips
UNEXPLAINED = " (compare the shapes below with Theorem 5.2's)"


def theorem_5_2_count(V: int, T_max: int, d: int, L: int, d_ff: int, tied: bool) -> int:
    """Theorem 5.2 (gptlib.analysis.counting.theorem_5_2) for these sizes; H does not enter it."""
    return theorem_5_2(GPTConfig(V=V, T_max=T_max, d=d, H=1, L=L, d_ff=d_ff, tie_weights=tied))


def differences(V: int, T_max: int, d: int, L: int, d_ff: int, tied: bool) -> dict[str, tuple[bool, str, int]]:
    """What can make a model's count differ from Theorem 5.2 (count_differences.DIFFERENCES, slips of
    arithmetic aside, and those that do not apply to this tying): what -> (a bias convention the learner
    may choose?, the group of tensors it shows in, the difference it makes)."""
    c = GPTConfig(V=V, T_max=T_max, d=d, H=1, L=L, d_ff=d_ff, tie_weights=tied)
    return {x.what: (x.kind == CONVENTION, x.group, x.delta(c)) for x in DIFFERENCES if x.kind != SLIP and x.delta(c)}


def _distinct(model: nn.Module) -> list[torch.Tensor]:
    """The model's parameters, each storage counted once (E and W_U = E^T tied, or a view of another)."""
    seen, distinct = set(), []
    for p in model.parameters():
        key = (p.untyped_storage().data_ptr(), p.storage_offset())
        if key not in seen:
            seen.add(key)
            distinct.append(p)
    return distinct


def _inventory(params: list[torch.Tensor]) -> str:
    shapes = Counter(tuple(p.shape) for p in params)
    return ", ".join(f"{shape} x{n}" if n > 1 else f"{shape}" for shape, n in shapes.most_common())


def _tying(params: list[torch.Tensor], V: int, T_max: int, d: int, d_ff: int) -> tuple[bool | None, str]:
    """(tied, how it was told) from the V x d tensors; (None, why) where shapes cannot tell."""
    if V in (T_max, d, d_ff):
        return None, f"V = {V} equals another size, so shapes cannot tell E and W_U apart"
    n = sum(tuple(p.shape) in ((V, d), (d, V)) for p in params)
    if n == 1:
        return True, "tied: one V x d tensor, which serves as both E and W_U"
    if n == 2:
        return False, "untied: two distinct V x d tensors, E and W_U"
    return None, f"{n} tensors of shape V x d, so shapes cannot tell"


def _groups(model: nn.Module, table_shapes: set[tuple[int, int]]) -> dict[str, int] | None:
    """Entries per group when every parameter sits in an nn.Linear, an nn.Embedding or a norm layer
    of a known type (read by type, never by name), or is a raw Parameter of one of table_shapes (E,
    W_U or P, which no bias or gain can be): the linear layers' biases, the norm layers' gains and
    shifts, everything else. None when some other parameter sits elsewhere (a raw Parameter)."""
    groups, seen = dict.fromkeys((BIASES, NORMS_GROUP, OTHER), 0), set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not isinstance(module, (nn.Linear, nn.Embedding, *NORMS)) and tuple(p.shape) not in table_shapes:
                return None
            key = (p.untyped_storage().data_ptr(), p.storage_offset())
            if key not in seen:
                seen.add(key)
                group = NORMS_GROUP if isinstance(module, NORMS) else BIASES if p is getattr(module, "bias", None) else OTHER
                groups[group] += p.numel()
    return groups


def _table_shapes(V: int, T_max: int, d: int, L: int) -> set[tuple[int, int]]:
    """The shapes of E, W_U and P, when no bias or gain can have them: a stack of per-block or
    per-LayerNorm d-vectors has at most 2L + 1 rows."""
    return {shape for n in (V, T_max) if n > 2 * L + 1 for shape in ((n, d), (d, n))}


def _expected_groups(V: int, T_max: int, d: int, L: int, d_ff: int, tied: bool) -> dict[str, int]:
    biases, norms = L * (d + d_ff + d), L * 4 * d + 2 * d
    return {BIASES: biases, NORMS_GROUP: norms, OTHER: theorem_5_2_count(V, T_max, d, L, d_ff, tied) - biases - norms}


def explanations(delta: int, candidates: dict[str, tuple[bool, str, int]], least: int = 0) -> list[tuple[list[str], list[str]]]:
    """Every (conventions, mistakes) among the candidates whose differences add up to delta, with as
    few differences in all as any (at most four), and among those as few mistakes (at least `least`,
    at most two): the simplest stories, all of them (found by result.explaining)."""
    mistaken = [name for name, (ok, _, _) in candidates.items() if not ok]
    allowed = [name for name in candidates if name not in mistaken]
    differences = {name: (lambda n=candidates[name][2]: n) for name in mistaken + allowed}  # mistakes first: listed by them
    for n in range(least, 5):
        found = explaining({(): delta}, differences, size=n)
        for m in range(least, min(n, 2) + 1):
            stories = [([x for x in names if x in allowed], [x for x in names if x in mistaken])
                       for names in found if sum(x in mistaken for x in names) == m]
            if stories:
                return stories
    return []


def _fewest_mistakes(total: int, V: int, T_max: int, d: int, L: int, d_ff: int, tied: bool) -> int:
    """How few mistakes explain the total for this tying (3: more than explanations tries)."""
    found = explanations(total - theorem_5_2_count(V, T_max, d, L, d_ff, tied), differences(V, T_max, d, L, d_ff, tied))
    return len(found[0][1]) if found else 3


def _sizes_that_fit(delta: int, d: int, L: int, d_ff: int, T_max: int, shapes: set[tuple[int, ...]]) -> list[str]:
    """Other sizes the learner may have built that make the difference exactly: L blocks, or a d_ff
    or T_max that is also the size of some tensor's dimension."""
    k, rest = divmod(delta, 4 * d * d + d + 2 * d * d_ff + d_ff + d + 4 * d)
    if k and not rest and L + k > 0:
        return [f"there were L = {L + k} blocks (pass L={L + k} if there are)"]
    dimensions = {n for shape in shapes for n in shape}
    fits = []
    for bias in (1, 0):  # MLP width k: 2dk weights, plus k for b_1 when there is one
        k, rest = divmod(delta, L * (2 * d + bias))
        if k and not rest and d_ff + k in dimensions:
            fits.append(f"the MLP width were d_ff = {d_ff + k} (pass d_ff={d_ff + k} if it is)")
            break
    k, rest = divmod(delta, d)  # P's rows
    if k and not rest and ({(T_max + k, d), (d, T_max + k)} & shapes):
        fits.append(f"T_max were {T_max + k} (pass T_max={T_max + k} if it is)")
    return fits


def _group_verdict(group: str | None, delta: int, candidates: dict) -> tuple[list[str], str | None]:
    """(detail lines naming the bias conventions found, the mistake message or None) for one group's
    difference (group None: the whole count). A difference bias conventions explain passes; when the whole count is all there
    is to go by, the mistakes that would explain it too are named as what it cannot rule out."""
    where = "" if group is None else f"{group}: "
    found = explanations(delta, candidates)
    if found and not found[0][1]:
        also = explanations(delta, candidates, least=1) if group is None else []
        unsure = [f"(the total alone cannot rule out {' and '.join(slips + chosen)})" for chosen, slips in also[:2]]
        return [f"your bias convention: {c}" for c in found[0][0]] + unsure, None
    off = f"{where}{delta:+,} entries"
    note(*(slip for _, slips in found for slip in slips))  # DIFFERENCES' Mistakes: the class report counts them by id
    if len(found) == 1:
        chosen, slips = found[0]
        also = f" (with your bias convention: {'; '.join(chosen)})" if chosen else ""
        return [], f"{off}, exactly what {' and '.join(slips)} make{also}"
    if found:
        options = "; or ".join(" and ".join(slips + chosen) for chosen, slips in found[:4])
        return [], f"{off}, which several differences would make (the count cannot tell which): {options}"
    return [], f"{off}, which no bias convention or listed mistake explains{UNEXPLAINED}"


@checker("parameter count")
def _count(model, V: int, T_max: int, d: int, L: int, d_ff: int, tied: bool | None) -> tuple[str, list[str]]:
    if not isinstance(model, nn.Module):
        raise Wrong("not an nn.Module, so its parameters cannot be counted (the other checks still apply).",
                    mistake="own-model-not-a-module")
    params = _distinct(model)
    total = sum(p.numel() for p in params)
    if tied is not None:
        told = f"{'tied' if tied else 'untied'}, as you said (tied={tied})"
    else:
        tied, told = _tying(params, V, T_max, d, d_ff)
    if tied is None:  # shapes cannot tell: whichever needs fewer mistakes, untied on a draw
        tied = _fewest_mistakes(total, V, T_max, d, L, d_ff, True) < _fewest_mistakes(total, V, T_max, d, L, d_ff, False)
        told += f"; assumed {'tied' if tied else 'untied'}, which explains the count best (pass tied= if not)"
    theorem = theorem_5_2_count(V, T_max, d, L, d_ff, tied)
    details = [f"numel() = {total:,} (each shared tensor once); Theorem 5.2 = {theorem:,} (d_ff = {d_ff}, {told})",
               f"parameter shapes: {_inventory(params)}"]
    if total == theorem:
        return "numel() equals Theorem 5.2 exactly.", details
    candidates = differences(V, T_max, d, L, d_ff, tied)
    shapes = {tuple(p.shape) for p in params}
    if shapes & {(T_max, d), (d, T_max)} and T_max not in (V, d, d_ff):
        del candidates[NO_P]  # a T_max x d tensor is there
    if shapes & {(d_ff,), (L, d_ff)} and d_ff not in (V, d):  # a b_1 (or L of them) is there
        for name in (NO_MLP_BIASES, NO_B_1, NO_LINEAR_BIASES):
            del candidates[name]
    if (V,) not in shapes:
        for name in (W_U_BIAS, TIED_W_U_BIAS):
            candidates.pop(name, None)  # no V-vector to be one (one of the two applies, by tying)
    groups = _groups(model, _table_shapes(V, T_max, d, L))
    if groups is None:  # raw Parameters: only the total can be compared
        deltas = {None: (total - theorem, candidates)}
    else:  # nn.Linear, nn.Embedding and norm layers: each group compared on its own
        expected = _expected_groups(V, T_max, d, L, d_ff, tied)
        details.append("by group (found by layer type): " + ", ".join(
            f"{group} {groups[group]:,} (theorem {expected[group]:,})" for group in groups))
        deltas = {group: (groups[group] - expected[group], {name: c for name, c in candidates.items() if c[1] == group})
                  for group in groups if groups[group] != expected[group]}
    problems = []
    for group, (delta, group_candidates) in deltas.items():
        lines, problem = _group_verdict(group, delta, group_candidates)
        details += lines if not problem else []
        problems += [problem] if problem else []
    fits = _sizes_that_fit(total - theorem, d, L, d_ff, T_max, shapes)
    if fits and any(problem.endswith(UNEXPLAINED) for problem in problems):  # the sizes given may be what is wrong
        raise Wrong(f"numel() is {total - theorem:+,} off Theorem 5.2: exact if {' or if '.join(fits)}.", details,
                    mistake="own-model-sizes-fit-count")
    if problems:
        raise Wrong("; ".join(problems) + ".", details, mistake="own-model-count-off")
    return f"numel() is {total - theorem:+,} off Theorem 5.2, exactly your bias convention (named below).", details


@checker("batch independence")
def _batch(model, V: int, T: int, seed: int, exact) -> tuple[str, list[str]]:
    with eval_mode(model):
        mixed = batch_independence(model, V, T, seed, exact)
    if mixed:
        raise Wrong(mixed + ": something mixes examples (e.g. BatchNorm, or a mean or softmax over the batch dimension).",
                    mistake="own-model-mixes-batch")
    return "each sequence's logits are the same beside other sequences and alone (up to rounding).", []


_causal = checker("causality")(causality_verdict)


@checker("initial loss")
def _initial_loss(model, V: int, T: int, seed: int) -> tuple[str, list[str]]:
    generator = torch.Generator().manual_seed(seed + 2)
    idx = torch.randint(0, V, (4, T + 1), generator=generator)
    with eval_mode(model):
        Z = logits(model, idx[:, :-1], V).double()  # (4, T, V)
    loss = F.cross_entropy(Z.reshape(-1, V), idx[:, 1:].reshape(-1)).item()
    verdict = f"initial loss {loss:.2f} vs ln V = {math.log(V):.2f}"
    if abs(loss - math.log(V)) > LOSS_RTOL * math.log(V):
        raise Wrong(
            f"{verdict}: not within {LOSS_RTOL:.0%}; at initialization the predictions should be close to uniform"
            " (weights too large? a trained model rightly fails this one).", mistake="own-model-initial-loss")
    return f"{verdict}: within {LOSS_RTOL:.0%}, nearly uniform predictions as expected at initialization.", []


@checker(OWN)
def _runs_on(model, V: int, T: int, exact) -> tuple[str, list[str]]:
    refuse_a_length_too_long(model, T)
    refuse_randomness(model, V, T, exact)
    return f"runs on {T} tokens, the same logits each time.", []


def check_own_model(
    model, *, V: int, T_max: int, d: int, L: int, d_ff: int | None = None, H: int | None = None,
    tied: bool | None = None, T: int = 8, seed: int = 0,
) -> Result:
    """Check your own GPT (any module mapping ids (B, T) to logits (B, T, V)) against Lecture 5.

    Give its sizes: V, T_max, d, L, d_ff if it is not 4d, and H if you like (checked to divide d;
    the count does not depend on it). `tied` says whether W_U = E^T (None: read from the model,
    see the module docstring). T (default min(8, T_max)) is the length tried.
    Returns a report whose parts are the four verdicts; it passes when all four pass.
    """
    for name, value in (("V", V), ("T_max", T_max), ("d", d), ("L", L), ("d_ff", d_ff if d_ff is not None else 1)):
        validation.integer(name, value, at_least=1)
    if H is not None and d % validation.integer("H", H, at_least=1):
        raise ValueError(f"H must divide d, got H = {H}, d = {d}")
    if tied not in (None, True, False):
        raise ValueError(f"tied must be True, False or None (read from the model), got {tied!r}")
    T = tried_length(T, T_max)
    exact = float64_copy(model, V)  # one float64 copy of the model confirms every change the checks measure
    runs = _runs_on(model, V, T, exact)
    if runs.status == FAILED:
        return runs
    parts = (
        _batch(model, V, T, seed, exact),
        _causal(model, V, T, seed, L, exact),
        _count(model, V, T_max, d, L, d_ff or 4 * d, tied),
        _initial_loss(model, V, T, seed),
    )
    if any(part.status == NOT_ATTEMPTED for part in parts):
        return Result(OWN, NOT_ATTEMPTED, "your model still raises NotImplementedError.")
    failing = [part.exercise for part in parts if not part.passed]
    if failing:
        named = tuple(dict.fromkeys(mistake for part in parts for mistake in part.mistakes))  # what the parts named
        return Result(OWN, FAILED, f"{', '.join(failing)}: see below.", (), parts, mistakes=named)
    return Result(OWN, PASSED, "all four checks pass.", (), parts)
