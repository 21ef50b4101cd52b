"""gptlib.export: a gptlib GPT (ours, or a learner's adopted) as Hugging Face GPT-2 and TransformerLens,
each with logits equal to gptlib's, the layouts as the docstring names them; absent packages named."""

import importlib.util
import subprocess
import sys

import pytest
import torch

from benchmarks.peers import scrambled_model
from gptlib import GPT, GPTConfig, adopt
from gptlib.checking import TOL
from gptlib.exercises.answers import build as S
from gptlib.export import to_huggingface, to_transformer_lens

CONFIG = GPTConfig(V=29, T_max=12, d=24, H=3, L=2, d_ff=40, ln_eps=1e-6)
HAS_TL = importlib.util.find_spec("transformer_lens") is not None
NO_TL = "TransformerLens is installed by `make bench` (the bench extra, then transformer-lens --no-deps)"


def logits_gap(gpt: GPT, peer, B: int = 3, T: int = 7) -> float:
    """max |gptlib - peer| relative to the build tolerance's scale, on ids other than the export's own proof."""
    idx = torch.randint(0, gpt.config.V, (B, T), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        ours, out = gpt(idx), peer(idx)
    theirs = out.logits if hasattr(out, "logits") else out
    return ((theirs - ours).abs().max() / (TOL * (1 + ours.abs().max()))).item()


def learners_gpt() -> GPT:
    torch.manual_seed(3)
    return adopt(S.GPT(CONFIG.V, CONFIG.T_max, CONFIG.d, CONFIG.H, CONFIG.L, CONFIG.d_ff), CONFIG.replace(ln_eps=1e-5))


MODELS = {"scrambled": lambda: scrambled_model(CONFIG), "tied": lambda: scrambled_model(CONFIG.replace(tie_weights=True)),
          "a learner's, adopted": learners_gpt}


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_hugging_face_gpt2_gives_the_same_logits_in_its_layout(make):
    gpt = make()
    hf = to_huggingface(gpt)
    assert logits_gap(gpt, hf) <= 1
    block, theirs = gpt.blocks[1], hf.transformer.h[1]
    assert torch.equal(theirs.attn.c_proj.weight, block.attn.W_O)  # Conv1D: (in, out), W_O as it is
    assert torch.equal(theirs.mlp.c_fc.weight, block.mlp.W_1.T)
    assert torch.equal(theirs.attn.c_attn.weight[:, : CONFIG.d_head], block.attn.W_Q[0])  # [W_Q^1 | ... | W_V^H]
    assert not theirs.attn.c_attn.bias.any() and not theirs.attn.c_attn.bias.requires_grad
    assert hf.config.activation_function == "gelu"  # exact, not GPT-2's tanh "gelu_new"


@pytest.mark.skipif(not HAS_TL, reason=NO_TL)
@pytest.mark.parametrize("make", [MODELS["scrambled"], MODELS["a learner's, adopted"]], ids=["scrambled", "adopted"])
def test_transformer_lens_gives_the_same_logits_in_its_layout(make):
    gpt = make()
    tl = to_transformer_lens(gpt)
    assert logits_gap(gpt, tl) <= 1
    attn = gpt.blocks[0].attn
    assert torch.equal(tl.blocks[0].attn.W_O[1], attn.W_O_head(1))  # W_O split per head, (H, d_head, d)
    assert torch.equal(tl.blocks[0].attn.W_Q, attn.W_Q)  # nothing folded
    assert torch.equal(tl.blocks[0].ln1.w, gpt.blocks[0].ln_1.gamma)


@pytest.mark.skipif(HAS_TL, reason="TransformerLens is installed here: its absence cannot be seen")
def test_without_transformer_lens_the_call_says_how_to_install_it():
    with pytest.raises(ImportError, match="make bench"):
        to_transformer_lens(scrambled_model(CONFIG))


@pytest.mark.slow  # a fresh interpreter
def test_without_transformers_the_call_names_the_export_extra():
    # a fresh interpreter in which `import transformers` fails, as where the package is not installed
    code = ("import sys; sys.modules['transformers'] = None\n"
            "from gptlib import GPT, GPTConfig\nfrom gptlib.export import to_huggingface\n"
            "try:\n    to_huggingface(GPT(GPTConfig(V=5, T_max=4, d=8, H=2, L=1)))\n"
            "except ImportError as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.startswith("ModuleNotFoundError") and "gptlib-lecture5[export]" in out


@pytest.mark.parametrize("call, gpt, error, rule", [
    (to_huggingface, lambda: S.GPT(5, 4, 8, 2, 1, 32), TypeError, "gptlib.adopt turns your own model into one"),
    (to_transformer_lens, lambda: "model", TypeError, "gpt must be a gptlib GPT"),
    (to_huggingface, lambda: GPT(CONFIG.replace(norm="post")), ValueError, "only pre-norm"),
    (to_transformer_lens, lambda: GPT(CONFIG.replace(tie_weights=True)), ValueError, "no tied unembedding"),
])
def test_what_cannot_be_exported_is_refused_by_name(call, gpt, error, rule):
    with pytest.raises(error, match=rule):
        call(gpt())


@pytest.mark.parametrize("call", [to_huggingface, to_transformer_lens])
def test_a_non_finite_weight_is_refused_by_name_before_anything_is_built(call):
    """The fused kernel gives finite logits for a NaN query weight and the peer's path NaN ones: neither is exported."""
    gpt = GPT(CONFIG)
    with torch.no_grad():
        gpt.blocks[0].attn.W_Q[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"^gpt's weights must be finite, got 1 NaN or inf values in blocks.0.attn.W_Q$"):
        call(gpt)
