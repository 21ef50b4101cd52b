"""The libraries a learner would pick instead of gptlib, built to gptlib's shapes and weights.

    hf = hf_gpt2_from(model)              # transformers' GPT2LMHeadModel
    tl = hooked_transformer_from(model)   # TransformerLens' HookedTransformer

Both copies compute the same function as `model` (Section 5: Z = LN_f(X^(L)) W_U): exact
GELU (Definition 2.1), no dropout, the same LayerNorm epsilon (Definition 4.1), no bias on
W_Q, W_K, W_V, W_U (Theorem 5.2's count) and a separate W_U unless the config ties it
(Aside 5.3). Only pre-norm, causal, full blocks map onto these peers; other configs raise.
transformers and transformer_lens are imported inside the builders, so importing this
module needs neither.
"""

from __future__ import annotations

import warnings

import torch

from gptlib import GPT, GPTConfig


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


def hf_gpt2_from(model: GPT, attn_implementation: str = "sdpa"):
    """transformers' GPT2LMHeadModel with `model`'s config and a copy of its weights.

    GPT-2's Conv1D layers compute x @ weight + bias, weight of shape (in, out); c_attn
    holds [W_Q | W_K | W_V] side by side, heads in order, with its bias zeroed and frozen.
    `attn_implementation="eager"` is the path that can return attention matrices.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    config = model.config
    check_mappable(config)
    hf_config = GPT2Config(
        vocab_size=config.V,
        n_positions=config.T_max,
        n_embd=config.d,
        n_head=config.H,
        n_layer=config.L,
        n_inner=config.d_ff,
        activation_function="gelu",  # exact erf GELU; GPT-2's default "gelu_new" is the tanh one
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        layer_norm_epsilon=config.ln_eps,
        tie_word_embeddings=config.tie_weights,
        bos_token_id=None,
        eos_token_id=None,
        attn_implementation=attn_implementation,
    )
    hf = GPT2LMHeadModel(hf_config)
    with torch.no_grad():
        hf.transformer.wte.weight.copy_(model.E)  # (V, d)
        hf.transformer.wpe.weight.copy_(model.P)  # (T_max, d)
        for block, hf_block in zip(model.blocks, hf.transformer.h):
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
        hf.transformer.ln_f.weight.copy_(model.ln_f.gamma)
        hf.transformer.ln_f.bias.copy_(model.ln_f.beta)
        if not config.tie_weights:
            hf.lm_head.weight.copy_(model.W_U.T)  # (V, d)
    return hf.eval()


def hooked_transformer_from(model: GPT):
    """TransformerLens' HookedTransformer with `model`'s config and a copy of its weights.

    Its per-head layout W_Q[h] (d, d_head) is gptlib's; W_O is split per head (H, d_head, d),
    the MLP stores W_in = W_1^T, W_out = W_2^T; the biases b_Q, b_K, b_V, b_U are zeroed and frozen.
    """
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    config = model.config
    check_mappable(config)
    if config.tie_weights:
        raise ValueError("HookedTransformer has no tied unembedding, got tie_weights=True")
    # The same sizes as hf_gpt2_from's config, in TransformerLens's names: two libraries, one mapping each.
    tl_config = HookedTransformerConfig(
        n_layers=config.L,
        d_model=config.d,
        n_ctx=config.T_max,
        d_head=config.d_head,
        n_heads=config.H,
        d_mlp=config.d_ff,
        d_vocab=config.V,
        act_fn="gelu",  # exact erf GELU
        normalization_type="LN",  # LayerNorm with its own gain and shift, nothing folded
        eps=config.ln_eps,
        positional_embedding_type="standard",
        default_prepend_bos=False,
        device="cpu",
    )
    with warnings.catch_warnings():  # 3.x says HookedTransformer will go in 4.0; we pin <4
        warnings.filterwarnings("ignore", "HookedTransformer is deprecated", DeprecationWarning)
        tl = HookedTransformer(tl_config)
    with torch.no_grad():
        tl.embed.W_E.copy_(model.E)  # (V, d)
        tl.pos_embed.W_pos.copy_(model.P)  # (T_max, d)
        for block, tl_block in zip(model.blocks, tl.blocks):
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
        tl.ln_final.w.copy_(model.ln_f.gamma)
        tl.ln_final.b.copy_(model.ln_f.beta)
        tl.unembed.W_U.copy_(model.W_U)  # (d, V)
        tl.unembed.b_U.zero_().requires_grad_(False)
    return tl.eval()


@torch.no_grad()
def scrambled_model(config: GPTConfig, init_std: float = 0.1, scale: float = 0.1) -> GPT:
    """A GPT in eval mode whose every parameter matters to its logits, for comparisons.

    The course init (std 0.02, Project aside 5.2) leaves attention nearly uniform, so swapping
    W_Q and W_K would barely change a logit; std 0.1 makes the heads sharp. Every gamma, beta
    and bias also gets N(0, scale^2) noise: at init they are 1 and 0, values that a dropped
    parameter would reproduce by accident.
    """
    model = GPT(config.replace(init_std=init_std)).eval()
    for name, p in model.named_parameters():
        if name.endswith(("gamma", "beta", "b_O", "b_1", "b_2")):
            p.add_(scale * torch.randn_like(p))
    return model


@torch.no_grad()
def max_logit_difference(model: GPT, peer, idx: torch.Tensor) -> float:
    """max |Z_gptlib - Z_peer| over a batch idx (B, T); peer is a GPT-2 or a HookedTransformer."""
    Z = model(idx)  # (B, T, V)
    out = peer(idx)
    Z_peer = out.logits if hasattr(out, "logits") else out  # GPT-2 returns an output object
    return (Z - Z_peer).abs().max().item()
