"""Notebook 10's "Your turn": activation patching written by the learner, checked head by head.

    check_head_patching(fn)   fn(model, prompts, layer, head) -> the fraction of the log-probability gap
                              that the clean run's write of that head restores in the corrupted run

compared with gptlib.analysis.patching.patching_restoration on the shipped induction model, for every head,
on two corruptions of the evaluation rows (seeds 0 and 1), so a table copied from the notebook fails.
"""

from __future__ import annotations

import functools

import torch

from .. import pretrained
from ..analysis.decomposition import head_label, logit_pieces, stream_writes
from ..analysis.induction import induction_eval_tokens
from ..analysis.patching import PatchingPrompts, induction_patching_prompts, logits_from_writes, patching_restoration
from ..checking.mistakes import Mistake, close, name_mistake
from ..checking.reading import as_float
from ..checking.running import Wrong, call, checker
from ..checking.variants import variant_seed

TOLERANCE = 1e-3  # fractions of order 1, from float32 runs of the same model in another order
ROWS = 16  # evaluation rows per corruption: enough for stable fractions, quick to rerun 16 times
SEEDS = (0, 1)


@functools.cache
def _points(seeds: tuple[int, ...]) -> tuple:
    model = pretrained.load_pretrained("induction")
    rows = induction_eval_tokens()[:ROWS]
    prompts = tuple(induction_patching_prompts(rows, model.config.V, seed) for seed in seeds)
    return model, prompts


def _unpatched(model, prompts: PatchingPrompts) -> tuple:
    """The clean and corrupted runs' writes and logit pieces, which every head's metrics share."""
    clean, corrupted = stream_writes(model, prompts.clean), stream_writes(model, prompts.corrupted)
    return clean, corrupted, logit_pieces(model, clean), logit_pieces(model, corrupted)


def _metrics(model, prompts: PatchingPrompts, unpatched: tuple, layer: int, head: int) -> dict[str, float]:
    """The log-probabilities of the runs a patching computation (or a typical mistake) compares;
    unpatched: _unpatched(model, prompts)."""
    label = head_label(layer, head)
    clean, corrupted, clean_pieces, corrupted_pieces = unpatched
    m = prompts.log_prob
    patched = stream_writes(model, prompts.corrupted, replace={label: clean[label]})
    noised = stream_writes(model, prompts.clean, replace={label: corrupted[label]})
    index = clean.labels.index(label)
    swapped = corrupted_pieces.total + clean_pieces.direct[index] - corrupted_pieces.direct[index]
    return {"clean": m(logits_from_writes(model, clean)), "corrupted": m(logits_from_writes(model, corrupted)),
            "patched": m(logits_from_writes(model, patched)), "noised": m(logits_from_writes(model, noised)),
            "direct only": m(swapped)}


def _fraction(r: dict, top: str) -> float:
    return (r[top] - r["corrupted"]) / (r["clean"] - r["corrupted"])


PATCHING_MISTAKES = {
    Mistake("patching-not-divided-by-gap",
        "you returned the change of the log-probability itself; divide it by the gap metric(clean) - metric(corrupted)"):
        lambda r: r["patched"] - r["corrupted"],
    Mistake("patching-one-minus-fraction",
        "that is the part still missing, 1 - the fraction: measure from the corrupted run upwards"):
        lambda r: 1 - _fraction(r, "patched"),
    Mistake("patching-noising",
        "you put the corrupted run's write into the clean run (noising), which measures what the head's loss destroys, "
    "not what its clean write restores"):
        lambda r: (r["clean"] - r["noised"]) / (r["clean"] - r["corrupted"]),
    Mistake("patching-direct-only",
        "you swapped only the head's direct contribution to the logits: rerun the model with the clean write in the "
    "stream (stream_writes(..., replace=...)) so that later layers read it"):
        lambda r: _fraction(r, "direct only"),
}


@checker("Patching")
def check_head_patching(restored_fraction) -> tuple[str, list[str]]:
    """restored_fraction(model, prompts, layer, head) -> float, for gptlib.analysis.patching.PatchingPrompts."""
    seeds = tuple(variant_seed(seed) for seed in SEEDS)  # other corruptions in a hidden variant
    model, all_prompts = _points(seeds)
    with torch.no_grad():
        truth = {(seed, l, h): r.item() for seed, prompts in zip(seeds, all_prompts)
                 for (l, h), r in zip(((l, h) for l in range(model.config.L) for h in range(model.config.H)),
                                      patching_restoration(model, prompts.clean, prompts.corrupted,
                                                           prompts.log_prob).flatten())}
    answers = {}
    for seed, prompts in zip(seeds, all_prompts):
        for l in range(model.config.L):
            for h in range(model.config.H):
                got = call(restored_fraction, model, prompts, l, h, what=f"model, prompts (seed {seed}), {l}, {h}")
                answers[(seed, l, h)] = as_float(got, f"the fraction restored by head {h} of layer {l}")
    same = functools.partial(close, atol=TOLERANCE)
    wrong = [point for point, value in answers.items() if not same(value, truth[point])]
    if wrong:
        seed, l, h = wrong[0]
        unpatched = {s: _unpatched(model, prompts) for s, prompts in zip(seeds, all_prompts)}
        runs = {point: _metrics(model, all_prompts[seeds.index(point[0])], unpatched[point[0]], *point[1:])
                for point in answers}
        mistakes = {name: (lambda seed, l, h, f=f: f(runs[(seed, l, h)])) for name, f in PATCHING_MISTAKES.items()}
        named = name_mistake(answers, mistakes, same)
        raise Wrong(named or f"head {h} of layer {l} (corruption seed {seed}): you return {answers[(seed, l, h)]:.4f}, "
                    f"patching gives {truth[(seed, l, h)]:.4f}",
                    [f"{len(wrong)} of {len(answers)} (seed, layer, head) points differ by more than {TOLERANCE:g}"],
                    mistake=None)
    found = sorted({(l, h) for (_, l, h), value in truth.items() if value > 0.1})
    return (f"your patching matches gptlib's for all {len(answers)} (corruption, layer, head) points "
            f"(tolerance {TOLERANCE:g}); the heads restoring more than 0.1: {', '.join(head_label(*p) for p in found)}.", [])
