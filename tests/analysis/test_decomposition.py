"""gptlib.analysis.decomposition: the stream as a sum of writes, and the logits as a sum of direct contributions.

The references are the model's own forward pass (cache.X(L), the logits Z) and closed forms; each
check is paired with a broken decomposition (a write missing, one counted twice, a wrong LN_f scale)
that the same tolerance must reject.
"""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from benchmarks.peers import scrambled_model
from gptlib import COURSE_CONFIG, GPT, GPTConfig, data, pretrained, run_with_cache
from gptlib.analysis.decomposition import (
    StreamWrites,
    attribution_from,
    decomposition_gap,
    direct_logit_attribution,
    ln_f_scale,
    logit_lens,
    logit_pieces,
    stream_writes,
    write_labels,
)
from gptlib.model import attention_matrices_formed

TOLERANCE = 1e-5  # max |sum - Z| / (1 + max |Z|) in float32
MODELS = {
    "course, scrambled": lambda: scrambled_model(COURSE_CONFIG),  # every gain and bias nonzero and not 1
    "tied, scrambled": lambda: scrambled_model(GPTConfig(V=50, T_max=32, d=64, H=2, L=2, tie_weights=True)),
    "shakespeare": lambda: pretrained.load_pretrained("shakespeare"),
    "induction": lambda: pretrained.load_pretrained("induction"),  # attention only: no MLP writes
}


def tokens(model: GPT, B: int = 2) -> torch.Tensor:
    return torch.randint(0, model.config.V, (B, model.config.T_max))  # (B, T)


@pytest.mark.parametrize("name", list(MODELS))
def test_the_writes_sum_to_the_final_stream_and_their_pieces_to_the_logits(name):
    model = MODELS[name]()
    idx = tokens(model)
    Z, cache = run_with_cache(model, idx)
    writes = stream_writes(model, idx)
    L = model.config.L
    assert writes.labels == write_labels(model)
    assert len(writes.labels) == 2 + L * (model.config.H + 1 + (not model.config.attn_only))
    assert decomposition_gap(cache.X(L), writes.final_stream) <= TOLERANCE
    assert decomposition_gap(Z, logit_pieces(model, writes).total) <= TOLERANCE


def broken(writes: StreamWrites, change: str) -> StreamWrites:
    stack = writes.stack
    head = writes.labels.index("L1H2")
    if change == "a head missing":
        stack = torch.cat([stack[:head], stack[head + 1 :]])
    elif change == "a head counted twice":
        stack = torch.cat([stack, stack[head : head + 1]])
    labels = writes.labels[: len(stack)] + ("L1H2",) * (len(stack) - len(writes.labels))  # one label per write
    return StreamWrites(labels, stack)


@pytest.mark.parametrize("change", ["a head missing", "a head counted twice"])
def test_a_missing_or_doubled_write_breaks_the_sum(change):
    model = pretrained.load_pretrained("shakespeare")
    idx = tokens(model)
    Z, cache = run_with_cache(model, idx)
    writes = broken(stream_writes(model, idx), change)
    assert decomposition_gap(cache.X(model.config.L), writes.final_stream) > 100 * TOLERANCE
    assert decomposition_gap(Z, logit_pieces(model, writes, scale=None).total) > 100 * TOLERANCE


def test_a_wrong_ln_f_scale_breaks_the_sum():
    model = pretrained.load_pretrained("shakespeare")
    idx = tokens(model)
    Z = model(idx)
    writes = stream_writes(model, idx)
    assert decomposition_gap(Z, logit_pieces(model, writes, scale=torch.tensor(1.0)).total) > 100 * TOLERANCE
    # LN_f applied to each write on its own: each gets its own scale, and the pieces stop adding up
    per_write = (model.ln_f(writes.stack) - model.ln_f.beta) @ model.unembedding  # (n, B, T, V)
    assert decomposition_gap(Z, per_write.sum(0) + model.ln_f.beta @ model.unembedding) > 100 * TOLERANCE


def test_pieces_follow_the_closed_form_of_ln_f_with_frozen_scale():
    model = scrambled_model(COURSE_CONFIG).double()
    idx = tokens(model, B=1)
    writes = stream_writes(model, idx)
    X = writes.final_stream
    s = torch.sqrt(X.var(dim=-1, unbiased=False, keepdim=True) + model.ln_f.eps)  # (B, T, 1)
    C = torch.eye(model.config.d, dtype=torch.float64) - 1 / model.config.d  # the centring projection
    w = writes["L2 MLP"]
    expected = (w @ C) * model.ln_f.gamma / s @ model.W_U
    assert torch.allclose(logit_pieces(model, writes).direct[writes.labels.index("L2 MLP")], expected, atol=1e-12)
    assert decomposition_gap(model(idx), logit_pieces(model, writes).total) <= 1e-12  # float64: exact to rounding


def test_replacing_a_write_by_zeros_equals_zeroing_its_weights():
    """An ablation computed a second way: W_O^h's rows (or W_2 and b_2) set to 0 in a copy, run by the model itself."""
    model = scrambled_model(COURSE_CONFIG)
    idx = tokens(model)
    zero = torch.zeros(model.config.d)
    for label, weights in [("L1H2", lambda m: m.blocks[1].attn.W_O_head(2)),
                           ("L0 MLP", lambda m: m.blocks[0].mlp.W_2), ("L3 b_O", lambda m: m.blocks[3].attn.b_O)]:
        edited = copy.deepcopy(model)
        with torch.no_grad():
            weights(edited).zero_()
            if label == "L0 MLP":
                edited.blocks[0].mlp.b_2.zero_()
        ablated = logit_pieces(model, stream_writes(model, idx, replace={label: zero})).total
        assert decomposition_gap(edited(idx), ablated) <= TOLERANCE
        assert decomposition_gap(model(idx), ablated) > 100 * TOLERANCE  # the ablation did change the logits


def test_direct_logit_attribution_adds_up_to_the_logit_and_to_a_difference():
    model = pretrained.load_pretrained("shakespeare")
    idx = data.encode("First Citizen:\nWe are accounted poor citizens.")
    Z = model(idx)  # (T, V)
    t, token, other = 20, int(Z[20].argmax()), data.encode("z").item()
    single = direct_logit_attribution(model, idx, t, token)
    assert single.logit == pytest.approx(Z[t, token].item(), abs=1e-5)
    assert single.values.sum().item() + single.rest == pytest.approx(single.logit, abs=1e-4)
    difference = direct_logit_attribution(model, idx, t, token, against=other)
    assert difference.logit == pytest.approx((Z[t, token] - Z[t, other]).item(), abs=1e-5)
    assert difference.of("L3 MLP") == pytest.approx(single.of("L3 MLP") - direct_logit_attribution(
        model, idx, t, other).of("L3 MLP"), abs=1e-5)


def test_the_logit_lens_ends_at_the_model_and_starts_at_the_embeddings():
    model = pretrained.load_pretrained("shakespeare")
    idx, targets = tokens(model), tokens(model)
    lens = logit_lens(model, idx, targets)
    assert lens.loss.shape == (model.config.L + 1,)
    _, loss = model(idx, targets)
    assert lens.loss[-1].item() == pytest.approx(loss.item(), abs=1e-5)
    Z0 = model.ln_f(model.embed(idx)) @ model.W_U  # depth 0: the embeddings read out directly
    assert lens.loss[0].item() == pytest.approx(F.cross_entropy(Z0.flatten(0, 1), targets.flatten()).item(), abs=1e-5)


@pytest.mark.parametrize(
    "call, rule",
    [
        (lambda m, idx: stream_writes(GPT(COURSE_CONFIG.replace(norm="post")), idx), "pre-norm"),
        (lambda m, idx: stream_writes(m, idx, replace={"L9H0": torch.zeros(128)}), "L9H0"),
        (lambda m, idx: direct_logit_attribution(m, idx, 64, 0), "position"),
        (lambda m, idx: direct_logit_attribution(m, idx, 3, 65), "token"),
        (lambda m, idx: direct_logit_attribution(m, idx.view(2, 32), 3, 1), r"one sequence"),
        (lambda m, idx: logit_lens(m, idx, idx[:-1]), "targets"),
    ],
)
def test_bad_input_is_refused_naming_the_rule(call, rule):
    model = GPT(COURSE_CONFIG)
    with pytest.raises(ValueError, match=rule):
        call(model, torch.randint(0, 65, (64,)))


