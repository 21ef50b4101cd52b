"""Build step 7, Project aside 5.2: the initialization, judged by the standard deviation of each group of
tensors it sets."""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from ...checking import roles
from ...checking.components import built
from ...checking.mistakes import Mistake, close, name_mistake
from ...checking.running import Wrong, call, checker
from ...checking.variants import variant_choice, variant_seed
from .attention import heads_of
from .block import block_parts
from .gpt import gpt_parts

INIT_SIZES = {"V": 65, "T_max": 64, "d": 64, "H": 4, "L": 3, "d_ff": 256}  # enough entries for a std to 2%
STD = 0.02
STD_RTOL = 0.1  # a measured std within 10% of the expected one (its sampling error here is at most 2%)


def init_sizes() -> dict[str, int]:
    """INIT_SIZES; in a hidden variant (variants.variant_choice) other sizes with as many entries or more per group
    (d >= 32, so that W_O alone still measures its std to about 2%), all different as components.sizes says."""
    return dict(variant_choice(INIT_SIZES, _other_init_sizes))


def _other_init_sizes(rng) -> list[tuple[str, int]]:
    while True:
        H, d_head = rng.choice((2, 4)), rng.choice((16, 20, 24))
        d = H * d_head
        drawn = {"V": rng.randint(50, 90), "T_max": rng.randint(40, 70), "d": d, "H": H, "L": rng.choice((2, 3, 4)),
                 "d_ff": 4 * d}
        if len({*drawn.values(), d_head, 3 * d_head, 3 * d}) == len(drawn) + 3:
            return list(drawn.items())


def init_groups(module: nn.Module, sizes: dict) -> dict[str, list[torch.Tensor]]:
    """The learner's initialised tensors grouped by what Project aside 5.2 does to them. Roles are read by
    shape, name and order only (roles' first reading): a standard deviation does not depend on a
    matrix's orientation, nor on which of W_Q, W_K, W_V is which."""
    V, T_max, d, H, L, d_ff = (sizes[k] for k in ("V", "T_max", "d", "H", "L", "d_ff"))
    parts = gpt_parts(module, V, T_max, d, L)
    groups = {"W_O, W_2": [], "other matrices": [parts["E"][0], parts["P"][0]], "gains": [], "biases": []}
    if parts["W_U"] is not None:
        groups["other matrices"].append(parts["W_U"][0])
    for block in [*parts["blocks"], None]:
        if block is None:
            norms = [parts["ln_f"]]
        else:
            found = block_parts(block, d, d_ff)
            norms = found["ln"]
            attention = roles.attention_readings(found["attn"][0][1], d, heads_of(found["attn"][0][1], H))[0].weights
            mlp = roles.mlp_readings(found["mlp"][0][1], d, d_ff)[0].weights
            groups["W_O, W_2"] += [attention["W_O"], mlp["W_2"]]
            groups["other matrices"] += [attention[k] for k in ("W_Q", "W_K", "W_V")] + [mlp["W_1"]]
            groups["biases"] += [attention["b_O"], mlp["b_1"], mlp["b_2"]]
        for _, norm in norms:
            gamma_beta = roles.layer_norm_readings(norm, d)[0].weights
            groups["gains"].append(gamma_beta["gamma"])
            groups["biases"].append(gamma_beta["beta"])
    return groups


def pooled_std(tensors: list[torch.Tensor]) -> float:
    return torch.cat([t.detach().reshape(-1).double() for t in tensors]).std().item()


@checker("Build step 7: the initialization")
def check_init(init_weights, gpt) -> tuple[str, list[str]]:
    """Project aside 5.2: init_weights(model) initialises your GPT (class `gpt`, built at INIT_SIZES) in place:
    weight matrices, E and P ~ N(0, 0.02^2), W_O and W_2 ~ N(0, (0.02 / sqrt(2L))^2), gains 1, biases 0."""
    torch.manual_seed(variant_seed(0))
    sizes = init_sizes()
    module = built(gpt, *sizes.values(), what=", ".join(f"{k}={v}" for k, v in sizes.items()))
    returned = call(init_weights, module, what="model", in_place=True)
    module = returned if isinstance(returned, nn.Module) else module
    L = sizes["L"]
    groups = init_groups(module, sizes)
    residual = pooled_std(groups["W_O, W_2"])
    others = pooled_std(groups["other matrices"])
    details = [f"L = {L}: expected std {STD} for E, P, W_Q, W_K, W_V, W_1, W_U and {STD / math.sqrt(2 * L):.4f} "
               f"for W_O, W_2; measured {others:.4f} and {residual:.4f}"]
    gains = torch.cat([g.detach().reshape(-1) for g in groups["gains"]])
    biases = torch.cat([b.detach().reshape(-1) for b in groups["biases"]])
    if not torch.equal(gains, torch.ones_like(gains)):
        raise Wrong("the LayerNorm gains gamma are not all 1: a LayerNorm starts as the plain normalization.", details,
                    mistake="init-gains-not-one")
    if biases.abs().max().item() != 0:
        raise Wrong("the biases (b_O, b_1, b_2, beta) are not all 0.", details, mistake="init-biases-not-zero")

    near = functools.partial(close, rtol=STD_RTOL)  # near(measured std, expected std)
    scaled = STD / math.sqrt(2 * L)
    if not near(others, STD):
        if near(others, scaled):
            raise Wrong("every matrix is scaled by 1/sqrt(2L): only the branches' output projections W_O and W_2 are.", details,
                        mistake="init-every-matrix-scaled")
        raise Wrong(f"E, P, W_Q, W_K, W_V, W_1, W_U should have std {STD} (Project aside 5.2).", details,
                    mistake="init-matrix-std")
    typical = {
        Mistake("init-not-scaled",
            "the init is not scaled: W_O and W_2 have std 0.02 like every other matrix; Project aside 5.2 divides it by "
        "sqrt(2L), one factor for each of the 2L writes into the residual stream"): lambda: STD,
        Mistake("init-sqrt-l",
            "W_O and W_2 are scaled by 1/sqrt(L): there are 2L residual writes (two per block), so 1/sqrt(2L)"):
            lambda: STD / math.sqrt(L),
        Mistake("init-divided-by-2l",
            "W_O and W_2 are divided by 2L: the factor is 1/sqrt(2L) (variances add over the 2L writes)"): lambda: STD / (2 * L),
    }
    if not near(residual, scaled):
        W_O, W_2 = (pooled_std(groups["W_O, W_2"][i::2]) for i in (0, 1))
        if near(W_O, scaled) != near(W_2, scaled):
            right, other = ("W_O", "W_2") if near(W_O, scaled) else ("W_2", "W_O")
            raise Wrong(f"only {right} is scaled by 1/sqrt(2L): {other} writes into the residual stream too.", details,
                        mistake="init-one-branch-scaled")
        named = name_mistake({(): residual}, typical, near)  # the point (): each std takes no arguments
        raise Wrong((named or f"W_O and W_2 should have std 0.02 / sqrt(2L) = {scaled:.4f}") + ".", details, mistake=None)
    return "matrices std 0.02, W_O and W_2 std 0.02 / sqrt(2L), gains 1, biases 0 (Project aside 5.2).", details
