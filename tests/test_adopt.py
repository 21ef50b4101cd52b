"""gptlib.adopt: a learner's GPT, in every layout the build checkers accept, read into gptlib's GPT and
proven by its logits; models that are not the lecture's GPT, and bad input, refused by name, the
learner's model left as it was."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gptlib import GPT, GPTConfig, adopt, pretrained
from gptlib.analysis import decomposition, induction, patching
from gptlib.checking import TOL
from gptlib.exercises.answers import build as S
from tests.support import learner_gpts as layouts
from tests.support.learner_gpts import ScratchGPT

SIZES = dict(V=13, T_max=8, d=16, H=2, L=2, d_ff=64)
CONFIG = GPTConfig(**SIZES)


def snapshot(model: nn.Module) -> dict:
    """Everything of the learner's that adopt must leave alone: tensors, modes, grad flags."""
    named = {**dict(model.named_parameters()), **dict(model.named_buffers())}  # non-persistent buffers too
    return {"state": {k: v.detach().clone() for k, v in named.items()},
            "grads": {k: None if p.grad is None else p.grad.clone() for k, p in model.named_parameters()},
            "identity": [id(p) for p in model.parameters()],
            "modes": [m.training for m in model.modules()],
            "grad": [p.requires_grad for p in model.parameters()]}


def assert_unchanged(model: nn.Module, before: dict) -> None:
    after = snapshot(model)
    assert after["identity"] == before["identity"] and after["modes"] == before["modes"]
    assert after["grad"] == before["grad"]
    assert all((g is None) == (after["grads"][k] is None) and (g is None or torch.equal(g, after["grads"][k]))
               for k, g in before["grads"].items())
    assert before["state"].keys() == after["state"].keys()
    for k, v in before["state"].items():
        assert torch.equal(v, after["state"][k]) or (v.isnan() == after["state"][k].isnan()).all(), k


def assert_same_logits(adopted: GPT, learner: nn.Module, B: int, T: int) -> None:
    """Independently of adopt's own proof: other ids, another shape."""
    idx = torch.randint(0, adopted.config.V, (B, T), generator=torch.Generator().manual_seed(123))
    with torch.no_grad():
        theirs = learner.eval()(idx)
        theirs = theirs[0] if isinstance(theirs, tuple) else theirs
        ours = adopted(idx)
    assert (ours - theirs).abs().max() <= TOL * (1 + theirs.abs().max())


def with_mlp_attention(mlp=None, attn=None, sizes=SIZES) -> S.GPT:
    """The reference GPT of answers/build.py with every block's MLP or attention another class."""
    model = S.GPT(**{k: v for k, v in sizes.items()})
    for block in model.blocks:
        if mlp:
            block.mlp = mlp(sizes["d"], sizes["d_ff"])
        if attn:
            block.attn = attn(sizes["d"], sizes["H"])
    return model


ACCEPTED = {  # the build checkers' accepted layouts (tests/test_exercises_build.py), as whole GPTs
    "answers/build.py: per-head modules, X @ W": (lambda: S.GPT(**SIZES), CONFIG),
    "answers at init (std 0.02, heads near uniform)": (lambda: S.init_weights(S.GPT(**SIZES)), CONFIG),
    "heads with one nn.Linear(d, 3 d_head) each": (lambda: with_mlp_attention(attn=layouts.FusedHeadsAttention), CONFIG),
    "stacked (3, H, d_head, d) Q|K|V, LayerNorms in a list, E and P transposed":
        (lambda: layouts.TransposedGPT(**SIZES), CONFIG),
    "the same, tied": (lambda: layouts.TransposedGPT(**SIZES, tied=True), CONFIG.replace(tie_weights=True)),
    "the same, tied, V = d": (lambda: layouts.TransposedGPT(**dict(SIZES, V=16), tied=True),
                              GPTConfig(**dict(SIZES, V=16), tie_weights=True)),
    "nanoGPT-like: fused nn.Linear(d, 3d), nn.LayerNorm, nn.Sequential MLP": (lambda: ScratchGPT(**SIZES), CONFIG),
    "the same with separate query/key/value": (lambda: ScratchGPT(**SIZES, fused=False), CONFIG),
    "nanoGPT-like, tied": (lambda: ScratchGPT(**SIZES, tied=True), CONFIG.replace(tie_weights=True)),
    "the same with zero biases on Q, K, V": (lambda: zero_qkv_bias(ScratchGPT(**SIZES, qkv_bias=True)), CONFIG),
    "gptlib's own GPT": (lambda: GPT(CONFIG), CONFIG),
}


def zero_qkv_bias(model):
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv.bias.zero_()
    return model


@pytest.mark.parametrize("make, config", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_every_accepted_layout_is_adopted_with_equal_logits_and_nothing_changed(make, config):
    torch.manual_seed(0)
    learner = make().train()
    first, *_ = learner.parameters()
    first.requires_grad_(False)  # a frozen parameter stays frozen, a gradient stays where it was
    first.grad = torch.ones_like(first)
    before = snapshot(learner)
    adopted = adopt(learner, config)
    assert type(adopted) is GPT and adopted.config == config
    assert_unchanged(learner, before)
    assert_same_logits(adopted, learner, 4, config.T_max - 1)


def test_the_weights_land_where_the_lecture_puts_them_even_at_init():
    # at init (std 0.02) attention is nearly uniform, so W_Q and W_K swapped give nearly the same logits:
    # only a reading chosen on random weights, as the checkers choose it, puts each matrix in its place
    learner = S.init_weights(S.GPT(**SIZES))
    adopted = adopt(learner, CONFIG)
    for block, theirs in zip(adopted.blocks, learner.blocks):
        for h, head in enumerate(theirs.attn.heads):
            for name in ("W_Q", "W_K", "W_V"):
                assert torch.equal(getattr(block.attn, name)[h], getattr(head, name))
        assert torch.equal(block.attn.W_O, theirs.attn.W_O) and torch.equal(block.mlp.W_1, theirs.mlp.W_1.T)
        assert torch.equal(block.ln_2.gamma, theirs.ln_2.gamma)
    assert torch.equal(adopted.E, learner.E) and torch.equal(adopted.W_U, learner.W_U)


# ---- not the lecture's GPT: refused, what differs named ------------------------------------------


class PostNormBlock(S.Block):
    def forward(self, X):
        Y = self.ln_1(X + self.attn(X))
        return self.ln_2(Y + self.mlp(Y))


class TanhMLP(S.MLP):
    def forward(self, X):
        return F.gelu(X @ self.W_1 + self.b_1, approximate="tanh") @ self.W_2 + self.b_2


class ReluMLP(S.MLP):
    def forward(self, X):
        return torch.relu(X @ self.W_1 + self.b_1) @ self.W_2 + self.b_2


def post_norm():
    model = S.GPT(**SIZES)
    model.blocks = nn.ModuleList(PostNormBlock(16, 2, 64) for _ in range(2))
    return model


REFUSED = {
    "post-norm": (post_norm, CONFIG, "post-norm block"),
    "no biases": (lambda: ScratchGPT(**SIZES, linear_bias=False), CONFIG, "the shift beta of Definition 4.1; yours has: weight"),
    "tanh GELU, at init": (lambda: S.init_weights(with_mlp_attention(mlp=TanhMLP)), CONFIG, "tanh approximation"),
    "ReLU": (lambda: with_mlp_attention(mlp=ReluMLP), CONFIG, "you used ReLU"),
    "another head split, per-head modules": (lambda: S.GPT(**dict(SIZES, H=4)), CONFIG,
                                             "block 0's attn fails on its own: cannot tell your W_Q, W_K, W_V apart"),
    "another head split, one fused matrix": (lambda: ScratchGPT(**dict(SIZES, H=4)), CONFIG,
                                             "block 0's attn fails on its own"),
    "biases on Q, K, V": (lambda: ScratchGPT(**SIZES, qkv_bias=True), CONFIG,
                          "no place for, not all zero: qkv.bias (in every block)"),
    "tied, config untied": (lambda: layouts.TransposedGPT(**SIZES, tied=True), CONFIG, "ties W_U to E"),
    "untied, config tied": (lambda: S.GPT(**SIZES), CONFIG.replace(tie_weights=True), "has its own W_U"),
}


@pytest.mark.parametrize("make, config, named", REFUSED.values(), ids=REFUSED.keys())
def test_a_model_that_is_not_the_lectures_gpt_is_refused_by_name(make, config, named):
    torch.manual_seed(0)
    learner = make()
    before = snapshot(learner)
    with pytest.raises(ValueError, match="cannot adopt your model") as refused:
        adopt(learner, config)
    assert named in str(refused.value)
    assert_unchanged(learner, before)


def test_a_refused_difference_is_measured():
    learner = ScratchGPT(**SIZES, qkv_bias=True)
    with pytest.raises(ValueError, match=r"differ from yours by up to \d") as refused:
        adopt(learner, CONFIG)
    assert "tolerance 2e-05" in str(refused.value)


# ---- bad input: one clear error naming the rule, nothing of the learner's changed ------------------


class Raising(S.GPT):
    def forward(self, idx):
        raise RuntimeError("my forward is broken")


def with_nan():
    model = S.GPT(**SIZES)
    with torch.no_grad():
        model.blocks[1].mlp.W_2[0, 0] = math.nan
    return model


BAD = {
    "a class, not a module": (lambda: S.GPT, CONFIG, TypeError, "build your model first"),
    "not a module": (lambda: "my model", CONFIG, TypeError, "model must be an nn.Module"),
    "config not a GPTConfig": (lambda: S.GPT(**SIZES), dict(SIZES), TypeError, "config must be a GPTConfig"),
    "post-norm config": (lambda: S.GPT(**SIZES), CONFIG.replace(norm="post"), ValueError, "norm='pre'"),
    "wrong vocabulary size": (lambda: S.GPT(**SIZES), CONFIG.replace(V=65), ValueError, "config.V=65 is not"),
    "NaN weights": (with_nan, CONFIG, ValueError, "model's weights must be finite, got 1 NaN or inf values in blocks.1.mlp.W_2"),
    "float64": (lambda: S.GPT(**SIZES).double(), CONFIG, ValueError, "float32 on the CPU"),
    "another device": (lambda: S.GPT(**SIZES).to("meta"), CONFIG, ValueError,
                       "float32 on the CPU (the course's); E is torch.float32 on meta"),
    "forward raises": (lambda: Raising(**SIZES), CONFIG, ValueError, "raised RuntimeError: my forward is broken"),
}


@pytest.mark.parametrize("make, config, error, rule", BAD.values(), ids=BAD.keys())
def test_bad_input_gets_one_clear_error_and_nothing_is_changed(make, config, error, rule):
    learner = make()
    before = snapshot(learner) if isinstance(learner, nn.Module) and learner.E.device.type != "meta" else None
    with pytest.raises(error) as raised:
        adopt(learner, config)
    assert rule in str(raised.value)
    if before is not None:
        assert_unchanged(learner, before)


# ---- the course model written as a learner's: every reading of notebooks 08 and 10 the same ---------


def as_learner(course: GPT) -> S.GPT:
    """The shipped checkpoint's weights in answers/build.py's classes (X @ W, one module per head)."""
    c = course.config
    learner = S.GPT(c.V, c.T_max, c.d, c.H, c.L, c.d_ff)
    with torch.no_grad():
        for mine, ours in ((learner.E, course.E), (learner.P, course.P), (learner.W_U, course.W_U),
                           (learner.ln_f.gamma, course.ln_f.gamma), (learner.ln_f.beta, course.ln_f.beta)):
            mine.copy_(ours)
        for block, theirs in zip(learner.blocks, course.blocks):
            for h, head in enumerate(block.attn.heads):
                for name in ("W_Q", "W_K", "W_V"):
                    getattr(head, name).copy_(getattr(theirs.attn, name)[h])
            block.attn.W_O.copy_(theirs.attn.W_O)
            block.attn.b_O.copy_(theirs.attn.b_O)
            block.mlp.W_1.copy_(theirs.mlp.W_1.T)
            block.mlp.W_2.copy_(theirs.mlp.W_2.T)
            block.mlp.b_1.copy_(theirs.mlp.b_1)
            block.mlp.b_2.copy_(theirs.mlp.b_2)
            for ln in ("ln_1", "ln_2"):
                getattr(block, ln).gamma.copy_(getattr(theirs, ln).gamma)
                getattr(block, ln).beta.copy_(getattr(theirs, ln).beta)
    return learner


@pytest.fixture(scope="module")
def course_pair():
    course = pretrained.load_pretrained("shakespeare")
    return course, adopt(as_learner(course), course.config)


def same_reading(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if dataclasses.is_dataclass(a):
        return all(same_reading(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_reading(x, y) for x, y in zip(a, b))
    return a == b


def readings(model: GPT) -> dict:
    """The functions of notebooks 08 and 10 on the course model (the induction toy is attention-only, which
    no learner's Section 5 GPT is)."""
    from gptlib.viz.attention import attention_view

    line = "PETRUCHIO:\nWhy, how now, Kate! I hope thou art not mad:"
    idx = torch.tensor([model.config.V - 1 - (ord(c) % 40) for c in line[:40]])  # any valid ids, one sequence
    batch = torch.stack([idx, idx.flip(0)])
    targets = batch.roll(-1, dims=1)
    return {
        "attention_view": attention_view(model, line, layer=1, head=2),
        "induction.head_scores": induction.head_scores(model, induction.repeated_random_tokens(
            4, 20, model.config.V, torch.Generator().manual_seed(0))),
        "stream_writes": decomposition.stream_writes(model, batch),
        "direct_logit_attribution": decomposition.direct_logit_attribution(model, idx, 30, 5, against=7),
        "logit_lens": decomposition.logit_lens(model, batch, targets),
        "ablation_effects": patching.ablation_effects(model, batch, torch.tensor([10, 20]), targets[:, [10, 20]]),
        "patching_restoration": patching.patching_restoration(model, batch, batch.roll(5, dims=1),
                                                              lambda Z: Z[:, -1, 3].mean().item()),
    }


def test_the_adopted_course_model_gives_the_readings_of_notebooks_08_and_10(course_pair):
    course, adopted = course_pair
    assert all(torch.equal(v, adopted.state_dict()[k]) for k, v in course.state_dict().items())
    ours, theirs = readings(course), readings(adopted)
    different = [name for name in ours if not same_reading(ours[name], theirs[name])]
    assert not different


def test_the_explorers_take_an_adopted_model(course_pair):
    from gptlib.viz.attention import AttentionExplorer
    from gptlib.viz.stream import StreamExplorer

    course, adopted = course_pair
    text = "First Citizen:\nWe are accounted poor citizens."
    for explorer in (AttentionExplorer, StreamExplorer):
        assert same_reading(explorer(adopted, text=text).run, explorer(course, text=text).run)
