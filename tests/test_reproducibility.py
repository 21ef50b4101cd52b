"""make_deterministic, at_most and below: what notebooks call so that they print the same text everywhere."""

import os
import subprocess
import sys

import torch

from gptlib import at_most, below, make_deterministic


def test_below_hides_digits_under_the_floor_only():
    assert below(3.1e-15) == below(torch.tensor(0.0)) == "< 1e-12"
    assert below(2e-11, 1e-10) == "< 1e-10"
    assert below(1e-12) == "1.0e-12"
    assert below(torch.tensor(3.2e-4)) == "3.2e-04"
    assert below(float("nan")) == "nan"


def test_at_most_prints_a_verdict_not_the_digits():
    assert at_most(2.2e-8, 1e-5) == at_most(1.3e-8, 1e-5) == "<= 1e-05: yes"
    assert at_most(1e-5, 1e-5) == "<= 1e-05: yes"
    assert at_most(torch.tensor(3.2e-4), 1e-5) == "<= 1e-05: NO, it is 3.2e-04"
    assert at_most(float("nan"), 1e-5) == "<= 1e-05: NO, it is nan"


def test_at_most_takes_a_tensor_that_requires_grad_without_a_warning(recwarn):
    assert at_most(torch.ones(3, requires_grad=True).sum() * 0, 1e-6) == "<= 1e-06: yes"
    assert len(recwarn) == 0


def threads_after_make_deterministic(**env):
    code = "import gptlib, torch; gptlib.make_deterministic(threads=1); print(torch.get_num_threads())"
    environment = {k: v for k, v in os.environ.items() if k != "GPTLIB_NUM_THREADS"} | env
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_thread_count_follows_the_argument_unless_gptlib_num_threads_is_set():
    assert threads_after_make_deterministic() == "1"
    assert threads_after_make_deterministic(GPTLIB_NUM_THREADS="2") == "2"


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
