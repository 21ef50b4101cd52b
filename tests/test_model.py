"""The model against independent references: Definition 4.1 written out, GELU, torch's MultiheadAttention."""

import math

import pytest
import torch

from gptlib import COURSE_CONFIG, GPT, GPTConfig, run_with_cache
from gptlib.analysis.cache import recording
from gptlib.model import (
    BLOCK_INTERMEDIATES,
    MLP,
    AttentionOnlyBlock,
    Block,
    LayerNorm,
    MultiHeadAttention,
    PostNormBlock,
    attention_matrices_formed,
    eval_mode,
    make_block,
)


def random_layernorm(d: int, dtype: torch.dtype, eps: float) -> LayerNorm:
    ln = LayerNorm(d, eps=eps).to(dtype)
    with torch.no_grad():
        ln.gamma.normal_()
        ln.beta.normal_()
    return ln


ADVERSARIAL_ROWS = {  # (B, T, d) inputs on which a careless LayerNorm loses digits, with the eps to use
    "random": (lambda u: u * 5 + 2, 1e-5),
    "large offset 1e4": (lambda u: u + 1e4, 1e-5),
    "large offset 1e6, eps 1e-12": (lambda u: u + 1e6, 1e-12),
    "tiny variance 1e-6, eps 1e-20": (lambda u: 3 + 1e-6 * u, 1e-20),
    "tiny variance below eps": (lambda u: 3 + 1e-4 * u, 1e-5),
    "constant rows": (lambda u: 0 * u + 3, 1e-5),
}


@pytest.mark.parametrize("case", ADVERSARIAL_ROWS)
def test_fused_layernorm_agrees_with_definition_4_1_written_out(case):
    # float64, so the comparison measures the two computations and not float32's rounding of
    # the input: u + 1e4 in float32 already blurs the unit-variance part to ~1e-3
    make, eps = ADVERSARIAL_ROWS[case]
    ln = random_layernorm(128, torch.float64, eps)
    u = make(torch.randn(3, 7, 128, dtype=torch.float64))
    torch.testing.assert_close(ln(u), ln.definition(u), atol=1e-6, rtol=1e-6)
    reference = torch.nn.functional.layer_norm(u, (128,), ln.gamma, ln.beta, eps)
    torch.testing.assert_close(ln.definition(u), reference, atol=1e-6, rtol=1e-6)


def test_definition_4_1_by_hand_and_on_a_constant_row():
    ln = random_layernorm(4, torch.float64, 1e-5)
    u = torch.tensor([1.0, 2.0, 3.0, 6.0], dtype=torch.float64)  # mean 3, sigma^2 = (4 + 1 + 0 + 9) / 4
    expected = ln.gamma * torch.tensor([-2.0, -1.0, 0.0, 3.0], dtype=torch.float64) / math.sqrt(3.5 + 1e-5) + ln.beta
    torch.testing.assert_close(ln.definition(u), expected)
    constant = torch.full((4,), 7.0, dtype=torch.float64)
    torch.testing.assert_close(ln.definition(constant), ln.beta.detach(), atol=0, rtol=0)  # gamma * 0 + beta
    torch.testing.assert_close(ln(constant), ln.beta.detach(), atol=0, rtol=0)


@pytest.mark.parametrize("eps", [0, 0.0, -1e-5, float("nan")])
def test_a_models_layernorm_needs_eps_above_zero(eps):
    with pytest.raises(ValueError, match=r"eps must be a finite number > 0"):
        LayerNorm(4, eps)
    with pytest.raises(ValueError, match=r"ln_eps must be a finite number > 0"):
        GPTConfig(ln_eps=eps)


def test_a_model_of_constant_rows_gives_finite_logits():
    """d = 1: every row is constant, so every LayerNorm sees sigma = 0, where eps = 0 would give NaN."""
    model = GPT(GPTConfig(V=65, T_max=8, d=1, H=1, L=1))
    assert model(torch.tensor([1, 2])).isfinite().all()


