"""gptlib.analysis.attention against independent computations: the module's own forward, torch.linalg, explicit Jacobians."""

import math
import re

import pytest
import torch

from gptlib import COURSE_CONFIG, GPT, run_with_cache
from gptlib.analysis import attention
from gptlib.analysis.cache import Cache
from gptlib.model import MultiHeadAttention


@pytest.fixture
def small(small_config):
    return small_config.replace(T_max=12, d=24, H=3)


@pytest.fixture
def attn(small, with_random_weights):
    """A MultiHeadAttention with large random weights and a nonzero b_O, so b_O's handling is tested."""
    return with_random_weights(MultiHeadAttention(small), 0.3)


@torch.no_grad()
def test_proposition_1_2_heads_plus_bias_give_the_modules_output(attn, small):
    X = torch.randn(2, 10, small.d)
    terms = attention.head_contributions(attn, X)  # (B, H, T, d)
    assert terms.shape == (2, small.H, 10, small.d)
    reference = attn(X)  # the fused scaled_dot_product_attention path, written independently
    torch.testing.assert_close(terms.sum(1) + attn.b_O, reference, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(attn.definition(X), reference, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_a_wrong_decomposition_is_caught(attn, small):
    """Pairing each head with the next head's W_O block, or dropping b_O, fails the same check."""
    X = torch.randn(1, 10, small.d)
    q, k, v = attn.qkv(X)
    A = attn.attention_matrices(q, k)
    H = small.H
    wrong = sum(A[:, h] @ X @ attn.W_V[h] @ attn.W_O_head((h + 1) % H) for h in range(H)) + attn.b_O
    assert (wrong - attn(X)).abs().max() > 1e-2
    without_bias = attention.head_contributions(attn, X).sum(1)
    assert (without_bias - attn(X)).abs().max() > 1e-2


@pytest.mark.parametrize("norm", ["pre", "post"])
@torch.no_grad()
def test_contributions_match_every_layers_cached_write(norm, small):
    model = GPT(small.replace(norm=norm)).eval()
    with torch.no_grad():
        for block in model.blocks:
            block.attn.b_O.normal_()
    _, cache = run_with_cache(model, torch.randint(0, 65, (2, 12)))
    for l, block in enumerate(model.blocks):
        X = attention.attention_input(model, cache, l)
        total = attention.head_contributions(block.attn, X).sum(1) + block.attn.b_O
        torch.testing.assert_close(total, cache.attn_write(l), atol=1e-5, rtol=1e-5)
        from_cache = attention.head_contributions(block.attn, X, cache.A(l)).sum(1) + block.attn.b_O
        torch.testing.assert_close(from_cache, cache.attn_write(l), atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_circuit_matrices_reproduce_scores_and_values(attn, small):
    X = torch.randn(1, 7, small.d)
    q, k, v = attn.qkv(X)  # (1, H, T, d_head)
    S = attention.scores(attn, X)
    torch.testing.assert_close(S, q @ k.transpose(-2, -1) / math.sqrt(small.d_head), atol=1e-5, rtol=1e-5)
    mask = torch.ones(7, 7, dtype=torch.bool).triu(1)
    torch.testing.assert_close(S.masked_fill(mask, float("-inf")).softmax(-1), attn.attention_matrices(q, k))
    for h in range(small.H):
        torch.testing.assert_close(X @ attention.W_OV(attn, h), v[:, h] @ attn.W_O_head(h), atol=1e-5, rtol=1e-5)
        assert attention.W_QK(attn, h).shape == (small.d, small.d)


def test_numerical_rank_agrees_with_torch_and_sees_products():
    generator = torch.Generator().manual_seed(1)
    for inner in (1, 5, 16):
        M = torch.randn(40, inner, generator=generator) @ torch.randn(inner, 30, generator=generator)
        result = attention.numerical_rank(M)
        assert result.rank == inner == int(torch.linalg.matrix_rank(M))
        assert result.tolerance == pytest.approx(float(result.singular_values[0]) * 40 * torch.finfo(torch.float32).eps)
    assert attention.numerical_rank(torch.zeros(3, 3)).rank == 0


def test_course_heads_have_rank_d_head():
    """Proposition 1.2 and Exercise 6: rank(W_OV^h) <= d_head and rank(S^h) <= d_head, with equality generically."""
    model = GPT(COURSE_CONFIG).eval()
    attn = model.blocks[0].attn
    X = torch.randn(1, COURSE_CONFIG.T_max, COURSE_CONFIG.d)  # T = 64 > d_head = 32
    with torch.no_grad():
        S = attention.scores(attn, X)
        for h in range(COURSE_CONFIG.H):
            assert attention.numerical_rank(attention.W_OV(attn, h)).rank == COURSE_CONFIG.d_head
            assert attention.numerical_rank(attention.W_QK(attn, h)).rank == COURSE_CONFIG.d_head
            assert attention.numerical_rank(S[0, h]).rank == COURSE_CONFIG.d_head


@torch.no_grad()
def test_gauge_transform_keeps_circuits_and_logits(small):
    model = GPT(small.replace(init_std=0.3)).eval()  # large weights: peaked attention, so errors show in the logits
    idx = torch.randint(0, 65, (2, 12))
    generator = torch.Generator().manual_seed(2)
    R_qk = attention.random_invertible(small.d_head, generator)
    R_ov = attention.random_invertible(small.d_head, generator)
    new = attention.gauge_transform(model, 1, 2, R_qk, R_ov)
    old_attn, new_attn = model.blocks[1].attn, new.blocks[1].attn
    assert (new_attn.W_Q[2] - old_attn.W_Q[2]).abs().max() > 1e-3  # the factors did change
    assert (new_attn.W_O_head(2) - old_attn.W_O_head(2)).abs().max() > 1e-3
    torch.testing.assert_close(attention.W_QK(new_attn, 2), attention.W_QK(old_attn, 2), atol=1e-6, rtol=1e-4)
    torch.testing.assert_close(attention.W_OV(new_attn, 2), attention.W_OV(old_attn, 2), atol=1e-6, rtol=1e-4)
    torch.testing.assert_close(new(idx), model(idx), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(new_attn.W_Q[0], old_attn.W_Q[0])  # other heads untouched


@torch.no_grad()
def test_a_wrong_gauge_changes_the_logits(small):
    """W_K^h R^{-1} instead of W_K^h R^{-T}: the checks above would catch this mistake."""
    model = GPT(small.replace(init_std=0.3)).eval()  # large weights: peaked attention, so errors show in the logits
    idx = torch.randint(0, 65, (1, 12))
    R = attention.random_invertible(small.d_head, torch.Generator().manual_seed(3))
    wrong = attention.gauge_transform(model, 0, 0)  # an unchanged copy
    attn = wrong.blocks[0].attn
    attn.W_Q[0] = attn.W_Q[0] @ R
    attn.W_K[0] = attn.W_K[0] @ torch.linalg.inv(R)
    assert (attention.W_QK(attn, 0) - attention.W_QK(model.blocks[0].attn, 0)).abs().max() > 1e-2
    assert (wrong(idx) - model(idx)).abs().max() > 1e-3


def test_gauge_transform_refuses_bad_matrices(small):
    model = GPT(small)
    with pytest.raises(ValueError, match="invertible"):
        attention.gauge_transform(model, 0, 0, R_qk=torch.zeros(small.d_head, small.d_head))
    d_head = small.d_head
    with pytest.raises(ValueError, match=re.escape(
            f"R_ov must be a matrix of shape (d_head, d_head) = ({d_head}, {d_head}), got ({d_head + 1}, {d_head + 1})")):
        attention.gauge_transform(model, 0, 0, R_ov=torch.eye(d_head + 1))
    with pytest.raises(ValueError, match=re.escape(f"layer must be an integer in [0, {small.L - 1}], got {small.L}")):
        attention.gauge_transform(model, small.L, 0)
    with pytest.raises(ValueError, match=re.escape(f"head index h must be an integer in [0, {small.H - 1}], got {small.H}")):
        attention.gauge_transform(model, 0, small.H)


def explicit_jacobian_rank(d, d_head, seed):
    """d(W_Q W_K^T) = dQ K^T + Q dK^T as a matrix built with Kronecker products (independent of autograd)."""
    generator = torch.Generator().manual_seed(seed)
    Q = torch.randn(d, d_head, generator=generator, dtype=torch.float64)
    K = torch.randn(d, d_head, generator=generator, dtype=torch.float64)
    eye = torch.eye(d, dtype=torch.float64)
    # row (i, j) of vec(M); dQ_{ia} contributes K_{ja}, dK_{ja} contributes Q_{ia} (columns in another order: rank unchanged)
    J = torch.cat((torch.kron(eye, K), torch.kron(Q, eye)), dim=1)
    return int(torch.linalg.matrix_rank(J))


@pytest.mark.parametrize("d, d_head", [(4, 1), (6, 2), (8, 3), (9, 4), (5, 5)])
def test_factor_pairs_form_a_d_head_squared_family(d, d_head):
    """Exercise 3: the fibre of (W_Q, W_K) -> W_Q W_K^T has dimension d_head^2 (the GL(d_head) orbit)."""
    result = attention.factor_pair_dimension(d, d_head, seed=0)
    assert result.parameters == 2 * d * d_head
    assert result.jacobian_rank == explicit_jacobian_rank(d, d_head, seed=0)
    assert result.fiber_dimension == d_head**2


def test_factor_pair_dimension_refuses_bad_sizes():
    with pytest.raises(ValueError, match="d_head <= d"):
        attention.factor_pair_dimension(3, 4)


def test_remark_1_4_same_budget_more_distributions():
    rows = attention.head_budget_comparison(COURSE_CONFIG)
    d = COURSE_CONFIG.d
    assert [row.H for row in rows] == [1, COURSE_CONFIG.H]
    for row in rows:
        assert row.parameters == 4 * d * d + d  # the attention term of Theorem 5.2's proof
        assert row.distributions_per_query == row.H
        assert row.max_head_rank == row.d_head == d // row.H


def test_inputs_are_checked(attn, small):
    with pytest.raises(ValueError, match=re.escape(f"head index h must be an integer in [0, {small.H - 1}], got -1")):
        attention.W_QK(attn, -1)
    with pytest.raises(ValueError, match=r"\(B, T, d\)"):
        attention.head_contributions(attn, torch.randn(5, small.d))
    with pytest.raises(ValueError, match=re.escape(
            f"A must be the attention of this X of shape (B, H, T, T) = (1, {small.H}, 5, 5), got (1, {small.H}, 4, 4)")):
        attention.head_contributions(attn, torch.randn(1, 5, small.d), torch.rand(1, small.H, 4, 4))
    with pytest.raises(ValueError, match="2-D"):
        attention.numerical_rank(torch.randn(3))


def test_head_ranks_agree_with_torch_matrix_rank_and_the_singular_values(small):
    model = GPT(small).eval()
    _, cache = run_with_cache(model, torch.randint(0, 65, (1, small.T_max)))
    rows = attention.head_ranks(model, cache)
    assert [(r.layer, r.head) for r in rows] == [(l, h) for l in range(small.L) for h in range(small.H)]
    k = small.d_head
    with torch.no_grad():
        for r in rows:
            attn = model.blocks[r.layer].attn
            W_OV = attn.W_V[r.head] @ attn.W_O_head(r.head)  # written out, not attention.W_OV
            W_QK = attn.W_Q[r.head] @ attn.W_K[r.head].T
            assert r.rank_W_OV == int(torch.linalg.matrix_rank(W_OV)) == k
            assert r.rank_W_QK == int(torch.linalg.matrix_rank(W_QK)) == k
            q, key, _ = attn.qkv(attention.attention_input(model, cache, r.layer))  # the module's own, (1, H, T, d_head)
            assert r.rank_S == int(torch.linalg.matrix_rank(q[0, r.head] @ key[0, r.head].T)) == k  # T = 12 > d_head = 8
            sv = torch.linalg.svdvals(W_OV)
            assert r.cut_W_OV == pytest.approx(float(sv[k - 1] / sv[k]), rel=1e-4) and r.cut_W_OV > 1e3
            assert r.spread_W_OV == pytest.approx(float(sv[0] / sv[k - 1]), rel=1e-4)
    table = attention.format_head_ranks(rows, k).splitlines()
    assert len(table) == 1 + len(rows) and f"sigma_{k}/sigma_{k + 1}" in table[0]
    assert table[1].split()[:5] == ["0", "0", str(k), str(k), str(k)]


class FullWidthScores(MultiHeadAttention):
    """An attention whose queries and keys are d wide instead of d_head: not Definition 1.1, and its
    scores are not bounded by d_head, although its W_Q, W_K (and so W_QK^h) keep their shapes."""

    def __init__(self, config):
        super().__init__(config)
        self.W_Q_full = torch.nn.Parameter(torch.randn(config.H, config.d, config.d) * 0.3)  # (H, d, d)
        self.W_K_full = torch.nn.Parameter(torch.randn(config.H, config.d, config.d) * 0.3)

    def qkv(self, X):
        _, _, v = super().qkv(X)
        q = torch.einsum("btd,hde->bhte", X, self.W_Q_full)  # (B, H, T, d)
        k = torch.einsum("btd,hde->bhte", X, self.W_K_full)
        return q, k, v


@torch.no_grad()
def test_forward_scores_are_the_ones_that_made_the_recorded_attention(small, with_random_weights):
    model = with_random_weights(GPT(small), 0.3).eval()  # large weights: peaked attention, large scores
    idx = torch.randint(0, 65, (2, small.T_max))
    _, cache = run_with_cache(model, idx)
    mask = torch.ones(small.T_max, small.T_max, dtype=torch.bool).triu(1)
    for l, block in enumerate(model.blocks):
        S = attention.forward_scores(model, cache, l)  # (2, H, T, T)
        q, k, _ = block.attn.qkv(cache.ln_1(l))
        torch.testing.assert_close(S, q @ k.transpose(-2, -1) / math.sqrt(small.d_head))
        torch.testing.assert_close(S.masked_fill(mask, float("-inf")).softmax(-1), cache.A(l), atol=1e-5, rtol=0)


@torch.no_grad()
def test_forward_scores_refuse_a_cache_they_did_not_make(small, with_random_weights):
    model = with_random_weights(GPT(small), 0.3).eval()
    _, cache = run_with_cache(model, torch.randint(0, 65, (1, small.T_max)))
    other_model = with_random_weights(GPT(small), 0.3).eval()
    with pytest.raises(ValueError, match=r"layer 1: softmax\(S\^h \+ M\) .* misses the recorded A\^h by"):
        attention.forward_scores(other_model, cache, 1)
    _, short = run_with_cache(model, torch.randint(0, 65, (1, 5)))
    mixed = Cache({**cache.tensors, "A.0": short.A(0)})  # the A^h of a 5-character input
    with pytest.raises(ValueError, match=r"layer 0: the cache's A\^h has shape \(1, 3, 5, 5\)"):
        attention.forward_scores(model, mixed, 0)
    with pytest.raises(ValueError, match="layer l"):
        attention.forward_scores(model, cache, small.L)


@torch.no_grad()
def test_the_rank_of_S_is_measured_on_the_models_own_scores(small):
    """An attention with d-wide queries and keys breaks rank(S^h) <= d_head, and head_ranks sees it,
    while a score matrix rebuilt from W_QK^h would still obey the bound by construction."""
    model = GPT(small).eval()
    model.blocks[0].attn = wide = FullWidthScores(small)
    for p in (wide.W_Q, wide.W_K, wide.W_V, wide.W_O):
        p.normal_(std=0.02)
    _, cache = run_with_cache(model, torch.randint(0, 65, (1, small.T_max)))  # T = 12 > d_head = 8
    rows = {(r.layer, r.head): r for r in attention.head_ranks(model, cache)}
    assert all(rows[0, h].rank_S == small.T_max > small.d_head for h in range(small.H))
    assert all(rows[1, h].rank_S == small.d_head for h in range(small.H))  # an ordinary layer
    rebuilt = attention.scores(model.blocks[0].attn, cache.ln_1(0))[0]  # from W_QK^h: bounded whatever the model does
    assert all(attention.numerical_rank(rebuilt[h]).rank == small.d_head for h in range(small.H))


@pytest.mark.parametrize("rtol, words", [(math.nan, "got nan"), (math.inf, "got inf"), (-1e-3, "got -0.001"),
                                         ("1e-3", "got '1e-3'")])
def test_numerical_rank_refuses_a_tolerance_that_is_not_a_finite_number_at_least_0(rtol, words):
    """An infinite rtol made every singular value count as zero: rank 0, silently."""
    with pytest.raises(ValueError, match=rf"^rtol must be a finite number >= 0, {words}$"):
        attention.numerical_rank(torch.eye(3), rtol)


def test_sizes_of_the_gauge_and_budget_helpers_are_checked_with_their_bound():
    with pytest.raises(ValueError, match=r"^n must be an integer >= 1, got -1$"):  # was torch's RuntimeError
        attention.random_invertible(-1)
    with pytest.raises(ValueError, match=r"^T must be an integer >= 1, got 0$"):  # was a table of empty runs
        attention.head_budget_comparison(COURSE_CONFIG, T=0)
