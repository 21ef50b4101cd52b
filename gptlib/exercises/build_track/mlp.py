"""Build step 4, Definition 2.1: the MLP with the exact GELU."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...analysis import positionwise
from ...checking import roles
from ...checking.components import B, T, agreeing_reading, built, inputs, loaded, output, random_weights, sizes
from ...checking.mistakes import Mistake
from ...checking.running import checker
from ...config import GPTConfig
from ...model import MLP as ReferenceMLP


def tanh_gap() -> float:
    """max over t of |exact GELU - tanh GELU|, on a fine grid in float64."""
    t = torch.linspace(-8, 8, 160001, dtype=torch.float64)
    return (positionwise.gelu_exact(t) - positionwise.gelu_tanh(t)).abs().max().item()


def read_mlp(module: nn.Module, d: int, d_ff: int, seed: int = 0, where: str = "MLP") -> roles.Reading:
    readings = roles.mlp_readings(module, d, d_ff)
    X = 2 * inputs(B, T, d, seed=seed)  # pre-activations of order 1-3, where the tanh form differs most
    got = output(module, X, (B, T, d), "X")
    X = X.double()

    def reference(r):
        return loaded(ReferenceMLP(GPTConfig(d=d, H=1, d_ff=d_ff)).double(), r.weights)(X)

    def mistakes(r):
        w = {k: v.double() for k, v in r.weights.items()}

        def through(activation):
            return lambda: activation(F.linear(X, w["W_1"], w["b_1"])) @ w["W_2"].T + w["b_2"]

        return {
            Mistake("mlp-gelu-tanh",
                f"you used the tanh approximation of GELU (GPT-2's): Definition 2.1 uses the exact t Phi(t); the two differ "
            f"by up to {tanh_gap():.1e} per unit, too much at float32 precision"): through(positionwise.gelu_tanh),
            Mistake("mlp-relu", "you used ReLU: Definition 2.1's nonlinearity is GELU, t Phi(t)"): through(torch.relu),
            Mistake("mlp-no-nonlinearity", "there is no nonlinearity between W_1 and W_2"): through(lambda t: t),
            Mistake("mlp-sigmoid-gelu",
                "you used the sigmoid-based approximation t sigmoid(1.702 t) (SiLU-like): Definition 2.1 uses t Phi(t)"):
                through(lambda t: t * torch.sigmoid(1.702 * t)),
        }

    return agreeing_reading(got, readings, reference, mistakes, where)


@checker("Build step 4: the MLP")
def check_mlp(mlp, d: int | None = None, d_ff: int | None = None) -> tuple[str, list[str]]:
    """Definition 2.1: `mlp` is your class (built as MLP(d, d_ff)) or a module; X (B, T, d) -> (B, T, d)."""
    if isinstance(mlp, nn.Module):
        vectors = sorted({p.shape[0] for p in mlp.parameters() if p.dim() == 1})
        d, d_ff = d or vectors[0], d_ff or vectors[-1]
    else:
        d, d_ff = d or sizes()["d"], d_ff or sizes()["d_ff"]
    module = built(mlp, d, d_ff, what=f"d={d}, d_ff={d_ff}")
    with random_weights(module, seed=0):
        read_mlp(module, d, d_ff)
    return ("equals W_2 GELU(W_1 u + b_1) + b_2 with the exact GELU, your weights set to random values, to within "
            "the float32 tolerance."), [f"d = {d}, d_ff = {d_ff}, input {(B, T, d)}"]
