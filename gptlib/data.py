"""The course's 65-character vocabulary (that of tiny Shakespeare) and encode/decode."""

from __future__ import annotations

import torch

# sorted(set(tinyshakespeare.txt)): newline, space, 11 punctuation marks and digit 3, A-Z, a-z.
VOCABULARY = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
CHAR_TO_ID = {ch: i for i, ch in enumerate(VOCABULARY)}


def encode(text: str) -> torch.Tensor:
    """Characters -> token ids (T,), int64. Raises ValueError naming any character outside the vocabulary."""
    unknown = sorted(set(text) - CHAR_TO_ID.keys())
    if unknown:
        shown = ", ".join(repr(ch) for ch in unknown)
        raise ValueError(f"characters outside the course's 65-character vocabulary: {shown}")
    return torch.tensor([CHAR_TO_ID[ch] for ch in text], dtype=torch.long)


def decode(ids) -> str:
    """Token ids (any iterable of ints in [0, 65)) -> text."""
    ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    bad = [i for i in ids if not 0 <= i < len(VOCABULARY)]
    if bad:
        raise ValueError(f"token ids must lie in [0, {len(VOCABULARY)}), got {bad[:5]}")
    return "".join(VOCABULARY[i] for i in ids)
