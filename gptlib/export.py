"""A gptlib GPT (the course's, or a learner's after gptlib.adopt) out to the ecosystem, each copy proven.

    hf = to_huggingface(gpt)       # transformers' GPT2LMHeadModel      pip install 'gptlib-lecture5[export]'
    tl = to_transformer_lens(gpt)  # TransformerLens' HookedTransformer  make bench (below)

Both copies compute the same function as `gpt` (Section 5: Z = LN_f(X^(L)) W_U), and each function
checks that they do: their logits on random token ids equal gptlib's within the build checkers'
tolerance (build.TOL x (1 + max |logit|)), or it raises. The conventions that differ from gptlib's:

- GELU: Definition 2.1 uses the exact t Phi(t). GPT-2's default activation "gelu_new" (and
  TransformerLens's "gelu_new") is the tanh approximation, up to 4.7e-4 away; the copies use
  "gelu", the exact erf form, in both libraries.
- Weight orientation: GPT-2's Conv1D computes x @ weight + bias with weight (in, out), so c_attn
  holds [W_Q | W_K | W_V] (d, 3d), each the heads side by side, c_proj.weight is W_O as it is
  (d, d), c_fc.weight = W_1^T (d, d_ff), mlp.c_proj.weight = W_2^T (d_ff, d); lm_head is an
  nn.Linear, weight W_U^T (V, d).
- W_O layout: gptlib's W_O is one (d, d) matrix acting on [C^1 | ... | C^H]; TransformerLens splits
  it per head, W_O (H, d_head, d), W_O[h] = rows h d_head .. (h+1) d_head. Its W_Q, W_K, W_V
  (H, d, d_head) are gptlib's; W_in = W_1^T, W_out = W_2^T.
- Biases gptlib has no place for (Theorem 5.2's count): GPT-2's c_attn bias and TransformerLens's
  b_Q, b_K, b_V, b_U are set to zero and frozen (requires_grad False), so training does not grow them.
- LayerNorm: the copies keep each LayerNorm's gain and shift as they are (TransformerLens's
  normalization_type "LN"). TransformerLens's from_pretrained folds them into the next weights by
  default (fold_ln=True, with center_writing_weights and center_unembed): its W_Q etc. then differ
  from gptlib's though the logits agree. Nothing is folded here, so tl.W_Q[l] is gptlib's
  blocks[l].attn.W_Q. eps is the config's ln_eps in both.
- Tied weights (Aside 5.3): GPT-2 ties lm_head to wte; HookedTransformer has no tied unembedding,
  so a tied GPT is refused there.
- Dropout is 0 in the GPT-2 copy, GPT-2's positions begin at 0 (no BOS token is prepended by
  TransformerLens: default_prepend_bos=False).

Only pre-norm, causal GPTs with an MLP in every block map onto these; other configs raise ValueError.
transformers comes with the `export` extra (and `test`, `bench`). TransformerLens 3.x (4.0 removed
HookedTransformer) is installed by `make bench`: the `bench` extra, then
`pip install --no-deps 'transformer-lens>=3,<4'` (its other dependencies are not needed here).
"""

from __future__ import annotations

import warnings

import torch

from . import validation
from .checking import TOL  # |theirs - ours| <= TOL x (1 + max |ours|): float32 rounding
from .config import GPTConfig
from .model import GPT


def check_mappable(config: GPTConfig) -> None:
    """Raise ValueError unless the config is one GPT-2 and HookedTransformer can express."""
    if config.norm != "pre":
        raise ValueError(f"only pre-norm blocks (Definition 3.1) map onto GPT-2, got norm={config.norm!r}")
    if not config.causal:
        raise ValueError("only causal attention maps onto GPT-2, got causal=False")
    if config.attn_only:
        raise ValueError("only blocks with an MLP map onto GPT-2, got attn_only=True")


def stacked_heads(W: torch.Tensor) -> torch.Tensor:
    """Per-head weights (H, d, d_head) -> (d, H * d_head) = [W^1 | ... | W^H]."""
    H, d, d_head = W.shape
    return W.permute(1, 0, 2).reshape(d, H * d_head)


def _gpt(gpt) -> GPT:
    if not isinstance(gpt, GPT):
        raise TypeError(f"gpt must be a gptlib GPT (gptlib.adopt turns your own model into one), got {type(gpt).__name__}")
    check_mappable(gpt.config)
    return validation.finite_weights(gpt, name="gpt")  # a NaN weight: the fused kernel and the peer's path disagree


