"""Hidden variants: a checker run again with its random draws moved to other values.

The checkers choose their random configurations, inputs and weights from fixed seeds, so a
learner who read gptlib's source could answer exactly those points from a table. Each checker
takes every seed through `exercises.variants.variant_seed`; inside `shifted_seeds(offset)` that
seed is seed + offset, so the same checker, unchanged, draws other configurations and other
weights and computes its references on those. Nothing global is replaced (torch.manual_seed,
torch.Generator and random.Random stay the library's own): the offset lives in a context
variable the checkers read. The offset is the secret of a hidden test (written only into the
instructor's autograder folder). A checker that fixes its points by hand (a list of shapes or
configurations) asks, in a hidden variant, at those points and at others drawn from the offset
(`exercises.variants.variant_points`): so every typical mistake the public points tell from the right
answer fails the hidden case too, whatever the offset (tests/course/test_hidden_variants.py tries
each checker's mistakes over many offsets; tests/course/test_assign.py that the points move).
"""

from __future__ import annotations

from gptlib.exercises.variants import shifted_seeds

__all__ = ["shifted_seeds"]