def test_fused_layernorm_agrees_with_definition_in_float32_and_is_as_accurate():
    ln = random_layernorm(128, torch.float32, 1e-5)
    u = torch.randn(3, 7, 128) * 5 + 2
    torch.testing.assert_close(ln(u), ln.definition(u), atol=1e-6, rtol=1e-6)
    shifted = u + 1e4  # here float32 loses digits in both; the fused kernel loses no more than the formula
    exact = random_layernorm(128, torch.float64, 1e-5)
    exact.load_state_dict(ln.state_dict())
    truth = exact.definition(shifted.double())
    fused_error = (ln(shifted).double() - truth).abs().max()
    formula_error = (ln.definition(shifted).double() - truth).abs().max()
    assert fused_error <= 2 * formula_error


def test_fused_layernorm_jacobian_and_vmap_match_the_definition():
    ln = random_layernorm(16, torch.float64, 1e-5)
    U = torch.randn(5, 16, dtype=torch.float64) + 3
    per_row = torch.func.vmap(torch.func.jacrev(ln))(U)  # (5, 16, 16)
    expected = torch.func.vmap(torch.func.jacrev(ln.definition))(U)
    torch.testing.assert_close(per_row, expected)
    assert torch.autograd.gradcheck(ln, (U[:2].clone().requires_grad_(),))


def test_mlp_uses_exact_erf_gelu():
    mlp = MLP(COURSE_CONFIG)
    for p in mlp.parameters():
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(2, 5, 128)
    pre = x @ mlp.W_1.T + mlp.b_1
    phi = torch.distributions.Normal(0.0, 1.0).cdf(pre)  # t * Phi(t), written independently
    expected = (pre * phi) @ mlp.W_2.T + mlp.b_2
    torch.testing.assert_close(mlp(x), expected, atol=1e-5, rtol=1e-5)


