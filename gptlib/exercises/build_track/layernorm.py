"""Build step 1, Definition 4.1: LayerNorm as a module."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...checking import roles
from ...checking.components import B, T, agreeing_reading, built, inputs, output, random_weights, sizes
from ...checking.mistakes import Mistake
from ...checking.running import checker

EPS = 1e-5  # Definition 4.1's epsilon, as in the course config


def layer_norm_mistakes(X: torch.Tensor, gamma, beta) -> dict:
    mu = X.mean(-1, keepdim=True)
    var = X.var(-1, unbiased=False, keepdim=True)

    def affine(Y):
        return gamma * Y + beta

    return {
        Mistake("ln-unbiased-variance",
            "you used the unbiased variance (dividing by d - 1, torch.var's default): sigma^2 in Definition 4.1 divides by d"):
            lambda: affine((X - mu) / torch.sqrt(X.var(-1, keepdim=True) + EPS)),
        Mistake("ln-wrong-axis-positions",
            "you normalized over the wrong axis (positions, dim -2): LayerNorm normalizes each row over its d features"):
            lambda: affine((X - X.mean(-2, keepdim=True)) / torch.sqrt(X.var(-2, unbiased=False, keepdim=True) + EPS)),
        Mistake("ln-batch-axis",
            "you normalized over the batch (dim 0, as BatchNorm does): LayerNorm normalizes each row over its d features"):
            lambda: affine((X - X.mean(0, keepdim=True)) / torch.sqrt(X.var(0, unbiased=False, keepdim=True) + EPS)),
        Mistake("ln-eps-outside-root", "your eps sits outside the square root: Definition 4.1 divides by sqrt(sigma^2 + eps)"):
            lambda: affine((X - mu) / (var.sqrt() + EPS)),
        Mistake("ln-unbiased-std-plus-eps",
            "you divided by std + eps with the unbiased std (x.std()): sigma^2 divides by d, and eps goes inside the root"):
            lambda: affine((X - mu) / (X.std(-1, keepdim=True) + EPS)),
        Mistake("ln-no-eps", "your eps is missing: Definition 4.1 divides by sqrt(sigma^2 + eps), with eps = 1e-5"):
            lambda: affine((X - mu) / var.sqrt()),
        Mistake("ln-no-centering", "you do not subtract the mean (that is RMSNorm, Aside 4.4): Definition 4.1 centres first"):
            lambda: affine(X / torch.sqrt(X.pow(2).mean(-1, keepdim=True) + EPS)),
        Mistake("ln-no-affine", "gamma and beta are not applied: the output is gamma * normalized + beta"):
            lambda: (X - mu) / torch.sqrt(var + EPS),
        Mistake("ln-by-variance",
            "you divided by the variance instead of its square root"): lambda: affine((X - mu) / (var + EPS)),
    }


def layer_norm_input(d: int, seed: int) -> torch.Tensor:
    """(B, T, d) rows of varied mean and scale; row (0, 0) has sigma ~ 1e-3, where eps matters."""
    X = 2 * inputs(B, T, d, seed=seed) + 1
    X[0, 0] = 1e-3 * inputs(d, seed=seed + 1)
    return X


def read_layer_norm(module: nn.Module, d: int, seed: int = 0, where: str = "LayerNorm") -> roles.Reading:
    """The reading under which `module` is Definition 4.1 (Wrong naming its mistake otherwise); weights random."""
    readings = roles.layer_norm_readings(module, d)
    X = layer_norm_input(d, seed)
    got = output(module, X, X.shape, "X")
    X = X.double()
    return agreeing_reading(got, readings,
                            lambda r: F.layer_norm(X, (d,), r.weights["gamma"].double(), r.weights["beta"].double(), EPS),
                            lambda r: layer_norm_mistakes(X, r.weights["gamma"].double(), r.weights["beta"].double()), where)


@checker("Build step 1: LayerNorm")
def check_layer_norm_module(layer_norm, d: int | None = None) -> tuple[str, list[str]]:
    """Definition 4.1 as a module: `layer_norm` is your class (built as LayerNorm(d)) or a module of width d."""
    if isinstance(layer_norm, nn.Module):
        d = d or next((p.shape[-1] for p in layer_norm.parameters()), sizes()["d"])
    d = d or sizes()["d"]
    module = built(layer_norm, d, what=f"d={d}")
    with random_weights(module, seed=0):
        read_layer_norm(module, d)
    return (f"equals F.layer_norm (eps = {EPS:g}) with your gamma and beta set to random values, "
            f"on rows of every scale, to within the float32 tolerance."), [f"d = {d}, input {(B, T, d)}"]
