"""The lecture's analyses: one module per idea, each measuring a statement of Lecture 5 on the
model's own forward pass.

    cache           one forward pass, every intermediate under the lecture's symbols (Sections 0-5)
    attention       heads as low-rank circuits: W_QK, W_OV, the sum of heads, ranks, the gauge (Section 1)
    positionwise    the MLP acts on every position alike; GELU; attention's convex hull (Section 2)
    jacobians       block Jacobians I + DF and their products over depth (Section 3, Exercise 7)
    residual        the stream's growth, channel and superposition; init variance (Section 3, aside 5.2)
    layernorm       LayerNorm as a projection onto 1-perp and a rescaling to the sqrt(d) sphere (Section 4)
    causality       does Z_t depend on x_s? (Remark 5.1, Exercise 2)
    counting        Theorem 5.2, the parameter count (Exercise 1)
    cost            FLOP counts and the 6N rule (Section 6, Exercise 8)
    induction       induction heads in a trained two-layer model (beyond the lecture)
    decomposition   the stream as a sum of writes; the logits by write; the logit lens (Remark 3.4)
    patching        ablation and activation patching, head by head (beyond the lecture)

The layer rule (ARCHITECTURE.md, tests/project/test_architecture.py): these modules import gptlib's config
layer (config, validation), the model and the plumbing beside it (data, reproducibility, ...) and
each other, never gptlib.viz, gptlib.exercises or matplotlib. Importing this package imports none
of them.
"""
