"""Hidden variants: a checker run again with its random draws moved to other values.

The checkers choose their random configurations, inputs and weights from fixed seeds, so a
learner who read gptlib's source could answer exactly those points from a table. Each checker
takes every seed through `exercises.result.variant_seed`; inside `shifted_seeds(offset)` that
seed is seed + offset, so the same checker, unchanged, draws other configurations and other
weights and computes its references on those. Nothing global is replaced (torch.manual_seed,
torch.Generator and random.Random stay the library's own): the offset lives in a context
variable the checkers read. The offset is the secret of a hidden test (written only into the
instructor's autograder folder). Points a checker fixes by hand (the course configuration, a
list of shapes) stay the same (tests/test_course_assign.py measures which questions move).
"""

from __future__ import annotations

from gptlib.exercises.variants import shifted_seeds

__all__ = ["shifted_seeds"]
