"""A learner's own GPT as gptlib's `GPT`, so that every explorer and reading of the companion takes it.

    mine = gptlib.adopt(my_gpt, GPTConfig(V=65, T_max=64, d=128, H=4, L=4))

The learner's model is read by what it computes, with the build checkers' machinery
(checking/roles.py reads the tensors by shape, by name where a name says, otherwise
every reading the shapes allow; gpt.read_gpt keeps the reading under which the model computes
Section 5's logits, judging each block and LN_f on its own first, so a mistake is named where
it is). Every layout the checkers accept is adopted: separate, fused or stacked Q|K|V, per-head
modules or one matrix, E and P either way round, LayerNorms in attributes or lists, tied or not,
any names. The adoption is then proven: the adopted GPT's logits equal the learner's own on
random token ids at two batch shapes within the checkers' tolerance (checking.TOL), or adopt
refuses. A model that is not the lecture's GPT (post-norm, no biases, another activation,
another head split) is refused with what differs named. The learner's model is never changed:
all the reading is done on a copy.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from . import validation
from .checking import TOL, LearnerRaised, NotAttempted, Wrong, global_state_kept, same
from .checking.components import output, random_weights
from .config import GPTConfig
from .exercises.build_track.gpt import read_gpt
from .model import GPT

PROOF_SHAPES = ((1, None), (3, 5))  # (B, T) of the proof's random ids; None: T_max (T is capped at T_max)


def adopt(model: nn.Module, config: GPTConfig, seed: int = 0) -> GPT:
    """gptlib's GPT(config) holding the weights of `model`, a learner's GPT computing Section 5's
    logits (ids (B, T) -> logits (B, T, V)). ValueError naming the rule or component otherwise."""
    _check_arguments(model, config)
    learner = copy.deepcopy(model).eval()  # everything below runs on copies: the learner's model stays as it is
    sizes = {k: getattr(config, k) for k in ("V", "T_max", "d", "H", "L", "d_ff")}
    try:
        with global_state_kept(), torch.no_grad():
            torch.set_default_dtype(torch.float32)
            found = _read(copy.deepcopy(learner), sizes, seed)
            if (found["W_U"] is None) != config.tie_weights:
                raise Wrong(f"config.tie_weights={config.tie_weights}, but your model "
                            f"{'ties W_U to E' if found['W_U'] is None else 'has its own W_U'}: give a config that says so",
                            mistake="adopt-tying-differs")
            adopted = GPT(config)
            adopted.load_state_dict(found["weights"])
            _prove(adopted.eval(), learner, found["extra"], seed)
    except Wrong as wrong:
        raise ValueError(f"cannot adopt your model as the lecture's GPT ({_sizes(sizes)}): {wrong.message}") from None
    except LearnerRaised as raised:
        raise ValueError(f"cannot adopt your model: {raised.what} raised {type(raised.error).__name__}: "
                         f"{raised.error} (adopt runs it on token ids (B, T) and expects logits (B, T, V))") from None
    except NotAttempted as stub:
        raise ValueError(f"cannot adopt your model: {stub.message}") from None
    return adopted


def _read(probe: nn.Module, sizes: dict, seed: int) -> dict:
    """The learner's weights in gptlib's layout: read_gpt's parts, with "weights" a state dict of gptlib's GPT.

    The reading is chosen as the build checkers choose it, on seeded random weights (on the learner's own,
    near-uniform at init, a wrong reading such as W_Q and W_K swapped can agree by accident, and a tanh GELU
    hide under small pre-activations). Every reading only rearranges entries, so with the random values
    made distinct, each entry of the chosen reference is found among the random ones, and the learner's
    own entry at that place is taken."""
    own = torch.cat([p.detach().reshape(-1) for p in probe.parameters()])
    with random_weights(probe, seed=seed):
        values, order = _distinct(list(probe.parameters()))
        parts = read_gpt(probe, **sizes, seed=seed)
    weights = {}
    for name, reference in parts["reference"].state_dict().items():
        R = reference.reshape(-1).float()  # float32 entries in float64: exact both ways
        at = torch.searchsorted(values, R).clamp(max=len(values) - 1)
        if not torch.equal(values[at], R):
            raise Wrong(f"{name} is not one of your model's entries rearranged (gptlib's GPT holds them as they are)",
                        mistake="adopt-entry-not-rearranged")
        weights[name] = own[order[at]].reshape(reference.shape)
    return parts | {"weights": weights}


def _distinct(params: list[nn.Parameter]) -> tuple[torch.Tensor, torch.Tensor]:
    """Make the entries of all `params` pairwise different (a repeated value moves up by one ulp); all of them,
    flat, sorted, and where each sorted entry is in the flat order."""
    while True:
        flat = torch.cat([p.reshape(-1) for p in params])
        values, order = flat.sort()
        repeated = order[1:][values[1:] == values[:-1]]
        if not len(repeated):
            return values, order
        flat[repeated] = torch.nextafter(flat[repeated], torch.tensor(float("inf")))
        for p, part in zip(params, flat.split([p.numel() for p in params])):
            p.copy_(part.reshape(p.shape))


def _sizes(sizes: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def _check_arguments(model, config) -> None:
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    if config.norm != "pre" or config.attn_only or not config.causal:
        raise ValueError("config must describe the lecture's GPT (norm='pre', attn_only=False, causal=True): adopt "
                         f"reads models computing Section 5, got norm={config.norm!r}, attn_only={config.attn_only}, "
                         f"causal={config.causal}")
    if not isinstance(model, nn.Module):
        what = "a class: build your model first" if isinstance(model, type) else type(model).__name__
        raise TypeError(f"model must be an nn.Module (your GPT, built), got {what}")
    params = list(model.named_parameters())
    odd = [n for n, p in params if p.dtype != torch.float32 or p.device.type != "cpu"]
    if odd:
        p = dict(params)[odd[0]]
        raise ValueError(f"model's parameters must be float32 on the CPU (the course's); {odd[0]} is {p.dtype} on "
                         f"{p.device}: adopt a CPU float32 copy, adopt(copy.deepcopy(model).float().cpu(), config)")
    validation.finite_weights(model)  # names the first NaN or inf weight
    if not any(config.V in p.shape for _, p in params if p.dim() == 2):
        sides = sorted({s for _, p in params if p.dim() == 2 for s in p.shape})
        raise ValueError(f"config.V={config.V} is not your model's vocabulary size: no matrix of it has a side of "
                         f"{config.V} (E is V x d); its matrices' sides are {sides}")


def _prove(adopted: GPT, learner: nn.Module, extra: list[str], seed: int) -> None:
    """The adopted GPT's logits equal the learner's own (TOL x (1 + max |logit|)) at each of PROOF_SHAPES."""
    config = adopted.config
    generator = torch.Generator().manual_seed(seed)
    for B, T in PROOF_SHAPES:
        T = config.T_max if T is None else min(T, config.T_max)
        idx = torch.randint(0, config.V, (B, T), generator=generator)
        theirs = output(learner, idx, (B, T, config.V), "idx")
        ours = adopted(idx).double()
        if not same(ours, theirs):
            gap = (ours - theirs).abs().max().item()
            why = (f"; your model has terms the lecture's GPT has no place for, not all zero: {', '.join(extra)}"
                   if extra else "")
            raise Wrong(f"the adopted GPT's logits differ from yours by up to {gap:.2g} on ids of shape {(B, T)}, "
                        f"more than the tolerance {TOL:g} x (1 + max |logit|){why}", mistake="adopt-logits-differ")
