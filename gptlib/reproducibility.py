"""One call that makes a notebook print the same text on every machine (its printing: gptlib.printing)."""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from . import validation

THREADS_VARIABLE = "GPTLIB_NUM_THREADS"


def make_deterministic(seed: int = 0, threads: int = 1) -> None:
    """Seed Python's and torch's generators, fix torch's CPU thread count, shorten tracebacks.

    Small operations were bit-identical across thread counts on this kind of machine, large
    reductions were not, so notebooks pin `threads` as well as the seed. The environment variable
    GPTLIB_NUM_THREADS overrides `threads`: the portability check (tests/notebooks/test_portability.py) uses it to
    run every notebook at other thread counts, whose outputs must match too.

    Every argument is checked before anything changes: seed an integer in [0, 2^64 - 1], threads
    (and GPTLIB_NUM_THREADS) an integer from 1 to the number of CPUs, as the training command's --threads.

    Inside IPython, errors are shown in the Minimal traceback mode: the exception type and its
    message, without the frames (whose file paths differ on every machine). `%xmode Context`
    brings the frames back.
    """
    seed = validation.seed("seed", seed)  # torch's seed range, as in training
    threads = thread_count("threads", threads)
    if THREADS_VARIABLE in os.environ:
        text = os.environ[THREADS_VARIABLE]
        threads = thread_count(THREADS_VARIABLE, int(text) if text.strip().isdecimal() else text)
    random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    if "IPython" in sys.modules:  # never import IPython here: gptlib is used outside notebooks too
        shell = sys.modules["IPython"].get_ipython()
        if shell is not None:
            shell.InteractiveTB.set_mode(mode="Minimal")  # what %xmode Minimal does, unprinted


def thread_count(name: str, value) -> int:
    """value as a torch CPU thread count: an integer from 1 to the number of CPUs."""
    return validation.integer(name, value, at_least=1, at_most=os.cpu_count() or 1)


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block with torch's global generator seeded with `seed`, then give the caller back the
    generator as it was: a library function that builds a seeded model (whose init draws from the
    global generator) must not reseed the learner's notebook. The CPU generator only; no GPU touched.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield

