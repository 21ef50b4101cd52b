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
    """The points a checker asks at: its own fixed `points`, or inside `shifted_seeds(offset)` the
    points `draw(random.Random(offset))` returns, other points of the same kind."""
    offset = _VARIANT.get()
    return tuple(points) if offset == 0 else tuple(draw(random.Random(offset)))


@contextlib.contextmanager
def shifted_seeds(offset: int):
    """Within the block (this thread or task only) every checker draws from its seeds moved by `offset`."""
    token = _VARIANT.set(offset)
    try:
        yield
    finally:
        _VARIANT.reset(token)
