"""gptlib against independent implementations: Hugging Face's GPT-2 (and the benchmark's nanoGPT-style
reference) with gptlib's weights copied in.

GPT-2 is Definition 3.1's pre-norm block with exact GELU once dropout is off, the QKV bias is
zero and W_U is untied; so with the same weights both must produce the same logits (Section 5)
and the same gradients. The models are benchmarks.peers.scrambled_model: sharp heads and
perturbed gains and biases, so that a mis-copied parameter shows in the logits.
"""

import pytest
import torch
import torch.nn.functional as F

from benchmarks.nanogpt import nanogpt_from
from benchmarks.peers import max_logit_difference, scrambled_model
from gptlib import COURSE_CONFIG, GPTConfig, run_with_cache
from gptlib.export import check_mappable, stacked_heads, to_huggingface, to_transformer_lens

pytestmark = pytest.mark.slow  # starts processes or trains: `pytest -m slow` (not in `pytest -m unit`)

TOLERANCE = 1e-5  # float32 logits of order 1
CONFIGS = {
    "course": COURSE_CONFIG,
    "second": GPTConfig(V=97, T_max=128, d=96, H=6, L=3, d_ff=200, ln_eps=1e-6),
    "tied": GPTConfig(V=50, T_max=32, d=64, H=2, L=2, tie_weights=True),
}


def random_tokens(config: GPTConfig, B: int = 3) -> torch.Tensor:
    return torch.randint(0, config.V, (B, config.T_max))  # (B, T) at the longest T


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_gpt2_with_copied_weights_gives_the_same_logits(name, attn_implementation):
    model = scrambled_model(CONFIGS[name])
    hf = to_huggingface(model, attn_implementation)
    assert max_logit_difference(model, hf, random_tokens(model.config)) <= TOLERANCE


def test_gpt2_gives_the_same_gradients():
    model = scrambled_model(COURSE_CONFIG).train()
    hf = to_huggingface(model).train()
    idx, targets = random_tokens(model.config), random_tokens(model.config)
    model(idx, targets)[1].backward()
    logits = hf(idx, use_cache=False).logits  # (B, T, V)
    F.cross_entropy(logits.reshape(-1, model.config.V), targets.reshape(-1)).backward()
    pairs = {
        "E": (model.E.grad, hf.transformer.wte.weight.grad),
        "W_O of block 0": (model.blocks[0].attn.W_O.grad, hf.transformer.h[0].attn.c_proj.weight.grad),
        "W_1 of block 3": (model.blocks[3].mlp.W_1.grad.T, hf.transformer.h[3].mlp.c_fc.weight.grad),
        "gamma of LN_f": (model.ln_f.gamma.grad, hf.transformer.ln_f.weight.grad),
    }
    for name, (ours, theirs) in pairs.items():
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-4, msg=lambda m: f"{name}: {m}")


def miscopy_W_O_untransposed(model, hf):  # forgets that Conv1D stores (in, out); W_O is square, so no shape error
    hf.transformer.h[0].attn.c_proj.weight.copy_(model.blocks[0].attn.W_O.T)


def miscopy_Q_K_swapped(model, hf):  # puts W_K where W_Q belongs and back
    d = model.config.d
    W = hf.transformer.h[1].attn.c_attn.weight  # (d, 3d) = [W_Q | W_K | W_V]
    W.copy_(torch.cat((W[:, d : 2 * d], W[:, :d], W[:, 2 * d :]), dim=1))


def miscopy_LN_shift_dropped(model, hf):  # leaves LN_2's beta at GPT-2's initial zeros
    hf.transformer.h[2].ln_2.bias.zero_()


@pytest.mark.parametrize("miscopy", [miscopy_W_O_untransposed, miscopy_Q_K_swapped, miscopy_LN_shift_dropped])
def test_a_wrong_copy_is_caught(miscopy):
    model = scrambled_model(COURSE_CONFIG)
    hf = to_huggingface(model)
    with torch.no_grad():
        miscopy(model, hf)
    assert max_logit_difference(model, hf, random_tokens(model.config)) > 1000 * TOLERANCE


@pytest.mark.parametrize("name", ["course", "second"])
def test_hooked_transformer_with_copied_weights_gives_the_same_logits(name):
    pytest.importorskip("transformer_lens", reason="TransformerLens comes with the bench extra (make bench)")
    model = scrambled_model(CONFIGS[name])
    tl = to_transformer_lens(model)
    assert max_logit_difference(model, tl, random_tokens(model.config)) <= TOLERANCE


@pytest.mark.parametrize(
    "change, rule",
    [({"norm": "post"}, "pre-norm"), ({"causal": False}, "causal"), ({"attn_only": True}, "MLP")],
)
def test_configs_gpt2_cannot_express_are_refused(change, rule):
    with pytest.raises(ValueError, match=rule):
        check_mappable(COURSE_CONFIG.replace(**change))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_nanogpt_reference_with_copied_weights_gives_the_same_logits_and_attention(name):
    model = scrambled_model(CONFIGS[name])
    ref = nanogpt_from(model)
    idx = random_tokens(model.config)
    assert max_logit_difference(model, ref, idx) <= TOLERANCE
    kept = []
    with torch.no_grad():
        ref(idx, keep=kept)  # its manual attention path
        _, cache = run_with_cache(model, idx)
    for l, A in enumerate(kept):
        torch.testing.assert_close(A, cache.A(l), atol=1e-6, rtol=1e-5)


def test_nanogpt_reference_gives_the_same_gradients():
    model = scrambled_model(COURSE_CONFIG).train()
    ref = nanogpt_from(model).train()
    idx, targets = random_tokens(model.config), random_tokens(model.config)
    model(idx, targets)[1].backward()
    ref(idx, targets)[1].backward()
    d = model.config.d
    pairs = {
        "W_Q of block 1": (stacked_heads(model.blocks[1].attn.W_Q.grad), ref.h[1].c_attn.weight.grad[:d].T),
        "W_O of block 0": (model.blocks[0].attn.W_O.grad, ref.h[0].c_proj.weight.grad.T),
        "P": (model.P.grad, ref.wpe.weight.grad),
    }
    for name, (ours, theirs) in pairs.items():
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-4, msg=lambda m: f"{name}: {m}")
