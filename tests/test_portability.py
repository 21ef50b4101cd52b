"""Every notebook matches its committed outputs under simulated other CPUs and thread counts.

`make test` runs the first three of tests/support/portability.py's CI variants that this CPU can run,
and reports the others as skipped with the reason. The three nbval processes start when the first of
their tests is set up (conftest.py sorts them first) and run, niced, beside the rest of the suite on
the other workers; each variant's test waits for its verdict.
`make portability` runs the wider matrix. The tests below the variants check that choice itself, for
CPUs other than this one.
"""

import platform

import pytest

from tests.support.portability import (
    CI,
    LEVELS,
    THREADS_ONLY,
    VARIANT_TIMEOUT_S,
    WIDE,
    capability,
    choose,
    ci_run,
    ci_variants,
    cpu_level,
    describe,
    needed_level,
)


def this_cpu():
    return ci_variants()


def pytest_generate_tests(metafunc):
    if "variant" in metafunc.fixturenames:
        chosen, skipped = this_cpu()
        metafunc.parametrize("variant", [*chosen, *(name for name in skipped if name in CI)])


@pytest.mark.portability
@pytest.mark.timeout(VARIANT_TIMEOUT_S + 60)
def test_notebooks_match_their_outputs_under(variant):
    chosen, skipped = this_cpu()
    if variant not in chosen:
        pytest.skip(f"variant '{variant}' left out on this CPU: {skipped[variant]}")
    failed, output = ci_run(variant).result()
    assert not failed, f"{describe(variant, chosen[variant])}: cells that differ: {', '.join(failed)}\n{output[-4000:]}"


def aten_levels(variants):
    return {env.get("ATEN_CPU_CAPABILITY") for env in variants.values()}


def test_an_avx512_cpu_runs_the_three_first_variants():
    chosen, skipped = choose(CI, level=2)
    assert list(chosen) == list(CI)[:3]
    assert all(reason == "3 variants are chosen already" for reason in skipped.values())


@pytest.mark.parametrize("level", [0, 1])
def test_a_cpu_without_avx512_never_asks_for_it_and_still_runs_three_distinct_variants(level):
    chosen, skipped = choose(CI, level=level)
    assert len(chosen) == 3 and len({tuple(sorted(env.items())) for env in chosen.values()}) == 3
    assert "avx512" not in aten_levels(chosen)
    assert all(LEVELS[key][value] <= level for env in chosen.values() for key, value in env.items() if key in LEVELS)
    avx512 = [name for name in CI if CI[name].get("ATEN_CPU_CAPABILITY") == "avx512"]
    assert avx512 and all("SIGILL" in skipped[name] for name in avx512)


def test_an_avx2_cpu_still_varies_simd_kernels_matmuls_and_threads():
    chosen, _ = choose(CI, level=1)
    assert aten_levels(chosen) == {"default", "avx2"}
    assert len({env.get("MKL_ENABLE_INSTRUCTIONS") for env in chosen.values()}) >= 2
    assert {env["GPTLIB_NUM_THREADS"] for env in chosen.values()} == {"1", "2"}


def test_on_a_cpu_that_is_not_x86_only_thread_counts_vary():
    chosen, skipped = choose(CI, level=cpu_level("DEFAULT", "arm64"))
    assert chosen == THREADS_ONLY and set(skipped) == set(CI)
    assert all("not x86-64" in reason for reason in skipped.values())


def test_the_wide_matrix_on_an_avx2_cpu_leaves_out_exactly_what_asks_for_avx512():
    chosen, skipped = choose(WIDE, level=1, at_most=None)
    assert set(skipped) == {name for name, env in WIDE.items() if needed_level(env) == 2}
    assert set(chosen) == set(WIDE) - set(skipped)


@pytest.mark.slow  # a fresh interpreter or a training run
def test_this_cpu_is_never_asked_for_more_than_it_has():
    chosen, _ = this_cpu()
    native, machine = capability(), platform.machine()
    for asked in {env["ATEN_CPU_CAPABILITY"] for env in chosen.values() if "ATEN_CPU_CAPABILITY" in env}:
        reported = capability({"ATEN_CPU_CAPABILITY": asked})  # a process each: only this variable moves it
        assert cpu_level(reported, machine) <= cpu_level(native, machine), f"{asked}: {reported} on a {native} CPU"


def test_cpu_levels_are_read_from_what_torch_reports():
    assert [cpu_level(native, "x86_64") for native in ("DEFAULT", "NO AVX", "AVX2", "AVX512")] == [0, 0, 1, 2]
    assert cpu_level("AVX2", "AMD64") == 1 and cpu_level("SVE256", "aarch64") is None
