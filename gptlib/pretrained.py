"""The checkpoints shipped inside the package, loaded by name.

    model = load_pretrained("shakespeare")   # the course GPT (Section 5 sizes) trained on tiny Shakespeare
    model = load_pretrained("induction")     # two-layer attention-only GPT with an induction head

Each file in gptlib/checkpoints/ was written by the command in PRETRAINED[name] (also stored
in the checkpoint's metadata["command"]); read the metadata with `load_metadata(name)`.
"""

from __future__ import annotations

from pathlib import Path

from .checkpoint import load_checkpoint
from .model import GPT

CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"

PRETRAINED = {
    "shakespeare": "make train-shakespeare",
    "induction": "make train-induction",
}
"""Shipped name -> the command (run from the repository root) that produces gptlib/checkpoints/<name>.pt."""


def checkpoint_path(name: str) -> Path:
    """Where the named checkpoint lives; ValueError for a name that is not one of PRETRAINED."""
    if not isinstance(name, str) or name not in PRETRAINED:
        raise ValueError(f"unknown pretrained model {name!r}; the names are {sorted(PRETRAINED)}")
    return CHECKPOINT_DIR / f"{name}.pt"


def available() -> list[str]:
    """Names whose checkpoint file is present in this installation."""
    return [name for name in sorted(PRETRAINED) if (CHECKPOINT_DIR / f"{name}.pt").is_file()]


def _load(name: str):
    path = checkpoint_path(name)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} is not shipped here; produce it with `{PRETRAINED[name]}`")
    return load_checkpoint(path)


def load_pretrained(name: str) -> GPT:
    """The named shipped GPT, in eval mode, with the config stored in its checkpoint."""
    model, _ = _load(name)
    return model


def load_metadata(name: str) -> dict:
    """The named checkpoint's training record: command, steps, tokens, wall time, losses, history."""
    _, payload = _load(name)
    return payload["metadata"]
