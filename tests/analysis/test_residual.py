"""gptlib.analysis.residual (Remarks 3.2-3.4, Empirical aside 3.5, Project aside 5.2) against direct formulas
and a model built without the dropped block."""

import math
import re

import pytest
import torch

from gptlib import COURSE_CONFIG, GPT, encode, run_with_cache
from gptlib.analysis import residual
from gptlib.analysis.residual import initial_loss_gap, residual_write_variance


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
    torch.testing.assert_close(ratios.mlp[1], (cache.mlp_write(1)[0].norm(dim=1) / cache.Y(1)[0].norm(dim=1)).mean())


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


@pytest.mark.parametrize("directions, after_block, words", [
    (None, -1, r"^after_block must be an integer in \[0, 2\], got -1$"),  # was read as the last block
    (None, 0.0, r"^after_block must be an integer in \[0, 2\], got 0.0$"),
    ([1.0] * 8, 0, r"^directions must be a floating-point torch.Tensor \(d,\) or \(n, d\), got list$"),
])
def test_injected_direction_readout_refuses_a_block_or_directions_it_cannot_read(sharp_model, directions, after_block, words):
    model, _ = sharp_model("pre")
    assert model.config.L == 3
    w = torch.randn(model.config.d) if directions is None else directions
    with pytest.raises(ValueError, match=words):
        residual.injected_direction_readout(model, encode("To be or").unsqueeze(0), w, after_block=after_block)


def test_injected_directions_in_one_batch_read_back_as_each_alone(sharp_model):
    model, _ = sharp_model("pre")
    idx = torch.stack([encode("To be or"), encode("not to b")])  # (2, T)
    W = torch.randn(3, model.config.d, dtype=torch.float64)
    with torch.no_grad():
        together = residual.injected_direction_readout(model, idx, W, after_block=1)
        alone = torch.stack([residual.injected_direction_readout(model, idx, w, after_block=1) for w in W])
    assert together.shape == (3, model.config.L - 1)
    torch.testing.assert_close(together, alone)
    with pytest.raises(ValueError, match=r"directions must be one w \(d,\) or n of them \(n, d\)"):
        residual.injected_direction_readout(model, idx, torch.randn(2 * model.config.d, dtype=torch.float64))


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
    torch.testing.assert_close(result.dropped[1], expected)
    assert isinstance(model.blocks[1], type(model.blocks[0]))  # the model is restored


def test_scaling_keeps_accumulated_variance_flat_and_unscaled_grows():
    scaled = [residual_write_variance(L, scaled=True, B=2) for L in (1, 8)]
    unscaled = [residual_write_variance(L, scaled=False, B=2) for L in (1, 8)]
    assert scaled[1].accumulated / scaled[0].accumulated < 1.5
    assert unscaled[1].accumulated / unscaled[0].accumulated > 4  # 2L grows by 8
    # L = 1 has two writes: scaling by 1/sqrt(2) halves the variance (same seed, same idea)
    assert scaled[0].accumulated == pytest.approx(unscaled[0].accumulated / 2, rel=0.2)
    for run in scaled + unscaled:
        assert run.independent == pytest.approx(run.accumulated, rel=0.3)


def test_initial_loss_is_near_ln_V():
    loss, ln_V = initial_loss_gap(COURSE_CONFIG, B=2)
    assert ln_V == math.log(65)
    assert abs(loss - ln_V) < 0.1


def linear_ode(d=6, seed=0):
    """dX/ds = X A: the exact flow is X0 expm(s A), an independent reference (torch.linalg.matrix_exp)."""
    generator = torch.Generator().manual_seed(seed)
    A = torch.randn(d, d, generator=generator, dtype=torch.float64) / math.sqrt(d)
    X0 = torch.randn(3, d, generator=generator, dtype=torch.float64)
    return (lambda X: X @ A), X0, X0 @ torch.linalg.matrix_exp(A)


def test_euler_flow_is_a_stack_of_residual_steps_converging_at_first_order():
    F, X0, exact = linear_ode()
    torch.testing.assert_close(residual.euler_flow(F, X0, 1.0, 1), X0 + F(X0))  # one step is one block X + F(X)
    errors = [(residual.euler_flow(F, X0, 1.0, steps) - exact).norm() for steps in (64, 128, 256)]
    for coarse, fine in zip(errors, errors[1:]):
        assert 1.8 < coarse / fine < 2.2  # halving h halves the error: first order


