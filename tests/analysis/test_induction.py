"""Induction-head measurements against straightforward second implementations (gptlib.analysis.induction)."""

import numpy as np
import pytest
import torch

from gptlib import GPT, GPTConfig, run_with_cache
from gptlib.analysis import induction
from gptlib.analysis.induction import INDUCTION_CONFIG


@pytest.fixture
def small(small_config):
    return small_config.replace(T_max=32, attn_only=True)


@pytest.fixture
def model(small):
    return GPT(small).eval()


def test_repeated_tokens_repeat():
    tokens = induction.repeated_random_tokens(3, 10, 65, torch.Generator().manual_seed(0))
    assert tokens.shape == (3, 20) and torch.equal(tokens[:, :10], tokens[:, 10:])
    with pytest.raises(ValueError, match="n >= 2"):
        induction.repeated_random_tokens(1, 1, 65, torch.Generator())


def test_training_rows_are_periodic_with_varying_periods():
    x, y = induction.training_batch(64, 32, 65, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (64, 32) and torch.equal(x[:, 1:], y[:, :-1])
    full = torch.cat([x, y[:, -1:]], dim=1)  # (64, 33)
    periods = []
    for row in full:
        period = next(n for n in range(1, 17) if all(row[t] == row[t - n] for t in range(n, 33)))
        periods.append(period)
    assert min(periods) >= 3 and max(periods) <= 16 and len(set(periods)) > 5


def test_previous_token_scores_match_an_explicit_loop():
    A = torch.rand(2, 3, 4, 6, 6, generator=torch.Generator().manual_seed(3))  # (2, 3, H, T, T), two batch dims
    for patterns, batch in ((A, [(a, b) for a in range(2) for b in range(3)]), (A[1, 2], [()])):
        scores = induction.previous_token_scores(patterns)
        expected = [np.mean([patterns[(*i, h, t, t - 1)].item() for i in batch for t in range(1, 6)]) for h in range(4)]
        assert scores.shape == (4,) and scores.tolist() == pytest.approx(expected, rel=1e-6)


def test_previous_token_scores_of_two_known_heads():
    T = 8
    previous = torch.eye(T).roll(1, dims=0)  # row t is e_{t-1} for t >= 1
    previous[0] = torch.eye(T)[0]
    uniform = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]  # query t spreads over t + 1 keys
    scores = induction.previous_token_scores(torch.stack([previous, uniform]))  # (H=2, T, T)
    assert scores.tolist() == pytest.approx([1.0, sum(1 / (t + 1) for t in range(1, T)) / (T - 1)], rel=1e-6)
    for shape in ((T, T), (2, T, T + 1), (2, 1, 1)):
        with pytest.raises(ValueError, match=r"\(\.\.\., H, T, T\) with T >= 2"):
            induction.previous_token_scores(torch.ones(shape))


def test_head_scores_match_an_explicit_loop(model):
    n = 8
    tokens = induction.repeated_random_tokens(4, n, 65, torch.Generator().manual_seed(1))
    previous, scores = induction.head_scores(model, tokens)
    _, cache = run_with_cache(model, tokens)
    for l in range(2):
        A = cache.A(l)  # (B, H, 2n, 2n)
        for h in range(2):
            prev = np.mean([A[b, h, t, t - 1].item() for b in range(4) for t in range(1, 2 * n)])
            ind = np.mean([A[b, h, t, t - n + 1].item() for b in range(4) for t in range(n, 2 * n)])
            assert previous[l, h].item() == pytest.approx(prev, rel=1e-5)
            assert scores[l, h].item() == pytest.approx(ind, rel=1e-5)


@pytest.mark.parametrize("tokens, rule", [
    (torch.tensor([[1, 2, 3]]), r"rows of n >= 2 tokens said twice \(repeated_random_tokens\), got shape \(1, 3\)$"),
    (torch.tensor([[1, 1]]), r"said twice \(repeated_random_tokens\), got shape \(1, 2\)$"),
    (torch.tensor([[1, 2, 3, 1, 2, 4]]), r"got shape \(1, 6\) whose halves differ"),
    (torch.tensor([1, 2, 1, 2]), r"tokens must be 2-D \(B, T\), got shape \(4,\)"),
    (torch.tensor([[1, 2, 1, 2.0]]), r"tokens must have an integer dtype"),
    (torch.tensor([[1, 99, 1, 99]]), r"tokens must lie in \[0, V\) = \[0, 65\), got 99, 99"),
])
def test_induction_measures_refuse_tokens_that_are_not_two_copies(model, tokens, rule):
    for measure in (induction.head_scores, induction.half_losses):
        with pytest.raises(ValueError, match=rule):
            measure(model, tokens)


def test_half_losses_match_per_position_cross_entropy(model):
    n = 8
    tokens = induction.repeated_random_tokens(2, n, 65, torch.Generator().manual_seed(2))
    first, second = induction.half_losses(model, tokens)
    with torch.no_grad():
        logits = model(tokens[:, :-1])
    per_position = [[-torch.log_softmax(logits[b, t], -1)[tokens[b, t + 1]].item() for t in range(2 * n - 1)]
                    for b in range(2)]
    per_position = np.array(per_position)
    assert first == pytest.approx(per_position[:, : n - 1].mean(), rel=1e-5)
    assert second == pytest.approx(per_position[:, n - 1 :].mean(), rel=1e-5)


def test_full_ov_eigenvalues_match_numpy(model):
    attn = model.blocks[1].attn
    d_head = model.config.d_head
    circuit = (model.E @ attn.W_V[1] @ attn.W_O[d_head : 2 * d_head] @ model.W_U).detach().double().numpy()
    expected = np.sort_complex(np.linalg.eigvals(circuit))
    found = np.sort_complex(induction.full_ov_eigenvalues(model, 1, 1).numpy())
    assert np.allclose(found, expected, atol=1e-10)


