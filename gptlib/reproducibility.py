"""One call that makes a notebook or test run print the same numbers every time."""

from __future__ import annotations

import random

import torch


def make_deterministic(seed: int = 0, threads: int = 1) -> None:
    """Seed Python's and torch's generators and fix torch's CPU thread count.

    Small operations were bit-identical across thread counts on this kind of machine,
    large reductions were not, so notebooks pin `threads` as well as the seed.
    """
    random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