@pytest.mark.slow
def test_transformer_lens_agrees_on_logits_head_attribution_and_the_lens():
    """TransformerLens's own decomposition on the trained course model (where the bench extra installed it).

    Its attributions read the unembedding after LN_f's scale only, so LN_f's gain and bias are folded
    into W_U and b_U first, as its fold_ln does: an equivalent model (its logits are checked too).
    """
    pytest.importorskip("transformer_lens", reason="TransformerLens comes with the bench extra (make bench)")
    from gptlib.export import to_transformer_lens

    model = pretrained.load_pretrained("shakespeare")
    tl = to_transformer_lens(model)
    with torch.no_grad():
        tl.unembed.W_U.mul_(model.ln_f.gamma[:, None])  # diag(gamma) W_U
        tl.unembed.b_U.copy_(model.ln_f.beta @ model.W_U)  # beta W_U
        tl.ln_final.w.fill_(1.0)
        tl.ln_final.b.zero_()
    idx = data.encode("First Citizen:\nWe are accounted poor citizens.").unsqueeze(0)  # (1, T)
    with torch.no_grad():
        Z, cache = tl.run_with_cache(idx)
        assert decomposition_gap(model(idx), Z) <= TOLERANCE
        writes = stream_writes(model, idx)
        pieces = logit_pieces(model, writes)
        heads, labels = cache.stack_head_results(layer=-1, return_labels=True)  # (16, 1, T, d), raw writes
        predicted = Z[0].argmax(dim=-1)  # (T,)
        theirs = cache.logit_attrs(heads, tokens=predicted.unsqueeze(0))  # (16, 1, T): it applies LN_f's scale
        ours = torch.stack([pieces.direct[writes.labels.index(label)] for label in labels])  # (16, 1, T, V)
        ours = ours.gather(-1, predicted.view(1, 1, -1, 1).expand(len(labels), 1, -1, 1)).squeeze(-1)
        assert labels == [label for label in writes.labels if "H" in label]
        assert decomposition_gap(theirs, ours) <= TOLERANCE
        layers, _ = cache.decompose_resid(layer=-1, apply_ln=True, return_labels=True)  # embed, pos, attn, mlp...
        assert decomposition_gap(Z, tl.unembed(layers.sum(dim=0))) <= TOLERANCE
        lens_tl = tl.unembed(cache.accumulated_resid(apply_ln=True))  # (L + 1, 1, T, V)
        lens_loss = [F.cross_entropy(z[0, :-1], idx[0, 1:]).item() for z in lens_tl]
        ours_lens = logit_lens(model, idx[:, :-1], idx[:, 1:]).loss
        assert ours_lens.tolist() == pytest.approx(lens_loss, abs=1e-4)


# --- What the readers refuse: each message names the argument and the rule it breaks ---------------

SMALL = GPTConfig(T_max=16, d=12, H=3, L=2)


@pytest.fixture(scope="module")
def small():
    torch.manual_seed(0)
    return GPT(SMALL).eval()


def small_ids() -> torch.Tensor:
    return data.encode("abcdef")  # (6,)


def test_a_reader_given_something_that_is_not_a_gpt_names_the_rule(small):
    idx, writes = small_ids(), stream_writes(small, small_ids())
    for call in (lambda m: stream_writes(m, idx), lambda m: logit_pieces(m, writes),
                 lambda m: direct_logit_attribution(m, idx, 0, 1), lambda m: logit_lens(m, idx, idx)):
        for model in ("gpt", small.state_dict(), torch.nn.Linear(12, 65)):
            with pytest.raises(ValueError, match=f"^model must be a gptlib GPT, got {type(model).__name__}$"):
                call(model)


@pytest.mark.parametrize("writes, words", [
    ("writes", r"writes must be a StreamWrites \(decomposition.stream_writes\), got str"),
    (StreamWrites(("E[x]",), torch.zeros(1, 1, 6, 8)), r"writes must be a stack \(n, B, T, d\) of this model's "
                                                       r"dtype torch.float32 with d = 12, got shape \(1, 1, 6, 8\)"),
    (StreamWrites(("E[x]",), torch.zeros(1, 6, 12)), r"with d = 12, got shape \(1, 6, 12\)"),
    (StreamWrites(("E[x]",), torch.zeros(1, 1, 6, 12, dtype=torch.float64)), "torch.float32 .* got dtype torch.float64"),
    (StreamWrites(("E[x]", "P"), torch.zeros(1, 1, 6, 12)), r"writes must have one label per write, got 2 labels for 1"),
])
def test_logit_pieces_refuses_writes_of_another_width_or_kind(small, writes, words):
    with pytest.raises(ValueError, match=words):
        logit_pieces(small, writes)


def test_writes_of_a_model_of_another_width_are_refused_by_the_model_reading_them(small):
    torch.manual_seed(1)
    narrow = GPT(SMALL.replace(d=8, H=2))
    with pytest.raises(ValueError, match=r"with d = 8, got shape \(12, 1, 6, 12\)"):
        logit_pieces(narrow, stream_writes(small, small_ids()))


@pytest.mark.parametrize("scale, words", [
    (torch.ones(3), r"scale must be LN_f's s, a floating-point tensor broadcastable to \(B, T, 1\) = \(1, 6, 1\), "
                    r"got shape \(3,\)"),
    (torch.ones(1, 6, 12), r"got shape \(1, 6, 12\)"),
    (torch.ones(2, 6, 1), r"got shape \(2, 6, 1\)"),
    (torch.ones(1, 6, 1, dtype=torch.int64), "got dtype torch.int64"),
    (2.0, "got float"),
])
def test_logit_pieces_refuses_a_scale_of_the_wrong_shape(small, scale, words):
    writes = stream_writes(small, small_ids())
    with pytest.raises(ValueError, match=words):
        logit_pieces(small, writes, scale=scale)


def test_a_scale_that_broadcasts_is_used_as_given(small):
    writes = stream_writes(small, small_ids())
    s = ln_f_scale(small, writes.final_stream)  # (1, 6, 1)
    for scale in (s, s[0], s.squeeze(-1).unsqueeze(-1)):
        assert torch.equal(logit_pieces(small, writes, scale=scale).direct, logit_pieces(small, writes).direct)


@pytest.mark.parametrize("bad", [math.nan, 0.0, -1.0, math.inf, -0.0])
def test_logit_pieces_refuses_a_scale_that_is_not_finite_and_positive(small, bad):
    """s = sqrt(sigma^2 + eps) > 0: a NaN, zero, negative or infinite s would divide the pieces silently."""
    writes = stream_writes(small, small_ids())
    scale = ln_f_scale(small, writes.final_stream).clone()  # (1, 6, 1)
    scale[0, 4, 0] = bad
    words = rf"^scale \(LN_f's s\) must be finite and > 0 in every entry, got {bad} at \(0, 4, 0\)$"
    with pytest.raises(ValueError, match=words):
        logit_pieces(small, writes, scale=scale)
    with pytest.raises(ValueError, match=r"must be finite and > 0 in every entry, got nan at \(0, 0\)$"):
        logit_pieces(small, writes, scale=torch.full((6, 1), math.nan))  # a scale that broadcasts: its own index


@pytest.mark.parametrize("arguments, words", [
    (dict(position=-1, token=1), r"^position must be an integer in \[0, 5\], got -1$"),
    (dict(position=6, token=1), r"^position must be an integer in \[0, 5\], got 6$"),
    (dict(position=2, token=-1), r"^token must be an integer in \[0, 64\], got -1$"),
    (dict(position=2, token=65), r"^token must be an integer in \[0, 64\], got 65$"),
    (dict(position=2, token=1, against=-65), r"^against must be an integer in \[0, 64\], got -65$"),
    (dict(position=2, token=1, row=-1), r"^row must be an integer in \[0, 0\], got -1$"),
    (dict(position=2, token=1, row=1), r"^row must be an integer in \[0, 0\], got 1$"),
    (dict(position=2.0, token=1), r"^position must be an integer in \[0, 5\], got 2.0$"),
])
def test_attribution_from_refuses_a_place_outside_the_run(small, arguments, words):
    """No negative index is read from the end, and none past the end raises a bare IndexError."""
    idx = small_ids()
    pieces, Z = logit_pieces(small, stream_writes(small, idx)), small(idx.unsqueeze(0))
    with pytest.raises(ValueError, match=words):
        attribution_from(pieces, Z, **arguments)


def test_attribution_from_refuses_pieces_and_logits_of_two_runs(small):
    idx = small_ids()
    pieces = logit_pieces(small, stream_writes(small, idx))
    words = r"^Z must be the run's logits of shape \(B, T, V\) = \(1, 6, 65\), got shape \(6, 65\)$"
    with pytest.raises(ValueError, match=words):
        attribution_from(pieces, small(idx), 2, 1)
    with pytest.raises(ValueError, match=r"^pieces must be a LogitPieces \(decomposition.logit_pieces\), got tuple$"):
        attribution_from((), small(idx.unsqueeze(0)), 2, 1)


@pytest.mark.parametrize("replace, words", [
    ({"P": torch.zeros(5)}, r"replace\['P'\] must be a tensor of the model's dtype torch.float32 broadcastable to "
                            r"\(B, T, d\) = \(1, 6, 12\), got shape \(5,\)"),
    ({"P": torch.zeros(2, 6, 12)}, r"got shape \(2, 6, 12\)"),
    ({"P": torch.zeros(1, 1, 6, 12)}, r"got shape \(1, 1, 6, 12\)"),
    ({"P": [0.0] * 12}, r"replace\['P'\] must be a tensor .* got list"),
    ({"P": torch.zeros(12, dtype=torch.float64)}, r"replace\['P'\] must be a tensor of the model's dtype "
                                                  r"torch.float32 .* got dtype torch.float64"),
    ({"P": torch.zeros(12, dtype=torch.int64)}, "got dtype torch.int64"),
    ([("P", torch.zeros(12))], r"replace must be a mapping \{label: tensor\} or None, got list"),
    ("P", r"replace must be a mapping \{label: tensor\} or None, got str"),
    ({0: torch.zeros(12), "L7H0": torch.zeros(12)}, "replace names writes this model does not make: 0, 'L7H0'"),
])
def test_stream_writes_refuses_a_replacement_that_is_not_a_write_of_this_run(small, replace, words):
    with pytest.raises(ValueError, match=words):
        stream_writes(small, small_ids(), replace=replace)


def test_every_replacement_shape_that_broadcasts_to_one_write_is_taken(small):
    idx = small_ids().unsqueeze(0)  # (1, 6)
    write = stream_writes(small, idx)["L0H1"]  # (1, 6, 12)
    for replacement in (write, write[0], torch.zeros(12), torch.zeros(1, 1, 12)):
        assert torch.equal(stream_writes(small, idx, replace={"L0H1": replacement})["L0H1"],
                           replacement.expand(1, 6, 12))


@pytest.mark.parametrize("call, words", [
    (lambda m, idx: logit_lens(m, idx, torch.full((6,), 70)), r"^targets must lie in \[0, V\) = \[0, 65\), got 70"),
    (lambda m, idx: logit_lens(m, torch.full((6,), 70), idx), r"^idx must lie in \[0, V\)"),
    (lambda m, idx: logit_lens(m, idx, idx.float()), "^targets must have an integer dtype"),
])
def test_messages_name_the_argument_that_breaks_the_rule(small, call, words):
    with pytest.raises(ValueError, match=words):
        call(small, small_ids())


def nan_model(value: float = math.nan) -> GPT:
    torch.manual_seed(0)
    model = GPT(SMALL).eval()
    with torch.no_grad():
        model.blocks[1].attn.W_Q[0, 0, 0] = value
    return model


def test_a_nan_weight_gives_two_answers_so_readers_refuse_it():
    """Why the rule: the fused attention kernel turns a NaN query row into finite logits, the explicit path
    (A^h formed, as run_with_cache, which the writes follow) into NaN. One model, two answers."""
    model, idx = nan_model(), small_ids()
    with attention_matrices_formed(model):
        explicit = model(idx)
    assert explicit.isnan().all() and model(idx).isfinite().all()
    with pytest.raises(ValueError, match=r"^model's weights must be finite, got 1 NaN or inf values in blocks.1.attn.W_Q$"):
        run_with_cache(model, idx)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_every_reader_refuses_a_model_with_non_finite_weights_naming_the_weight(small, value):
    model, idx = nan_model(value), small_ids()
    writes = stream_writes(small, idx)  # another model's: the check is on the model, before the writes are read
    words = r"^model's weights must be finite, got 1 NaN or inf values in blocks.1.attn.W_Q$"
    for call in (lambda: stream_writes(model, idx), lambda: logit_pieces(model, writes),
                 lambda: direct_logit_attribution(model, idx, 2, 1), lambda: logit_lens(model, idx, idx)):
        with pytest.raises(ValueError, match=words):
            call()


def test_a_model_on_the_meta_device_is_refused():
    with torch.device("meta"):
        model = GPT(SMALL)
    with pytest.raises(ValueError, match="model must hold real weights, got E on the meta device"):
        stream_writes(model, small_ids())


def test_labels_and_gaps_name_what_they_were_given(small):
    with pytest.raises(ValueError, match="^model must be a gptlib GPT, got str$"):
        write_labels("gpt")
    Z = torch.zeros(1, 6, 65)
    with pytest.raises(ValueError, match=r"^Z and total must have one shape, got \(1, 6, 65\) and \(6, 65\)$"):
        decomposition_gap(Z, Z[0])
    with pytest.raises(ValueError, match="^total must be a non-empty floating-point tensor, got list$"):
        decomposition_gap(Z, [0.0])
