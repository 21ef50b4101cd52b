"""The build track (notebook 09): one checker per piece of the GPT a learner writes, in the order the block needs them.

    check_layer_norm_module(LayerNorm)         Definition 4.1                  layer_norm.py      LayerNorm(d)
    check_attention_head(AttentionHead)        one head of Definition 1.1      head.py            AttentionHead(d, d_head)
    check_multi_head_attention(MHA)            Definition 1.1 with W_O, b_O    attention.py       MultiHeadAttention(d, H)
    check_mlp(MLP)                             Definition 2.1, exact GELU      mlp.py             MLP(d, d_ff)
    check_block(Block)                         Definition 3.1, pre-norm        block.py           Block(d, H, d_ff)
    check_gpt(GPT)                             Section 5                       gpt.py             GPT(V, T_max, d, H, L, d_ff)
    check_init(init_weights, GPT)              Project aside 5.2               initialization.py  init_weights(GPT(...))
    attempt(factory)                           your whole model, or "not attempted yet"             here

Each takes the learner's class (built as in the last column with the small sizes of SIZES, so that every
shape says its role) or a module already built (any sizes; attention's H is then read from the module or
given). The module is judged by what it computes, never by its names: its tensors are filled with seeded
random values, read as the lecture's symbols (checking/roles.py: by shape, by name where a name says, otherwise
every reading the shapes allow), loaded into gptlib's own component, and both are run on the same random
input. The learner's weights are put back afterwards. A reading under which the two agree to TOL passes;
otherwise the typical mistakes of that component are computed under each reading in turn, and those that
explain the learner's output are named (mistakes.name_mistake: all of them, as candidates, when several do).
The machinery all of them share is checking/components.py. Inside a hidden variant (checking.shifted_seeds: a
course's hidden test) each checker builds the class at other sizes of the same kind (components.sizes,
initialization.init_sizes) and draws other weights and inputs (every seed through variants.variant_seed).
"""

from ...checking.components import SIZES, TOL
from .attention import check_multi_head_attention
from .block import check_block
from .gpt import check_gpt
from .head import check_attention_head
from .initialization import check_init
from .layernorm import check_layer_norm_module
from .mlp import check_mlp

__all__ = ["SIZES", "TOL", "attempt", "check_attention_head", "check_block", "check_gpt", "check_init", "check_layer_norm_module",
           "check_mlp", "check_multi_head_attention"]


def attempt(factory):
    """factory() (your model built from the steps above), or None after printing "not attempted yet" while a
    stub still raises NotImplementedError, so that the cells using your model skip instead of failing."""
    try:
        return factory()
    except NotImplementedError as stub:
        print(f"not attempted yet: a stub still raises NotImplementedError ({stub}); finish the steps above first.")
        return None