def test_eigenvalue_summaries_closed_forms(model):
    eigenvalues = torch.tensor([1 + 1j, -2 + 0j, 3 - 1j, 1e-9 + 0j, -1e-9 + 0j], dtype=torch.complex128)
    assert induction.positive_eigenvalue_fraction(eigenvalues) == pytest.approx(2 / 3)  # rounding zeros dropped
    expected = (1 - 2 + 3 + 0 + 0) / (2**0.5 + 2 + 10**0.5 + 2e-9)
    assert induction.copying_score(eigenvalues) == pytest.approx(expected)
    # E W_OV W_U has rank <= d_head: only d_head eigenvalues survive the cut
    assert len(induction.significant(induction.full_ov_eigenvalues(model, 0, 0))) == model.config.d_head


def test_positive_fraction_detects_copying_and_its_opposite():
    copy_model = GPT(GPTConfig(V=8, T_max=4, d=8, H=1, L=1, attn_only=True))
    with torch.no_grad():  # E = I, W_V W_O = I, W_U = I: the head maps each token to its own logit
        copy_model.E.copy_(torch.eye(8))
        copy_model.blocks[0].attn.W_V[0].copy_(torch.eye(8))
        copy_model.blocks[0].attn.W_O.copy_(torch.eye(8))
        copy_model.W_U.copy_(torch.eye(8))
    eigenvalues = induction.full_ov_eigenvalues(copy_model, 0, 0)
    assert induction.positive_eigenvalue_fraction(eigenvalues) == 1.0 and induction.copying_score(eigenvalues) == 1.0
    with torch.no_grad():
        copy_model.W_U.mul_(-1)  # an anti-copying head
    eigenvalues = induction.full_ov_eigenvalues(copy_model, 0, 0)
    assert induction.positive_eigenvalue_fraction(eigenvalues) == 0.0 and induction.copying_score(eigenvalues) == -1.0


def test_k_composition_against_its_formula_and_edge_cases(model):
    scores = induction.k_composition(model)
    a0, a1 = model.blocks[0].attn, model.blocks[1].attn
    d_head = model.config.d_head
    for b in range(2):
        qk = (a1.W_Q[b] @ a1.W_K[b].T).detach().numpy()
        for a in range(2):
            ov = (a0.W_V[a] @ a0.W_O[a * d_head : (a + 1) * d_head]).detach().numpy()
            expected = np.linalg.norm(qk @ ov.T) / (np.linalg.norm(qk) * np.linalg.norm(ov))
            assert scores[b, a].item() == pytest.approx(expected, rel=1e-5)
    with torch.no_grad():
        a1.W_Q.mul_(3.0)  # the score is scale-free
    assert torch.allclose(induction.k_composition(model), scores, rtol=1e-5)
    with torch.no_grad():  # a key side that ignores everything head 0 writes gives 0
        a1.W_K[0].zero_()
        a1.W_K[0][:d_head] = torch.eye(d_head)
        a0.W_O[:d_head] = 0
        a0.W_O[:d_head, d_head:] = torch.randn(d_head, d_head)
    assert induction.k_composition(model)[0, 0].item() == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="writer_layer < reader_layer"):
        induction.k_composition(model, reader_layer=0, writer_layer=0)


@pytest.mark.parametrize("call, words", [
    (lambda m: induction.full_ov_eigenvalues(m, -1, 0), r"^layer must be an integer in \[0, 1\], got -1$"),
    (lambda m: induction.full_ov_eigenvalues(m, 2, 0), r"^layer must be an integer in \[0, 1\], got 2$"),
    (lambda m: induction.full_ov_eigenvalues(m, 0, -1), r"^head index h must be an integer in \[0, 1\], got -1$"),
    (lambda m: induction.k_composition(m, reader_layer=1.0), r"^reader_layer must be an integer, got 1.0$"),
    (lambda m: induction.k_composition(m, writer_layer=-1), r"^need 0 <= writer_layer < reader_layer < L=2, "),
])
def test_layers_and_heads_outside_the_model_are_refused_not_read_from_the_end(model, call, words):
    with pytest.raises(ValueError, match=words):
        call(model)


@pytest.mark.parametrize("rtol", [float("nan"), float("inf"), -1.0])
def test_significant_refuses_a_tolerance_that_is_not_a_finite_number_at_least_0(rtol):
    with pytest.raises(ValueError, match=r"^rtol must be a finite number >= 0, got "):
        induction.significant(torch.tensor([1.0, 1e-9]), rtol)


@pytest.mark.parametrize("call, words", [
    (lambda: induction.repeated_random_tokens(-1, 4, 65, torch.Generator()), r"^B must be an integer >= 1, got -1$"),
    (lambda: induction.repeated_random_tokens(2, 4, 0, torch.Generator()), r"^V must be an integer >= 1, got 0$"),
    (lambda: induction.training_batch(2, 8, -1, torch.Generator()), r"^V must be an integer >= 1, got -1$"),
    (lambda: induction.training_batch(0, 8, 65, torch.Generator()), r"^B must be an integer >= 1, got 0$"),
])
def test_task_sizes_are_checked_with_their_bound(call, words):
    """These raised torch's RuntimeError about a negative dimension or an empty range."""
    with pytest.raises(ValueError, match=words):
        call()


def test_eval_batch_follows_the_config_length():
    tokens = induction.induction_eval_tokens(INDUCTION_CONFIG.replace(T_max=16))
    assert tokens.shape == (256, 16) and torch.equal(tokens[:, :8], tokens[:, 8:])
    assert induction.induction_eval_tokens().shape == (256, INDUCTION_CONFIG.T_max)