def test_attention_matches_torch_multihead_attention():
    config = GPTConfig(d=64, H=4)
    attn = MultiHeadAttention(config)
    for p in attn.parameters():
        torch.nn.init.normal_(p, std=0.2)
    d = config.d
    ref = torch.nn.MultiheadAttention(d, config.H, bias=True, batch_first=True)
    with torch.no_grad():
        # row block h of torch's in-projection is (W^h)^T
        ref.in_proj_weight.copy_(torch.cat([W.transpose(1, 2).reshape(d, d) for W in (attn.W_Q, attn.W_K, attn.W_V)]))
        ref.in_proj_bias.zero_()
        ref.out_proj.weight.copy_(attn.W_O.T)
        ref.out_proj.bias.copy_(attn.b_O)
    x = torch.randn(2, 10, d)
    mask = torch.ones(10, 10, dtype=torch.bool).triu(1)  # True = may not attend
    expected, _ = ref(x, x, x, attn_mask=mask, need_weights=False)
    torch.testing.assert_close(attn(x), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(attn.definition(x), expected, atol=1e-5, rtol=1e-5)
    seen = []
    attn.hook_A.register_forward_hook(lambda module, inputs, A: seen.append(A))
    assert not attn.forms_A
    attn(x)
    assert seen == []  # the fused kernel never holds A^h
    with attention_matrices_formed(attn):
        torch.testing.assert_close(attn(x), expected, atol=1e-5, rtol=1e-5)
    assert [A.shape for A in seen] == [(2, config.H, 10, 10)]


def test_definition_1_1_is_causal_head_by_head_and_names_a_bad_input():
    attn = MultiHeadAttention(GPTConfig(d=24, H=3))
    for p in attn.parameters():
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(2, 6, 24)
    changed = x.clone()
    changed[:, 4:] += 1  # the future of positions 0..3
    torch.testing.assert_close(attn.definition(changed)[:, :4], attn.definition(x)[:, :4])
    unmasked = MultiHeadAttention(GPTConfig(d=24, H=3, causal=False))
    unmasked.load_state_dict(attn.state_dict())
    torch.testing.assert_close(unmasked.definition(x), unmasked(x), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"X must be a \(B, T, d\) tensor with d=24, got \(6, 24\)"):
        attn.definition(x[0])


@pytest.mark.parametrize(
    "config",
    [COURSE_CONFIG, GPTConfig(V=11, T_max=9, d=24, H=3, L=2, norm="post"), GPTConfig(L=2, attn_only=True)],
)
def test_fused_and_explicit_paths_agree(config):
    model = GPT(config).eval()
    idx = torch.randint(0, config.V, (3, config.T_max))
    fused = model(idx)
    explicit, cache = run_with_cache(model, idx)
    assert (fused - explicit).abs().max() <= 1e-5
    A = cache.A(0)
    assert A.shape == (3, config.H, config.T_max, config.T_max)
    torch.testing.assert_close(A.sum(-1), torch.ones(A.shape[:-1]))
    assert (A.triu(1) == 0).all(), "causal mask: no weight on future positions"


def test_logits_and_loss(course_model):
    idx = torch.randint(0, 65, (4, 20))
    targets = torch.randint(0, 65, (4, 20))
    Z, loss = course_model(idx, targets)
    assert Z.shape == (4, 20, 65)
    expected = -torch.log_softmax(Z, -1).gather(-1, targets[..., None]).mean()
    torch.testing.assert_close(loss, expected)
    assert course_model(idx[0]).shape == (20, 65)


@pytest.mark.parametrize("seed", range(5))
def test_initial_loss_is_near_uniform(seed):
    torch.manual_seed(seed)
    model = GPT(COURSE_CONFIG)
    with torch.no_grad():
        _, loss = model(torch.randint(0, 65, (32, 64)), torch.randint(0, 65, (32, 64)))
    assert abs(loss.item() - math.log(65)) < 0.1


def test_residual_projections_are_scaled_by_one_over_sqrt_2L():
    torch.manual_seed(0)
    config = COURSE_CONFIG.replace(d=256, L=8)
    model = GPT(config)
    expected = config.init_std / math.sqrt(2 * config.L)
    for block in model.blocks:
        for W in (block.attn.W_O, block.mlp.W_2):
            assert abs(W.std().item() / expected - 1) < 0.05
        assert abs(block.attn.W_Q.std().item() / config.init_std - 1) < 0.05


def test_tied_model_uses_E_transpose():
    model = GPT(COURSE_CONFIG.replace(tie_weights=True))
    assert not hasattr(model, "W_U")
    assert model.unembedding.data_ptr() == model.E.data_ptr()


@pytest.mark.parametrize(
    "idx, rule",
    [
        (torch.zeros(2, 3, dtype=torch.float32), "integer dtype"),
        (torch.zeros(1, 2, 3, dtype=torch.long), "1-D"),
        (torch.zeros(1, 65, dtype=torch.long), "T <= T_max=64"),
        (torch.tensor([[0, 65]]), r"\[0, V\) = \[0, 65\)"),
        (torch.tensor([[-1, 3]]), r"\[0, V\)"),
        ([1, 2, 3], "must be a torch.Tensor"),
        (torch.ones(2, 3, dtype=torch.bool), "integer dtype, got torch.bool"),
        (torch.zeros(0, 5, dtype=torch.long), r"at least one sequence of at least one token, got shape \(0, 5\)"),
        (torch.zeros(3, 0, dtype=torch.long), "at least one sequence"),
        (torch.tensor([[2**40, -3, 70]]), r"got 1099511627776, -3, 70$"),
        (torch.arange(60, 72).view(1, -1), r"got 65, 66, 67, 68, 69 and 2 more"),
        (torch.tensor([[2**63 + 5, 3]], dtype=torch.uint64), r"\[0, V\) = \[0, 65\), got 9223372036854775813$"),
    ],
)
def test_bad_tokens_raise_clear_errors(course_model, idx, rule):
    with pytest.raises(ValueError, match=rule):
        course_model(idx)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.uint16, torch.uint32,
                                   torch.uint64])