def test_rk4_flow_converges_at_fourth_order():
    F, X0, exact = linear_ode()
    errors = [(residual.rk4_flow(F, X0, 1.0, steps) - exact).norm() for steps in (4, 8)]
    assert 12 < errors[0] / errors[1] < 20  # 2^4 = 16
    torch.testing.assert_close(residual.rk4_flow(F, X0, 1.0, 64), exact, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match=re.escape("steps must be an integer >= 1, got 0")):
        residual.euler_flow(F, X0, 1.0, 0)
    with pytest.raises(ValueError, match=re.escape("t must be a finite number > 0, got 0.0")):
        residual.rk4_flow(F, X0, 0.0, 4)


def test_superposition_readout_with_orthonormal_and_crowded_directions():
    d = 16
    Q = torch.linalg.qr(torch.randn(d, d, dtype=torch.float64))[0]  # orthonormal columns
    exact = residual.superposition_readout(Q.T, ks=[d])  # d orthonormal features: all of them at once
    assert exact.max_cos < 1e-12 and exact.recovered == (1.0,) and exact.dense_error < 1e-12
    W = residual.random_directions(8 * d, d)
    cos = [abs(float(W[i] @ W[j])) for i in range(len(W)) for j in range(i)]
    crowded = residual.superposition_readout(W, ks=[1])
    assert crowded.max_cos == pytest.approx(max(cos))
    assert crowded.recovered == (1.0,)  # one active feature is always its own best match
    assert crowded.dense_error > 0.5  # 8d dense values cannot pass through d coordinates
    duplicated = residual.superposition_readout(torch.cat([Q.T, Q.T[:1]]), ks=[1])
    assert duplicated.recovered[0] < 1.0  # two features with one direction cannot be told apart


def test_superposition_readout_gives_each_k_the_result_it_has_when_asked_alone():
    W = residual.random_directions(64, 16)
    together = residual.superposition_readout(W, ks=(1, 3, 6), trials=50)
    for k, recovered in zip((1, 3, 6), together.recovered):
        alone = residual.superposition_readout(W, ks=[k], trials=50)
        assert alone.recovered == (recovered,)
        assert alone.max_cos == together.max_cos
        assert alone.dense_error == pytest.approx(together.dense_error, rel=1e-12)  # the same solve, to rounding
    assert together.recovered[0] == 1.0 > together.recovered[2]  # crowding shows as k grows


@pytest.mark.parametrize("ks, trials, rule", [
    ([0], 10, r"k must be an integer in \[1, 64\], got 0"),
    ([65], 10, r"k must be an integer in \[1, 64\], got 65"),
    (4, 10, r"ks must be a list, tuple or range of k values"),
    ([1], 0, r"trials must be an integer >= 1, got 0"),
])
def test_superposition_readout_refuses_bad_k_and_trials(ks, trials, rule):
    with pytest.raises(ValueError, match=rule):
        residual.superposition_readout(residual.random_directions(64, 16), ks, trials=trials)


@pytest.mark.parametrize("call, words", [
    (lambda: residual.random_directions(-1, 4), r"^n must be an integer >= 1, got -1$"),  # was torch's RuntimeError
    (lambda: residual.random_directions(2, 0), r"^d must be an integer >= 1, got 0$"),  # was an empty (2, 0), silently
    (lambda: residual.random_directions(2, 4, seed=-1), r"^seed must be an integer in \[0, 18446744073709551615\], got -1$"),
    (lambda: residual.superposition_readout([[1.0]], (1,)), r"^W must be n >= 1 feature directions \(n, d\), .* got list$"),
    (lambda: residual.superposition_readout(torch.eye(3), (1,), seed=math.nan), r"^seed must be an integer in "),
    (lambda: initial_loss_gap(B=-1), r"^B must be an integer >= 1, got -1$"),
    (lambda: residual_write_variance(2, True, B=0), r"^B must be an integer >= 1, got 0$"),
])
def test_sizes_and_seeds_of_the_studies_are_checked_with_their_bound(call, words):
    with pytest.raises(ValueError, match=words):
        call()
