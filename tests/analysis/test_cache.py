"""gptlib.analysis.cache: the Cache holds the lecture's intermediates of the model's own forward pass,
under the model's record names."""

import copy

import pytest
import torch

from gptlib import COURSE_CONFIG, GPT, GPTConfig, pretrained, run_with_cache
from gptlib.analysis.cache import Cache, recording, shape_table
from gptlib.model import BLOCK_INTERMEDIATES, FINAL_INTERMEDIATES, attention_matrices_formed, intermediate_key


def written_out(model: GPT, idx: torch.Tensor, formed: bool) -> tuple[torch.Tensor, dict]:
    """Section 5's forward pass written out here from the model's parts, keeping each intermediate under
    its name; formed=True forms every A^h as MultiHeadAttention.forward does with forms_A, step by step."""
    kept = {intermediate_key("X", 0): model.embed(idx)}
    X = kept["X.0"]

    def mha(attn, U):  # (A or None, MHA(U))
        if not formed:
            return None, attn(U)
        q, k, v = attn.qkv(U)
        A = attn.attention_matrices(q, k)  # (B, H, T, T)
        B, T, d = U.shape
        C = (A @ v).transpose(1, 2).reshape(B, T, d)
        return A, torch.addmm(attn.b_O, C.view(B * T, d), attn.W_O).view(B, T, d)

    for l, block in enumerate(model.blocks):
        step = {}
        if model.config.norm == "post":
            step["A"], step["attn_write"] = mha(block.attn, X)
            step["ln_1"] = step["Y"] = block.ln_1(X + step["attn_write"])
            step["mlp_write"] = block.mlp(step["Y"])
            step["ln_2"] = X = block.ln_2(step["Y"] + step["mlp_write"])
        else:
            step["ln_1"] = block.ln_1(X)
            step["A"], step["attn_write"] = mha(block.attn, step["ln_1"])
            step["Y"] = X = X + step["attn_write"]
            if not model.config.attn_only:
                step["ln_2"] = block.ln_2(step["Y"])
                step["mlp_write"] = block.mlp(step["ln_2"])
                X = step["Y"] + step["mlp_write"]
        kept.update((intermediate_key(name, l), value) for name, value in step.items() if value is not None)
        kept[intermediate_key("X", l + 1)] = X
    kept["ln_f"] = model.ln_f(X)
    kept["Z"] = kept["ln_f"] @ model.unembedding
    return kept["Z"], kept


MODELS = {
    "shakespeare": lambda: pretrained.load_pretrained("shakespeare"),
    "induction": lambda: pretrained.load_pretrained("induction"),  # attention only
    "post-norm": lambda: GPT(GPTConfig(V=11, T_max=9, d=24, H=3, L=2, norm="post")).eval(),
}