def test_every_integer_dtype_means_the_same_ids(course_model, dtype):
    """uint8 ids would index E as a boolean mask if passed on; they are read as ids, like every integer dtype."""
    idx = torch.randint(0, 65, (3, 16))
    targets = torch.randint(0, 65, (3, 16))
    Z, loss = course_model(idx, targets)
    Z_small, loss_small = course_model(idx.to(dtype), targets.to(dtype))
    assert torch.equal(Z, Z_small) and torch.equal(loss, loss_small)
    assert torch.equal(course_model(idx[0].to(dtype)), Z[0])


@pytest.mark.parametrize(
    "targets, rule",
    [
        (torch.zeros(2, 4, dtype=torch.long), r"targets must have the shape of idx \(2, 5\), got \(2, 4\)"),
        ([[0] * 5] * 2, "targets must be a torch.Tensor of integers"),
        (__import__("numpy").zeros((2, 5), dtype="int64"), "targets must be a torch.Tensor of integers .*got ndarray"),
        (torch.zeros(2, 5), "targets must have an integer dtype, got torch.float32"),
        (torch.full((2, 5), 65), r"targets must lie in \[0, V\)"),
        (torch.full((2, 5), -100), r"targets must lie in \[0, V\)"),  # no silent ignore_index
    ],
)
def test_targets_are_checked_like_token_ids(course_model, targets, rule):
    with pytest.raises(ValueError, match=rule):
        course_model(torch.zeros(2, 5, dtype=torch.long), targets)


@pytest.mark.parametrize(
    "X, rule",
    [
        (torch.zeros(5, 128), r"X must be a \(B, T, d\) tensor with d=128, got \(5, 128\)"),
        (torch.zeros(1, 5, 64), r"with d=128, got \(1, 5, 64\)"),
        (torch.zeros(0, 5, 128), r"B >= 1"),
        (torch.zeros(1, 65, 128), r"T <= T_max=64"),
        (torch.zeros(1, 5, 128, dtype=torch.float64), "the model's dtype torch.float32 on cpu, got torch.float64"),
        ([[0.0] * 128], "got list"),
    ],
)
def test_forward_from_embeddings_checks_its_input(course_model, X, rule):
    with pytest.raises(ValueError, match=rule):
        course_model.forward_from_embeddings(X)


def test_the_models_checks_return_what_they_checked(course_model):
    X = torch.zeros(1, 5, 128)
    assert course_model.check_embeddings(X) is X
    assert course_model.check_tokens(torch.tensor([1, 2], dtype=torch.uint8)).dtype == torch.int64


def test_forming_the_attention_matrices_is_checked_and_handed_back(course_model):
    """attention_matrices_formed sets every attention's forms_A for a while and gives each its own back,
    also when the body raises."""
    attentions = [block.attn for block in course_model.blocks]
    attentions[1].forms_A = True
    with pytest.raises(RuntimeError, match="inside"):
        with attention_matrices_formed(course_model):
            assert all(attn.forms_A for attn in attentions)
            with attention_matrices_formed(course_model.blocks[2], formed=False):
                assert [attn.forms_A for attn in attentions] == [True, True, False, True]
            assert all(attn.forms_A for attn in attentions)
            raise RuntimeError("raised inside")
    assert [attn.forms_A for attn in attentions] == [False, True, False, False]
    with pytest.raises(ValueError, match="formed must be True or False, got 'yes'"):
        attention_matrices_formed(course_model, formed="yes").__enter__()
    with pytest.raises(ValueError, match="module must be a torch nn.Module, got function"):
        attention_matrices_formed(lambda X: X).__enter__()


