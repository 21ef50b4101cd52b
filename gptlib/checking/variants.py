"""Hidden variants: a checker asked again at other points, its seeds shifted by a course's secret offset.

Every checker takes each seed it draws from through `variant_seed`, and the points it fixes by hand
through `variant_points`; inside `shifted_seeds(offset)` both move. Nothing global is replaced: the
offset lives in a context variable (this thread or task only).
"""

from __future__ import annotations

import contextlib
import contextvars
import random

_VARIANT = contextvars.ContextVar("gptlib_exercises_variant", default=0)
_SEED_RANGE = 2**63  # what torch.manual_seed and random.Random accept


def variant_seed(seed: int) -> int:
    """The seed a checker draws its random configurations, inputs and weights from: `seed` itself,
    or inside `shifted_seeds(offset)` seed + offset, so the same checker asks at other points. A
    checker passes every seed it uses through this; nothing global (torch.manual_seed, random) is replaced."""
    return (seed + _VARIANT.get()) % _SEED_RANGE


def variant_points(points: tuple, draw) -> tuple:
    """The points a checker asks at: its own fixed `points`, or inside `shifted_seeds(offset)` those
    same points followed by the ones `draw(random.Random(offset))` returns, other points of the same
    kind. A hidden variant asks everywhere the public case does, and more: every typical mistake that
    the public points tell from the right answer, it tells too, whatever the offset (a draw alone may
    miss the one point that separates a mistake: no shape with T < d_head for rank_bounds), and an
    answer that fits the public points only fails at the drawn ones."""
    offset = _VARIANT.get()
    return tuple(points) if offset == 0 else (*points, *draw(random.Random(offset)))


def variant_choice(choice, draw):
    """One setting a checker works at (the build track's sizes): `choice`, or inside `shifted_seeds(offset)`
    the one `draw(random.Random(offset))` returns instead (a setting, not points: one replaces the other)."""
    offset = _VARIANT.get()
    return choice if offset == 0 else draw(random.Random(offset))


@contextlib.contextmanager
def shifted_seeds(offset: int):
    """Within the block (this thread or task only) every checker draws from its seeds moved by `offset`."""
    token = _VARIANT.set(offset)
    try:
        yield
    finally:
        _VARIANT.reset(token)
