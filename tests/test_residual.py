"""gptlib.residual (Remarks 3.2-3.4, Empirical aside 3.5, Project aside 5.2) against direct formulas
and a model built without the dropped block."""

import math

import pytest
import torch

from gptlib import COURSE_CONFIG, GPT, encode, residual, run_with_cache
from gptlib.residual import initial_loss_gap, residual_write_variance


def test_stream_measurements_against_direct_formulas(sharp_model):
    model, _ = sharp_model("pre")
    idx = encode("To be or").unsqueeze(0)
    with torch.no_grad():
        _, cache = run_with_cache(model, idx)
    X3 = cache.X(3)[0]
    torch.testing.assert_close(residual.stream_norms(cache)[3], X3.norm(dim=1).mean())
    cos = (X3 * cache.X(0)[0]).sum(1) / (X3.norm(dim=1) * cache.X(0)[0].norm(dim=1))
    torch.testing.assert_close(residual.cosine_to_initial(cache)[3], cos.mean())
    ratios = residual.branch_write_ratios(cache)
    torch.testing.assert_close(ratios["mlp"][1], (cache.mlp_write(1)[0].norm(dim=1) / cache.Y(1)[0].norm(dim=1)).mean())


def test_injected_direction_is_read_back_exactly_at_its_own_layer(sharp_model):
    model, _ = sharp_model("pre")
    idx = encode("To be or").unsqueeze(0)
    w = torch.randn(model.config.d, dtype=torch.float64)
    with torch.no_grad():
        readout = residual.injected_direction_readout(model, idx, w, after_block=0)
    assert readout.shape == (model.config.L,)
    torch.testing.assert_close(readout[0], torch.tensor(1.0, dtype=torch.float64))
    with pytest.raises(ValueError, match="after_block"):
        residual.injected_direction_readout(model, idx, w, after_block=model.config.L)


def test_block_drop_losses_match_a_model_built_without_that_block(sharp_model):
    model, _ = sharp_model("pre")
    tokens = encode("To be, or not")
    idx, targets = tokens[:-1], tokens[1:]
    result = residual.block_drop_losses(model, idx, targets)
    shorter = GPT(model.config.replace(L=model.config.L - 1)).double().eval()
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("blocks.1.")}
    state = {k.replace("blocks.2.", "blocks.1."): v for k, v in state.items()}
    shorter.load_state_dict(state)
    with torch.no_grad():
        _, expected = shorter(idx, targets)
    torch.testing.assert_close(result["dropped"][1], expected)
    assert isinstance(model.blocks[1], type(model.blocks[0]))  # the model is restored


def test_scaling_keeps_accumulated_variance_flat_and_unscaled_grows():
    scaled = [residual_write_variance(L, scaled=True, B=2) for L in (1, 8)]
    unscaled = [residual_write_variance(L, scaled=False, B=2) for L in (1, 8)]
    assert scaled[1]["accumulated"] / scaled[0]["accumulated"] < 1.5
    assert unscaled[1]["accumulated"] / unscaled[0]["accumulated"] > 4  # 2L grows by 8
    # L = 1 has two writes: scaling by 1/sqrt(2) halves the variance (same seed, same idea)
    assert scaled[0]["accumulated"] == pytest.approx(unscaled[0]["accumulated"] / 2, rel=0.2)
    for run in scaled + unscaled:
        assert run["independent"] == pytest.approx(run["accumulated"], rel=0.3)


def test_initial_loss_is_near_ln_V():
    loss, ln_V = initial_loss_gap(COURSE_CONFIG, B=2)
    assert ln_V == math.log(65)
    assert abs(loss - ln_V) < 0.1