def test_gradients_reach_every_parameter(course_model):
    _, loss = course_model(torch.randint(0, 65, (2, 8)), torch.randint(0, 65, (2, 8)))
    loss.backward()
    missing = [name for name, p in course_model.named_parameters() if p.grad is None]
    assert not missing


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_measures_without_grad_in_eval_mode_and_hands_the_mode_back(training):
    model = GPT(GPTConfig(V=5, T_max=4, d=8, H=2, L=1)).train(training)
    seen = []
    with pytest.raises(RuntimeError, match="inside"):
        with eval_mode(model):
            seen.append((model.training, any(m.training for m in model.modules()), torch.is_grad_enabled()))
            raise RuntimeError("raised inside")
    assert seen == [(False, False, False)]
    assert all(m.training == training for m in model.modules()) and torch.is_grad_enabled()


def test_eval_mode_only_disables_grad_for_a_plain_function():
    with eval_mode(lambda idx: idx):
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("norm, attn_only, kind", [("pre", False, Block), ("post", False, PostNormBlock),
                                                   ("pre", True, AttentionOnlyBlock)])
def test_each_block_is_its_formula_and_recording_changes_nothing(norm, attn_only, kind, small_config, with_random_weights):
    """Definition 3.1 (pre-norm), Aside 3.5 (post-norm) and the attention half alone, composed here
    from the block's parts; a recording run returns the same tensor and files every named intermediate."""
    config = small_config.replace(norm=norm, attn_only=attn_only)
    block = with_random_weights(make_block(config), 0.3)
    assert type(block) is kind and type(GPT(config).blocks[0]) is kind
    X = torch.randn(2, 5, small_config.d)
    attn, ln_1 = block.attn, block.ln_1
    if attn_only:
        expected = X + attn(ln_1(X))  # X' = X + MHA(LN_1(X))
    elif norm == "pre":
        Y = X + attn(ln_1(X))  # Y = X + MHA(LN_1(X))
        expected = Y + block.mlp(block.ln_2(Y))  # X' = Y + MLP(LN_2(Y))
    else:
        Y = ln_1(X + attn(X))  # Y = LN_1(X + MHA(X))
        expected = block.ln_2(Y + block.mlp(Y))  # X' = LN_2(Y + MLP(Y))
    assert torch.equal(block(X), expected)
    with recording(block, {}) as fused:
        assert torch.equal(block(X), expected)
    with recording(block, {}) as formed, attention_matrices_formed(block):
        torch.testing.assert_close(block(X), expected, atol=1e-5, rtol=1e-5)
    names = {"ln_1", "attn_write", "Y"} | (set() if attn_only else {"ln_2", "mlp_write"})
    assert set(fused) == names and set(formed) == names | {"A"} and set(formed) <= set(BLOCK_INTERMEDIATES)
    assert torch.equal(fused["Y"], expected if attn_only else Y)
    block(X)
    assert set(fused) == names and set(formed) == names | {"A"}, "the hooks are gone after recording"


@pytest.mark.parametrize("kind, config, rule", [
    (Block, GPTConfig(norm="post"), "Block is not the block of a config with norm='post', attn_only=False: "
                                    r"that is PostNormBlock \(make_block\)"),
    (Block, GPTConfig(attn_only=True), "that is AttentionOnlyBlock"),
    (PostNormBlock, GPTConfig(), "PostNormBlock is not the block of .* that is Block"),
    (AttentionOnlyBlock, GPTConfig(norm="post"), "that is PostNormBlock"),
])
def test_a_block_class_refuses_a_config_that_asks_for_another(kind, config, rule):
    with pytest.raises(ValueError, match=rule):
        kind(config)


def test_hook_points_add_nothing_to_the_state_dict(course_model):
    """The shipped checkpoints' keys are the parameters': the hook points hold none."""
    assert list(course_model.state_dict()) == [name for name, _ in course_model.named_parameters()]
    assert "hook_X.0" in dict(course_model.named_modules()) and "blocks.0.attn.hook_A" in dict(course_model.named_modules())
