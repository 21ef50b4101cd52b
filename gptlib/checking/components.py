"""A learner's component (an nn.Module) judged against gptlib's own, the build checkers' shared machinery: build
the learner's module, give it seeded random weights (its own come back afterwards), run it, and compare its
output with gptlib's own component under each reading of its tensors (roles.py), naming the typical mistakes
that reproduce the output when none agrees."""

from __future__ import annotations

import contextlib
import copy
import functools
import math

import torch
from torch import nn

from .mistakes import close, name_mistake
from .running import Wrong, call
from .variants import variant_choice, variant_seed

SIZES = {"V": 13, "T_max": 8, "d": 16, "H": 2, "L": 2, "d_ff": 64}  # all different, so shapes tell roles apart
B, T = 2, 6  # the random input: T < T_max, so P's first T rows are the ones used

TOL = 2e-5  # |learner - reference| <= TOL * (1 + max |reference|): float32 rounding, well below every mistake
same = functools.partial(close, rtol=TOL, atol=TOL, of_largest=True)  # that rule, as mistakes.close states it


def sizes() -> dict[str, int]:
    """SIZES; in a hidden variant (variants.variant_choice) other sizes of the same kind: d = H d_head, d_ff = 4 d,
    T < T_max, and V, T_max, d, H, L, d_ff, d_head, 3 d_head, 3 d all different, so that shapes still tell roles apart."""
    return dict(variant_choice(SIZES, _other_sizes))


def _other_sizes(rng) -> list[tuple[str, int]]:
    while True:
        H, d_head = rng.choice((2, 4)), rng.choice((5, 6, 7, 9))
        d = H * d_head
        drawn = {"V": rng.randint(11, 40), "T_max": rng.randint(T + 1, 10), "d": d, "H": H, "L": rng.choice((2, 3)),
                 "d_ff": 4 * d}
        if len({*drawn.values(), d_head, 3 * d_head, 3 * d}) == len(drawn) + 3:
            return list(drawn.items())


def built(learner, *sizes: int, what: str) -> nn.Module:
    """The learner's module: as given, or their class called with the sizes (positionally)."""
    module = learner if isinstance(learner, nn.Module) else call(learner, *sizes, what=what)
    if not isinstance(module, nn.Module):
        raise Wrong(f"expected an nn.Module (or a class building one), got {type(module).__name__}", mistake="build-not-a-module")
    return module


@contextlib.contextmanager
def random_weights(module: nn.Module, seed: int):
    """Fill every parameter with seeded random values (matrices ~ 1/sqrt(their smaller side)), no_grad;
    the module's own weights and mode come back afterwards."""
    saved, training = copy.deepcopy(module.state_dict()), module.training
    generator = torch.Generator().manual_seed(variant_seed(seed))
    module.eval()
    try:
        with torch.no_grad():
            for p in module.parameters():
                std = 1 / math.sqrt(min(p.shape[-2:])) if p.dim() >= 2 else 0.5
                p.copy_(torch.randn(p.shape, generator=generator) * std)
            yield
    finally:
        module.load_state_dict(saved)
        module.train(training)


def zero_extra(module: nn.Module, names: list[str]) -> list[str]:
    """Zero the learner's tensors the lecture has no place for (biases on W_Q, W_K, W_V, W_U); the note saying so."""
    table = dict(module.named_parameters())
    for name in names:
        table[name].zero_()
    return extra_note(names)


def extra_note(names: list[str]) -> list[str]:
    return [f"{', '.join(names)}: no such term in the lecture's definition, set to 0 for this comparison"] if names else []


def output(module: nn.Module, x: torch.Tensor, shape: tuple[int, ...], what: str) -> torch.Tensor:
    """module(x), checked to be a tensor of `shape`, as float64 (NaN kept: a mistake may show as NaN)."""
    y = call(module, x, what=what)
    if isinstance(y, (tuple, list)) and y and isinstance(y[0], torch.Tensor):
        y = y[0]
    if not isinstance(y, torch.Tensor):
        raise Wrong(f"your module returned {type(y).__name__}, expected a tensor of shape {shape}",
                    mistake="build-output-not-a-tensor")
    if tuple(y.shape) != tuple(shape):
        raise Wrong(f"for an input of shape {tuple(x.shape)} your module returned shape {tuple(y.shape)}, expected {shape}",
                    mistake="build-output-shape")
    return y.detach().double()


def agreeing_reading(got: torch.Tensor, readings: list, reference, mistakes, component: str, notes: list[str] = ()):
    """The first reading under which `got` equals reference(reading); else Wrong naming the typical
    mistakes (mistakes(reading) -> {message: thunk}) that reproduce `got` (mistakes.name_mistake: every one
    that does, as candidates when several do), under the first reading under which any does."""
    for reading in readings:
        if same(got, reference(reading)):
            return reading
    for reading in readings:
        named = name_mistake({(): got}, mistakes(reading), same)  # the point (): each thunk takes no arguments
        if named:
            raise Wrong(named + ".", list(notes), mistake=None)
    gap = (got - reference(readings[0])).abs().max().item()
    nan = " (it holds NaN or inf)" if not torch.isfinite(got).all() else ""
    raise Wrong(f"your {component} differs from the lecture's by up to {gap:.2g}{nan}, more than the tolerance "
                f"{TOL:g} x (1 + max |output|), and no typical mistake explains it.", list(notes), mistake=None)


def inputs(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(variant_seed(seed)))


def loaded(module: nn.Module, weights: dict) -> nn.Module:
    """A gptlib component with the weights of a reading copied in (its parameters by their lecture names)."""
    with torch.no_grad():
        for name, value in weights.items():
            getattr(module, name).copy_(value)
    return module