def _missing(module: str, install: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(f"{module} is not installed: {install}", name=module)


@torch.no_grad()
def _proven(gpt: GPT, peer, what: str, seed: int = 0):
    """peer itself, if its logits equal gpt's on random ids (2, T_max) within TOL; ValueError otherwise."""
    idx = torch.randint(0, gpt.config.V, (2, gpt.config.T_max), generator=torch.Generator().manual_seed(seed))
    idx = idx.to(gpt.E.device)
    ours, out = gpt(idx), peer(idx)
    theirs = out.logits if hasattr(out, "logits") else out
    gap = (theirs.double() - ours.double()).abs().max().item()
    if not gap <= TOL * (1 + ours.abs().max().item()):
        raise ValueError(f"the {what} copy's logits differ from gptlib's by up to {gap:.2g}, more than the tolerance")
    return peer


def to_huggingface(gpt: GPT, attn_implementation: str = "sdpa"):
    """transformers' GPT2LMHeadModel (eval mode) computing the same logits as `gpt`, with a copy of its weights.
    attn_implementation="eager" is the path that can return attention matrices."""
    gpt = _gpt(gpt)
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as missing:
        raise _missing("transformers", "pip install 'gptlib-lecture5[export]'") from missing

    config = gpt.config
    hf_config = GPT2Config(
        vocab_size=config.V, n_positions=config.T_max, n_embd=config.d, n_head=config.H, n_layer=config.L,
        n_inner=config.d_ff,
        activation_function="gelu",  # exact erf GELU; GPT-2's default "gelu_new" is the tanh one
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        layer_norm_epsilon=config.ln_eps, tie_word_embeddings=config.tie_weights,
        bos_token_id=None, eos_token_id=None, attn_implementation=attn_implementation,
    )
    hf = GPT2LMHeadModel(hf_config).to(device=gpt.E.device, dtype=gpt.E.dtype)
    with torch.no_grad():
        hf.transformer.wte.weight.copy_(gpt.E)  # (V, d)
        hf.transformer.wpe.weight.copy_(gpt.P)  # (T_max, d)
        for block, hf_block in zip(gpt.blocks, hf.transformer.h):
            attn = block.attn
            hf_block.ln_1.weight.copy_(block.ln_1.gamma)
            hf_block.ln_1.bias.copy_(block.ln_1.beta)
            W_QKV = torch.cat([stacked_heads(W) for W in (attn.W_Q, attn.W_K, attn.W_V)], dim=1)  # (d, 3d)
            hf_block.attn.c_attn.weight.copy_(W_QKV)
            hf_block.attn.c_attn.bias.zero_()
            hf_block.attn.c_attn.bias.requires_grad_(False)  # gptlib has no Q, K, V bias to train
            hf_block.attn.c_proj.weight.copy_(attn.W_O)  # (d, d), already (in, out)
            hf_block.attn.c_proj.bias.copy_(attn.b_O)
            hf_block.ln_2.weight.copy_(block.ln_2.gamma)
            hf_block.ln_2.bias.copy_(block.ln_2.beta)
            hf_block.mlp.c_fc.weight.copy_(block.mlp.W_1.T)  # (d, d_ff)
            hf_block.mlp.c_fc.bias.copy_(block.mlp.b_1)
            hf_block.mlp.c_proj.weight.copy_(block.mlp.W_2.T)  # (d_ff, d)
            hf_block.mlp.c_proj.bias.copy_(block.mlp.b_2)
        hf.transformer.ln_f.weight.copy_(gpt.ln_f.gamma)
        hf.transformer.ln_f.bias.copy_(gpt.ln_f.beta)
        if not config.tie_weights:
            hf.lm_head.weight.copy_(gpt.W_U.T)  # (V, d)
    return _proven(gpt, hf.eval(), "Hugging Face GPT-2")


def to_transformer_lens(gpt: GPT):
    """TransformerLens' HookedTransformer (eval mode) computing the same logits as `gpt`, with a copy of its
    weights, nothing folded: its W_Q[h] (d, d_head) is gptlib's, W_O is split per head (H, d_head, d)."""
    gpt = _gpt(gpt)
    config = gpt.config
    if config.tie_weights:
        raise ValueError("HookedTransformer has no tied unembedding, got tie_weights=True")
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError as missing:
        raise _missing("transformer_lens", "`make bench` installs it (the bench extra, then "
                                           "pip install --no-deps 'transformer-lens>=3,<4')") from missing

    tl_config = HookedTransformerConfig(
        n_layers=config.L, d_model=config.d, n_ctx=config.T_max, d_head=config.d_head, n_heads=config.H,
        d_mlp=config.d_ff, d_vocab=config.V,
        act_fn="gelu",  # exact erf GELU
        normalization_type="LN",  # LayerNorm with its own gain and shift, nothing folded
        eps=config.ln_eps, positional_embedding_type="standard", default_prepend_bos=False,
        device=str(gpt.E.device), dtype=gpt.E.dtype,
    )
    with warnings.catch_warnings():  # 3.x says HookedTransformer will go in 4.0; gptlib asks for <4
        warnings.filterwarnings("ignore", "HookedTransformer is deprecated", DeprecationWarning)
        tl = HookedTransformer(tl_config)
    with torch.no_grad():
        tl.embed.W_E.copy_(gpt.E)  # (V, d)
        tl.pos_embed.W_pos.copy_(gpt.P)  # (T_max, d)
        for block, tl_block in zip(gpt.blocks, tl.blocks):
            attn = block.attn
            tl_block.ln1.w.copy_(block.ln_1.gamma)
            tl_block.ln1.b.copy_(block.ln_1.beta)
            for name in ("Q", "K", "V"):
                getattr(tl_block.attn, f"W_{name}").copy_(getattr(attn, f"W_{name}"))  # (H, d, d_head)
                getattr(tl_block.attn, f"b_{name}").zero_().requires_grad_(False)
            tl_block.attn.W_O.copy_(attn.W_O.reshape(config.H, config.d_head, config.d))  # W_O^h stacked
            tl_block.attn.b_O.copy_(attn.b_O)
            tl_block.ln2.w.copy_(block.ln_2.gamma)
            tl_block.ln2.b.copy_(block.ln_2.beta)
            tl_block.mlp.W_in.copy_(block.mlp.W_1.T)  # (d, d_ff)
            tl_block.mlp.b_in.copy_(block.mlp.b_1)
            tl_block.mlp.W_out.copy_(block.mlp.W_2.T)  # (d_ff, d)
            tl_block.mlp.b_out.copy_(block.mlp.b_2)
        tl.ln_final.w.copy_(gpt.ln_f.gamma)
        tl.ln_final.b.copy_(gpt.ln_f.beta)
        tl.unembed.W_U.copy_(gpt.W_U)  # (d, V)
        tl.unembed.b_U.zero_().requires_grad_(False)
    return _proven(gpt, tl.eval(), "TransformerLens")
