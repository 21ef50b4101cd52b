"""Fixtures shared by the unit tests: a seed, small configs, random weights, state equality, the corpus.

They are fixtures rather than importable names because tests/browser has a conftest.py
of its own, so `from conftest import ...` would be ambiguous.
"""

import os

import pytest
import torch

from gptlib import COURSE_CONFIG, GPT, GPTConfig, data
from tests.support.once import once_per_run

# make test runs a worker per core and one more (Makefile): with torch's default of a thread per core in each,
# their threads outnumber the cores and wait on one another. One each; a test that needs more sets it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

SMALL = GPTConfig(V=65, T_max=16, d=32, H=2, L=2)


@pytest.fixture(autouse=True)
def _seeded():
    # The CPU generator alone: torch.manual_seed also queues a seeding of each accelerator torch might
    # initialize later, 2.5 ms a call in torch 2.13's CPU build; every tensor here is on the CPU.
    torch.default_generator.manual_seed(0)


@pytest.fixture
def course_model():
    return GPT(COURSE_CONFIG).eval()


@pytest.fixture
def small_config() -> GPTConfig:
    """A small GPT (V=65, T_max=16, d=32, H=2, L=2): fast enough for Jacobians; tests .replace() what they vary."""
    return SMALL


def _sharp_model(norm: str = "pre", L: int = 3, ln_eps: float = 1e-5) -> tuple[GPT, torch.Tensor]:
    torch.manual_seed(0)
    model = GPT(SMALL.replace(d=16, norm=norm, L=L, init_std=0.3, ln_eps=ln_eps)).double().eval()
    X = torch.randn(4, 16, dtype=torch.float64)  # (T, d)
    return model, X


@pytest.fixture
def sharp_model():
    """sharp_model(norm="pre", L=3, ln_eps=1e-5) -> (model, X): a float64 GPT with d = 16 and weights of
    std 0.3, so every branch does visible work (a nontrivial DF), and one input sequence X (4, 16)."""
    return _sharp_model


@torch.no_grad()
def _with_random_weights(module: torch.nn.Module, std: float) -> torch.nn.Module:
    for p in module.parameters():
        p.normal_(std=std)
    return module


@pytest.fixture
def with_random_weights():
    """with_random_weights(module, std): every parameter, biases too, redrawn from N(0, std^2); returns the module."""
    return _with_random_weights


def _same_state(a, b) -> bool:
    a, b = (x.state_dict() if isinstance(x, torch.nn.Module) else x for x in (a, b))
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture
def same_state():
    """same_state(a, b): two models or state dicts hold the same names and bit-identical tensors."""
    return _same_state


@pytest.fixture
def corpus_path():
    """The tiny-Shakespeare corpus beside this checkout; the test is skipped where it is absent (CI has it)."""
    if not data.LOCAL_CORPUS.is_file():
        pytest.skip(f"tiny-Shakespeare corpus absent at {data.LOCAL_CORPUS} (CI has it)")
    return data.LOCAL_CORPUS


@pytest.fixture
def one_thread():
    """Run on one torch thread, as the notebooks do (make_deterministic): tiny models on a shared
    2-core machine are many times slower with two competing threads. Restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def book_html(tmp_path_factory):
    """The static book (tools/build_book.py), built once per test run (tests/notebooks/test_book_build.py and
    tests/browser/test_book_in_browser.py read it, on whichever workers); yields its html folder."""
    from tools.build_book import build

    return once_per_run(tmp_path_factory, "book", build)
