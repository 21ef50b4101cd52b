"""make_deterministic and seeded: what notebooks and library studies call so that they
print the same text everywhere."""

import os
import re

import pytest
import torch

from gptlib import make_deterministic
from gptlib.analysis import jacobians
from gptlib.analysis.residual import initial_loss_gap, residual_write_variance
from gptlib.config import GPTConfig
from gptlib.reproducibility import seeded

SMALL = GPTConfig(V=7, T_max=4, d=8, H=2, L=1)


def test_seeded_draws_the_seeds_numbers_and_gives_the_callers_generator_back():
    torch.manual_seed(123)
    expected_after = torch.rand(3)
    torch.manual_seed(123)
    with seeded(7):
        inside = torch.rand(3)
    assert torch.equal(inside, torch.rand(3, generator=torch.Generator().manual_seed(7)))
    assert torch.equal(torch.rand(3), expected_after)  # as if the block had never run


@pytest.mark.parametrize("study", [
    lambda: jacobians.depth_study("pre", [1, 2], d=8, T=3, H=2)[-1].singular_values,
    lambda: jacobians.residual_contrast([2], d=8, T=3, H=2)[0].residual,
    lambda: torch.tensor(residual_write_variance(2, scaled=False, base=SMALL, B=2).accumulated),
    lambda: torch.tensor(initial_loss_gap(SMALL, B=2)[0]),
], ids=["depth_study", "residual_contrast", "residual_write_variance", "initial_loss_gap"])
def test_seeded_studies_leave_the_callers_draws_alone_and_repeat_whatever_came_before(study):
    torch.manual_seed(1)
    unstudied = torch.rand(3)
    torch.manual_seed(1)
    first = study()
    assert torch.equal(torch.rand(3), unstudied)  # a notebook's next draw is the one it would have had
    torch.manual_seed(2)  # another state before the call: the study's own seed decides its numbers
    assert torch.equal(study(), first)


@pytest.fixture
def threads_after_make_deterministic(monkeypatch):
    """threads_after_make_deterministic(**env): torch's thread count after make_deterministic(threads=1)
    with `env` as the only GPTLIB_ variables set, or its error as 'ValueError: ...'. The count is put
    back afterwards."""
    before = torch.get_num_threads()

    def threads(**env):
        monkeypatch.delenv("GPTLIB_NUM_THREADS", raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        try:
            make_deterministic(threads=1)
        except ValueError as error:
            return f"ValueError: {error}"
        return str(torch.get_num_threads())

    yield threads
    torch.set_num_threads(before)


def test_the_thread_count_follows_the_argument_unless_gptlib_num_threads_is_set(threads_after_make_deterministic):
    assert threads_after_make_deterministic() == "1"
    assert threads_after_make_deterministic(GPTLIB_NUM_THREADS=" 1 ") == "1"
    rule = f"GPTLIB_NUM_THREADS must be an integer in [1, {os.cpu_count()}]"
    assert threads_after_make_deterministic(GPTLIB_NUM_THREADS="2.5") == f"ValueError: {rule}, got '2.5'"
    assert threads_after_make_deterministic(GPTLIB_NUM_THREADS="0") == f"ValueError: {rule}, got 0"


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs")
def test_gptlib_num_threads_overrides_the_argument(threads_after_make_deterministic):
    assert threads_after_make_deterministic(GPTLIB_NUM_THREADS="2") == "2"


@pytest.mark.parametrize("arguments, rule", [
    (dict(seed=True), "seed must be an integer in [0, 18446744073709551615], got True"),
    (dict(seed=-1), "seed must be an integer in [0, 18446744073709551615], got -1"),
    (dict(seed=2**64), "seed must be an integer in [0, 18446744073709551615], got 18446744073709551616"),
    (dict(seed=0.0), "seed must be an integer in [0, 18446744073709551615], got 0.0"),
    (dict(threads=2.5), f"threads must be an integer in [1, {os.cpu_count()}], got 2.5"),
    (dict(threads=0), f"threads must be an integer in [1, {os.cpu_count()}], got 0"),
    (dict(threads=True), f"threads must be an integer in [1, {os.cpu_count()}], got True"),
    (dict(threads=(os.cpu_count() or 1) + 1), f"threads must be an integer in [1, {os.cpu_count()}], got"),
])
def test_make_deterministic_refuses_bad_arguments_before_changing_anything(arguments, rule):
    threads, state = torch.get_num_threads(), torch.get_rng_state()
    with pytest.raises(ValueError, match=re.escape(rule)):
        make_deterministic(**arguments)
    assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), state)


def test_make_deterministic_repeats_random_draws():
    threads = torch.get_num_threads()
    make_deterministic(seed=3)
    first = torch.rand(4)
    make_deterministic(seed=3)
    second = torch.rand(4)
    torch.set_num_threads(threads)  # leave the other tests as they were
    assert torch.equal(first, second)


def test_inside_ipython_errors_show_only_type_and_message():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        make_deterministic()
        assert shell.InteractiveTB.mode == "Minimal"
    finally:
        InteractiveShell.clear_instance()
