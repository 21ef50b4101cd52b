"""gptlib.viz.page_weights: the weights file a page reads, checked by an independent reader written here
(struct, json, numpy), and what it refuses. The page's own reader is tested in tests/browser/test_page_model.py."""

import json
import struct

import numpy as np
import pytest
import torch

from gptlib import GPT, GPTConfig
from gptlib.checkpoint import config_to_dict
from gptlib.data import VOCABULARY, encode
from gptlib.pretrained import load_pretrained
from gptlib.viz.page_weights import page_weights


def read(data: bytes) -> tuple[dict, dict[str, np.ndarray], int]:
    """The header, every tensor by name, and where the data starts, read by the layout's own rules."""
    assert data[:4] == b"GPTW"
    (n,) = struct.unpack("<I", data[4:8])
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    start = -(-(8 + n) // 4) * 4
    assert data[8 + n : start] == b"\0" * (start - 8 - n)
    tensors = {}
    for entry in header["tensors"]:
        count = int(np.prod(entry["shape"]))
        values = np.frombuffer(data, dtype="<f4", count=count, offset=start + entry["offset"])
        tensors[entry["name"]] = values.reshape(entry["shape"])
    return header, tensors, start


@pytest.mark.parametrize("config", [GPTConfig(V=11, T_max=9, d=15, H=3, L=2, tie_weights=True),
                                    GPTConfig(V=65, T_max=8, d=8, H=1, L=1, attn_only=True),
                                    GPTConfig(V=13, T_max=10, d=12, H=2, L=2, d_ff=20, norm="post", ln_eps=1e-3,
                                              causal=False)])
def test_the_file_holds_every_weight_of_the_state_dict_in_order_and_nothing_else(config, with_random_weights):
    model = with_random_weights(GPT(config), std=0.5)
    data = page_weights(model)
    header, tensors, start = read(data)
    state = model.state_dict()
    assert header["format"] == 1 and header["config"] == config_to_dict(config)
    assert header["vocabulary"] == VOCABULARY[: config.V] and header["course_vocabulary"] == VOCABULARY
    assert [entry["name"] for entry in header["tensors"]] == list(state)
    offset = 0
    for entry in header["tensors"]:  # each weight right after the one before it
        assert entry["offset"] == offset
        offset += 4 * int(np.prod(entry["shape"]))
    assert start % 4 == 0 and len(data) == start + offset
    for name, tensor in state.items():
        assert np.array_equal(tensors[name], tensor.numpy()), name


def test_the_shipped_models_files_are_their_checkpoints_weights():
    for name in ("shakespeare", "induction"):
        model = load_pretrained(name)
        header, tensors, _ = read(page_weights(model))
        assert header["config"] == config_to_dict(model.config)
        assert all(np.array_equal(tensors[k], v.numpy()) for k, v in model.state_dict().items())


def test_float32_is_needed_a_half_precision_copy_breaks_the_pages_tolerance():
    """The docstring's measurement: weights rounded to float16 (or bfloat16) move the course model's logits by
    more than the 1e-5 (1 + max |logit|) the page is held to."""
    model = load_pretrained("shakespeare")
    idx = encode("First Citizen:\nBefore we proceed any further, hear me speak.")
    with torch.no_grad():
        Z = model(idx)
        for dtype, at_least in ((torch.float16, 1e-4), (torch.bfloat16, 1e-3)):
            rounded = GPT(model.config).eval()
            rounded.load_state_dict({k: v.to(dtype).float() for k, v in model.state_dict().items()})
            gap = ((rounded(idx) - Z).abs().max() / (1 + Z.abs().max())).item()
            assert gap > at_least > 1e-5, (dtype, gap)


def test_what_the_page_could_not_read_is_refused_with_a_sentence(with_random_weights):
    with pytest.raises(ValueError, match="model must be a gptlib GPT, got Linear"):
        page_weights(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="V = 70 has ids with no character"):
        page_weights(GPT(GPTConfig(V=70, T_max=4, d=8, H=2, L=1)))
    with pytest.raises(ValueError, match=r"weight E is torch.float64 \(call model.float\(\)\)"):
        page_weights(GPT(GPTConfig(V=5, T_max=4, d=8, H=2, L=1)).double())
    broken = GPT(GPTConfig(V=5, T_max=4, d=8, H=2, L=1))
    with torch.no_grad():
        broken.blocks[0].mlp.W_2[1, 3] = float("nan")
    with pytest.raises(ValueError, match=r"blocks\.0\.mlp\.W_2"):
        page_weights(broken)
