"""A GPT's weights as one binary file that a page reads without a kernel (js/gpt.js's readWeights).

    page_weights(model) -> bytes

The layout, every number little-endian:

    bytes 0-3    the ASCII magic b"GPTW"
    bytes 4-7    n, a uint32: the length of the header that follows
    8 .. 8+n     the header, UTF-8 JSON:
                   format             PAGE_WEIGHTS_FORMAT
                   config             every GPTConfig field (checkpoint.config_to_dict)
                   vocabulary         the model's characters in id order: the course's first V
                   course_vocabulary  the characters gptlib's encode reads: the page refuses the
                                      others with the kernel's own sentences
                   tensors            [{name, shape, offset}] in model.state_dict() order and names;
                                      offset in bytes from the start of the data, each weight
                                      right after the one before it
    zero bytes to the next multiple of 4, then the data: each tensor's float32 values, row-major.

Float32 because nothing smaller keeps the page's forward pass within the tolerance its tests hold
it to (logits within 1e-5 (1 + max |logit|) of torch's): rounding the course model's weights to
float16 moves its logits by 4e-4 of that scale, bfloat16 by 4e-3 (tests/viz/test_page_weights.py).
The file is the weights' 4 bytes each, and a header of a few kilobytes.

What it refuses, with a ValueError naming the rule: a model that is not a gptlib GPT, one with a
NaN or inf weight (named), one whose weights are not float32, and one with V beyond the course's
65 characters (the page could not name its predictions).
"""

from __future__ import annotations

import json
import struct

import torch

from .. import validation
from ..checkpoint import config_to_dict
from ..data import VOCABULARY
from ..model import GPT

MAGIC = b"GPTW"
PAGE_WEIGHTS_FORMAT = 1


def page_weights(model: GPT) -> bytes:
    """The weights file of `model` that js/gpt.js's readWeights reads (the layout in the module's docstring)."""
    if not isinstance(model, GPT):
        raise ValueError(f"model must be a gptlib GPT, got {type(model).__name__}")
    V = model.config.V
    if V > len(VOCABULARY):
        raise ValueError(f"the page names a model's tokens by the course's {len(VOCABULARY)} characters: "
                         f"V = {V} has ids with no character")
    validation.finite_weights(model)
    state = model.state_dict()  # name -> tensor, in the order the file keeps
    for name, tensor in state.items():
        if tensor.dtype != torch.float32:
            raise ValueError(f"the page reads float32 weights; weight {name} is {tensor.dtype} (call model.float())")
    tensors, offset = [], 0
    for name, tensor in state.items():
        tensors.append({"name": name, "shape": list(tensor.shape), "offset": offset})
        offset += 4 * tensor.numel()
    header = json.dumps({"format": PAGE_WEIGHTS_FORMAT, "config": config_to_dict(model.config),
                         "vocabulary": VOCABULARY[:V], "course_vocabulary": VOCABULARY,
                         "tensors": tensors}, ensure_ascii=False).encode("utf-8")
    start = MAGIC + struct.pack("<I", len(header)) + header
    padding = b"\0" * (-len(start) % 4)
    data = b"".join(tensor.detach().cpu().contiguous().numpy().astype("<f4", copy=False).tobytes()
                    for tensor in state.values())
    return start + padding + data