@pytest.mark.parametrize("name", MODELS)
def test_the_hooks_record_the_forward_pass_written_out_bit_for_bit(name):
    """run_with_cache, and recording on the fused path, keep exactly the tensors of the forward pass written
    out above from the model's parts, on both shipped checkpoints; the logits are the model's own, bit for bit."""
    model = MODELS[name]()
    idx = torch.randint(0, model.config.V, (2, model.config.T_max), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for formed in (True, False):
            Z, expected = written_out(model, idx, formed)
            if formed:
                got, cache = run_with_cache(model, idx)
                tensors = cache.tensors
            else:
                with recording(model, {}) as tensors:
                    got = model(idx)
            assert torch.equal(got, Z)
            assert sorted(tensors) == sorted(expected)
            assert all(torch.equal(tensors[key], expected[key]) for key in expected), [
                key for key in expected if not torch.equal(tensors[key], expected[key])]
        Z1, cache1 = run_with_cache(model, idx[1])
        assert torch.equal(Z1, written_out(model, idx[1:], True)[0][0]) and cache1.X(0).shape[0] == 1


def test_cache_holds_the_lectures_intermediates(course_model):
    idx = torch.randint(0, 65, (2, 16))
    Z, cache = run_with_cache(course_model, idx)
    c = COURSE_CONFIG
    torch.testing.assert_close(cache.X(0), course_model.E[idx] + course_model.P[:16])
    for l in range(c.L):
        torch.testing.assert_close(cache.Y(l), cache.X(l) + cache.attn_write(l))
        torch.testing.assert_close(cache.X(l + 1), cache.Y(l) + cache.mlp_write(l))
        torch.testing.assert_close(cache.ln_1(l), course_model.blocks[l].ln_1(cache.X(l)))
    torch.testing.assert_close(cache.Z, Z)
    assert cache.n_layers == c.L
    with pytest.raises(ValueError, match="layers 0..3"):
        cache.A(4)


@pytest.mark.parametrize("config", [COURSE_CONFIG.replace(L=2), GPTConfig(L=2, attn_only=True)])
def test_the_record_holds_exactly_the_named_keys_and_cache_reads_each(config):
    """Every key the model records is one of model's names, and Cache has an accessor for it."""
    model = GPT(config).eval()
    with recording(model, {}) as record, attention_matrices_formed(model):
        model(torch.randint(0, config.V, (1, 5)))
    names = [n for n in BLOCK_INTERMEDIATES if not (config.attn_only and n in ("ln_2", "mlp_write"))]
    per_layer = [intermediate_key(n, l) for l in range(config.L) for n in names]
    streams = [intermediate_key("X", l) for l in range(config.L + 1)]
    assert sorted(record) == sorted(per_layer + streams + list(FINAL_INTERMEDIATES))
    cache = Cache(record)
    for l in range(config.L):
        for name in names:
            assert getattr(cache, name)(l) is record[intermediate_key(name, l)]
    for name in FINAL_INTERMEDIATES:
        assert getattr(cache, name) is record[name]


def test_recording_on_the_fused_path_keeps_everything_but_A():
    model = GPT(COURSE_CONFIG.replace(L=1)).eval()
    idx = torch.randint(0, 65, (1, 6))
    with recording(model, {}) as fused:
        model(idx)
    with recording(model, {}) as formed, attention_matrices_formed(model):
        model(idx)
    assert sorted(fused) == sorted(k for k in formed if k != intermediate_key("A", 0))


def test_a_missing_name_is_told_apart_from_a_missing_layer():
    model = GPT(GPTConfig(L=2, attn_only=True)).eval()
    _, cache = run_with_cache(model, torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="no ln_2 in layer 0: this run recorded only X, ln_1, A, attn_write, Y there"):
        cache.ln_2(0)
    with pytest.raises(ValueError, match=r"no ln_1 for layer 2: this model has layers 0..1"):
        cache.ln_1(2)
    with pytest.raises(ValueError, match="layer l must be an integer, got True"):
        cache.X(True)
    with recording(model, {}) as fused:
        model(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="no A in layer 1: .* A is there only when the attention matrices were formed"):
        Cache(fused).A(1)


def test_recording_needs_a_gptlib_model_and_a_dict(course_model):
    with pytest.raises(ValueError, match="module must be a gptlib GPT or block, got Linear"):
        recording(torch.nn.Linear(2, 2), {}).__enter__()
    with pytest.raises(ValueError, match="into must be a dict, got list"):
        recording(course_model, []).__enter__()


def test_shape_table_lines_up_symbol_shape_and_meaning():
    rows = [("x", torch.zeros(5, dtype=torch.long), "ids"), ("A^(0)", torch.zeros(1, 4, 5, 5), "one per head")]
    lines = shape_table(rows, width=8).splitlines()
    assert lines == ["x       (5,)              ids", "A^(0)   (1, 4, 5, 5)      one per head"]
    assert shape_table(rows).splitlines()[1].index("(1, 4") == 22  # the default symbol column


# Every public function of gptlib.analysis whose first parameter is `model`, called on a small GPT with
# otherwise sensible arguments (a finite twin's cache and writes where one is read). The table must name
# exactly the functions found (test_the_table_names_every_model_reader), so a new reader cannot skip it.
READER_SIZES = GPTConfig(V=65, T_max=8, d=16, H=2, L=2)
READER_IDS = torch.tensor([[3, 1, 4, 5, 3, 1, 4, 5]])  # (1, 8): n = 4 tokens said twice


def _reader_calls(twin: GPT) -> dict:
    """{name: a call of that reader on a model}, with the cache and writes of `twin` where one is read."""
    from gptlib.analysis import attention, causality, cost, decomposition, induction, jacobians, patching, residual

    _, cache = run_with_cache(twin, READER_IDS)
    writes = decomposition.stream_writes(twin, READER_IDS)
    ids, row = READER_IDS, READER_IDS[0]
    return {
        "attention.forward_scores": lambda m: attention.forward_scores(m, cache, 0),
        "attention.head_ranks": lambda m: attention.head_ranks(m, cache),
        "attention.gauge_transform": lambda m: attention.gauge_transform(m, 0, 0),
        "cache.run_with_cache": lambda m: run_with_cache(m, ids),
        "causality.perturbation_map": lambda m: causality.perturbation_map(m, row),
        "causality.gradient_map": lambda m: causality.gradient_map(m, row),
        "cost.seconds_per_token": lambda m: cost.seconds_per_token(m, (4,), tokens=8, rounds=1),
        "decomposition.stream_writes": lambda m: decomposition.stream_writes(m, ids),
        "decomposition.logit_pieces": lambda m: decomposition.logit_pieces(m, writes),
        "decomposition.direct_logit_attribution": lambda m: decomposition.direct_logit_attribution(m, row, 2, 1),
        "decomposition.logit_lens": lambda m: decomposition.logit_lens(m, ids, ids),
        "induction.half_losses": lambda m: induction.half_losses(m, ids),
        "induction.head_scores": lambda m: induction.head_scores(m, ids),
        "induction.full_ov_eigenvalues": lambda m: induction.full_ov_eigenvalues(m, 0, 0),
        "induction.k_composition": lambda m: induction.k_composition(m),
        "jacobians.layer_gradient_norms": lambda m: jacobians.layer_gradient_norms(m, ids, ids),
        "patching.logits_from_writes": lambda m: patching.logits_from_writes(m, writes),
        "patching.ablation_effects": lambda m: patching.ablation_effects(m, ids, torch.tensor([5]), ids[:, :1]),
        "patching.patching_restoration": lambda m: patching.patching_restoration(m, ids, ids.flip(1), lambda Z: Z.mean()),
        "residual.injected_direction_readout": lambda m: residual.injected_direction_readout(m, ids, torch.ones(16)),
        "residual.block_drop_losses": lambda m: residual.block_drop_losses(m, ids, ids),
    }


# Functions taking a model that read no weight value, and why they take any model.
READS_NO_WEIGHT = {
    "attention.attention_input": "picks a cached tensor by the config's norm",
    "counting.component_table": "counts shapes: a meta-device model (GPT-3's) is its point",
    "decomposition.write_labels": "labels from the config",
    "decomposition.ln_f_scale": "reads LN_f's eps and the stream it is given",
    "decomposition.check_model": "the guard itself",
    "cache.screened": "the guard itself",
}


def _model_readers() -> list[str]:
    """'module.function' for every public function of gptlib.analysis whose first parameter is named `model`."""
    import importlib
    import inspect
    import pkgutil

    import gptlib.analysis

    found = []
    for info in pkgutil.iter_modules(gptlib.analysis.__path__):
        module = importlib.import_module(f"gptlib.analysis.{info.name}")
        for name, fn in vars(module).items():
            if not name.startswith("_") and inspect.isfunction(fn) and fn.__module__ == module.__name__ \
                    and list(inspect.signature(fn).parameters)[:1] == ["model"]:
                found.append(f"{info.name}.{name}")
    return sorted(found)


def test_the_table_names_every_model_reader():
    readers = _model_readers()
    assert len(readers) > 20
    assert sorted([*_reader_calls(GPT(READER_SIZES)), *READS_NO_WEIGHT]) == readers


@pytest.mark.parametrize("weight, value", [("blocks.1.attn.W_Q", float("nan")), ("E", float("inf")),
                                           ("ln_f.beta", float("-inf"))])
def test_every_model_reader_refuses_a_non_finite_weight_naming_it(weight, value):
    """The fused kernel of the model's own forward gives finite logits for a NaN query weight, the explicit
    path (A^h formed) NaN ones: every analysis refuses such a model, naming the weight, before it reads it."""
    twin = GPT(READER_SIZES)
    model = copy.deepcopy(twin)
    with torch.no_grad():
        model.get_parameter(weight).view(-1)[0] = value
    before = {name: p.clone() for name, p in model.named_parameters()}
    words = rf"^model's weights must be finite, got 1 NaN or inf values in {weight}$"
    for name, call in _reader_calls(twin).items():
        with pytest.raises(ValueError, match=words):
            call(model)
    assert all(torch.equal(p, before[name]) or name == weight for name, p in model.named_parameters())


def test_every_model_reader_refuses_what_is_not_a_gptlib_gpt():
    for name, call in _reader_calls(GPT(READER_SIZES)).items():
        for thing in ("gpt", torch.nn.Linear(2, 2)):
            with pytest.raises(ValueError, match=f"^model must be a gptlib GPT, got {type(thing).__name__}$"):
                call(thing)


def test_every_model_reader_still_reads_a_finite_model():
    model = GPT(READER_SIZES)
    for call in _reader_calls(model).values():
        call(model)
