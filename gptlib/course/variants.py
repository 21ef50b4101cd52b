"""Hidden variants: a checker run again with every random draw it makes moved to other values.

The checkers choose their random configurations, inputs and weights from fixed seeds, so a
learner who read gptlib's source could answer exactly those points from a table. Inside
`shifted_seeds(offset)` every seed given to torch.manual_seed, torch.Generator().manual_seed and
random.Random becomes seed + offset: the same checker, unchanged, draws other configurations
and other weights, and its references are computed on those too. The offset is the secret of a
hidden test (written only into the instructor's autograder folder). Points a checker fixes by
hand (the course configuration, a list of shapes) stay the same: for those, a hidden variant
is no stronger than the public test (tests/test_course_assign.py measures which questions move).
"""

from __future__ import annotations

import contextlib
import random

import torch

_SEED_RANGE = 2**63  # keeps shifted seeds inside what torch and random accept


class _ShiftedGenerator(torch.Generator):
    offset = 0

    def manual_seed(self, seed):
        return super().manual_seed((int(seed) + self.offset) % _SEED_RANGE)


@contextlib.contextmanager
def shifted_seeds(offset: int):
    """Within the block every seed s of torch and random is s + offset; nothing changes for offset 0."""
    if offset == 0:
        yield
        return
    manual_seed, generator, random_seed = torch.manual_seed, torch.Generator, random.Random.seed

    class Generator(_ShiftedGenerator):
        pass

    Generator.offset = offset
    torch.manual_seed = lambda seed: manual_seed((int(seed) + offset) % _SEED_RANGE)
    torch.Generator = Generator
    random.Random.seed = lambda self, a=None, version=2: random_seed(self, a + offset if isinstance(a, int) else a, version)
    try:
        yield
    finally:
        torch.manual_seed, torch.Generator, random.Random.seed = manual_seed, generator, random_seed
