"""Save and load a GPT with its config, vocabulary and training metadata.

A checkpoint is a plain dict that torch.load(weights_only=True) accepts (tensors, numbers,
strings, lists, dicts), so loading one never runs code stored in the file:

    format        CHECKPOINT_FORMAT
    config        GPTConfig fields (without the derived d_head)
    vocabulary    the characters behind token ids 0..V-1
    state_dict    the model's weights
    metadata      free-form training record (command, steps, losses, ...)
    training      optional resume state: step, optimizer state, batch generator state

Every check runs before any weight is copied, so a bad file leaves a model untouched.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import torch

from .config import GPTConfig
from .data import VOCABULARY
from .model import GPT

CHECKPOINT_FORMAT = "gptlib-checkpoint-1"
REQUIRED_KEYS = ("format", "config", "vocabulary", "state_dict", "metadata")


def config_to_dict(config: GPTConfig) -> dict:
    """The constructor arguments of a GPTConfig (d_head is derived, so it is left out)."""
    return {f.name: getattr(config, f.name) for f in fields(config) if f.init}


def save_checkpoint(path: Path | str, model: GPT, metadata: dict | None = None,
                    vocabulary: str = VOCABULARY, training: dict | None = None) -> Path:
    """Write model (weights + config), vocabulary, metadata and optional resume state to path.

    The file is written to a temporary name and renamed, so an interrupted save never
    replaces a good checkpoint with a truncated one.
    """
    if len(vocabulary) != model.config.V:
        raise ValueError(f"vocabulary has {len(vocabulary)} symbols but the model's V is {model.config.V}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "config": config_to_dict(model.config),
        "vocabulary": vocabulary,
        "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "metadata": dict(metadata or {}),
    }
    if training is not None:
        payload["training"] = training
    partial = path.with_name(path.name + ".part")
    torch.save(payload, partial)
    partial.replace(path)
    return path


def read_checkpoint(path: Path | str) -> dict:
    """Load and validate a checkpoint dict (weights_only=True); ValueError says what is wrong.

    Checks: the file unpickles safely, has the format tag and required keys, its config builds
    a valid GPTConfig, its vocabulary has V symbols, and its weights match that config's
    parameter names and shapes exactly.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint file at {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated zip, garbage bytes, disallowed pickle globals, ...
        # torch's own message suggests weights_only=False, which would run arbitrary code: not repeated here.
        raise ValueError(
            f"{path} is not a readable checkpoint (corrupted, truncated, or holding more than weights): "
            f"torch.load raised {type(error).__name__}"
        ) from error
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a gptlib checkpoint: expected format tag {CHECKPOINT_FORMAT!r}")
    missing = [k for k in REQUIRED_KEYS if k not in payload]
    if missing:
        raise ValueError(f"{path} lacks checkpoint keys {missing}")
    try:
        config = GPTConfig(**payload["config"])
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path} holds an invalid config: {error}") from error
    if len(payload["vocabulary"]) != config.V:
        raise ValueError(f"{path}: vocabulary has {len(payload['vocabulary'])} symbols, config says V={config.V}")
    check_state_dict(payload["state_dict"], GPT(config).state_dict(), source=str(path))
    payload["config"] = config
    return payload


def check_state_dict(found: dict, expected: dict, source: str) -> None:
    """ValueError unless found has exactly expected's keys, each a tensor of the same shape and dtype."""
    missing = sorted(expected.keys() - found.keys())
    unexpected = sorted(found.keys() - expected.keys())
    if missing or unexpected:
        raise ValueError(f"{source}: weights do not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for name, reference in expected.items():
        tensor = found[name]
        if not isinstance(tensor, torch.Tensor) or tensor.shape != reference.shape or tensor.dtype != reference.dtype:
            got = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise ValueError(f"{source}: weight {name} has shape {got}, the model needs {tuple(reference.shape)}")


def load_checkpoint(path: Path | str) -> tuple[GPT, dict]:
    """A fresh GPT with the checkpoint's config and weights (eval mode), and the checkpoint dict."""
    payload = read_checkpoint(path)
    model = GPT(payload["config"])
    model.load_state_dict(payload["state_dict"])
    return model.eval(), payload


def load_weights_into(model: GPT, path: Path | str) -> dict:
    """Copy a checkpoint's weights into an existing model, only if its config matches model.config.

    Everything is validated first; on any mismatch a ValueError is raised and model is unchanged.
    Returns the checkpoint dict (metadata, optional resume state).
    """
    payload = read_checkpoint(path)
    if payload["config"] != model.config:
        raise ValueError(f"{path}: checkpoint config {payload['config']} differs from the model's {model.config}")
    check_state_dict(payload["state_dict"], model.state_dict(), source=str(path))
    model.load_state_dict(payload["state_dict"])
    return payload
