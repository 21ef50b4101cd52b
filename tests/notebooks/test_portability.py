"""Every notebook matches its committed outputs under simulated other CPUs and thread counts.

A notebook's compared outputs must match on any learner's machine, not only on the one that executed
them. These environment variables, read when a process starts, change which float kernels run, so on
one machine they stand in for other CPUs (the kernel nbval starts inherits them):

* ATEN_CPU_CAPABILITY: torch's own vectorised kernels (default = no SIMD, avx2, avx512). torch does
  NOT fall back when the CPU lacks the level asked for: it dies with SIGILL at the first vectorised
  op. So a variant never asks for more than this CPU has;
* MKL_ENABLE_INSTRUCTIONS (SSE4_2, AVX2, AVX512) and ONEDNN_MAX_CPU_ISA (SSE41, AVX2): the instruction
  sets of MKL's and oneDNN's matmuls. These fall back, so asking for more would only repeat a variant;
* GPTLIB_NUM_THREADS: the thread count gptlib.make_deterministic sets, overriding the notebooks' one.

The instruction-set variables exist on x86-64 only; elsewhere only the thread count varies.
`make test`'s own nbval pass runs under the first variant below: its kernel (tests/jupyter/kernels/
gptlib-other-cpu, pyproject.toml's --nbval-kernel-name) sets those variables, unlike the native run
in every one (no SIMD kernels, SSE matmuls, two threads where the notebooks pin one). Each further
variant costs a whole nbval pass, about two CPU-minutes: `make portability` (GPTLIB_PORTABILITY=all)
runs every variant this CPU can run, the native one among them, three at a time, each a pytest
process of its own with nbval's kernel in this environment (--nbval-current-env) inheriting it.
"""

import inspect
import json
import os
import platform
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gptlib import make_deterministic

ROOT = Path(__file__).resolve().parents[2]

# The kernel make test's nbval pass runs notebooks in (pyproject.toml's --nbval-kernel-name).
OTHER_CPU = json.loads((ROOT / "tests" / "jupyter" / "kernels" / "gptlib-other-cpu" / "kernel.json").read_text())["env"]
VARIANTS = {
    "no SIMD kernels, SSE matmuls, oneDNN SSE41, 2 threads (make test's own)": OTHER_CPU,
    "native: this CPU's kernels and matmuls, the notebooks' thread count": {},
    "no SIMD kernels, SSE matmuls, 1 thread": {**OTHER_CPU, "GPTLIB_NUM_THREADS": "1"},
    "avx2 everywhere, 2 threads": {
        "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2", "GPTLIB_NUM_THREADS": "2"},
    "avx512 kernels and matmuls, oneDNN at most AVX2, 1 thread": {
        "ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX512",
        "ONEDNN_MAX_CPU_ISA": "AVX2", "GPTLIB_NUM_THREADS": "1"},
    "avx2 kernels, SSE matmuls, oneDNN SSE41, 2 threads": {
        "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ONEDNN_MAX_CPU_ISA": "SSE41", "GPTLIB_NUM_THREADS": "2"},
    "no SIMD kernels, native matmuls, 2 threads": {"ATEN_CPU_CAPABILITY": "default", "GPTLIB_NUM_THREADS": "2"},
    # make portability adds each value on its own, and thread counts alone (all a non-x86 CPU varies)
    **{f"{key}={value}": {key: value} for key, values in (
        ("ATEN_CPU_CAPABILITY", ("default", "avx2", "avx512")), ("MKL_ENABLE_INSTRUCTIONS", ("SSE4_2", "AVX2", "AVX512")),
        ("ONEDNN_MAX_CPU_ISA", ("SSE41", "AVX2"))) for value in values},
    **{f"{n} threads": {"GPTLIB_NUM_THREADS": str(n)} for n in (2, 3, 4)},
}
# The x86-64 level each value asks for: 0 = nothing beyond SSE4, 1 = AVX2, 2 = AVX-512.
LEVELS = {
    "ATEN_CPU_CAPABILITY": {"default": 0, "avx2": 1, "avx512": 2},
    "MKL_ENABLE_INSTRUCTIONS": {"SSE4_2": 0, "AVX2": 1, "AVX512": 2},
    "ONEDNN_MAX_CPU_ISA": {"SSE41": 0, "AVX2": 1},
}
# One variant re-runs every notebook with fresh kernels: minutes niced beside the rest of `make test`.
VARIANT_TIMEOUT_S = 900


def capability(env: dict[str, str] | None = None) -> str:
    """What torch reports as its SIMD level ("AVX2", "AVX512", ...) in a process started with `env`
    added to this one's environment, ATEN_CPU_CAPABILITY taken out (so, with no env, the CPU's own)."""
    inherited = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run([sys.executable, "-c", code], env=inherited | (env or {}), capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip()


def cpu_level(native: str, machine: str) -> int | None:
    """The level (0, 1, 2) of an x86-64 CPU whose torch reports `native`; None on other CPUs."""
    if machine.lower() not in ("x86_64", "amd64"):
        return None
    return 2 if "AVX512" in native.upper() else 1 if "AVX2" in native.upper() else 0


def why_not(env: dict[str, str], level: int | None, cores: int = os.cpu_count() or 1) -> str | None:
    """Why a CPU of `level` with `cores` CPUs cannot run the variant `env`, or None if it can."""
    if int(env.get("GPTLIB_NUM_THREADS", 1)) > cores:
        return f"it asks for more threads than this machine's {cores} CPUs: make_deterministic refuses them"
    asks = [key for key in env if key in LEVELS]
    if level is None:
        return "the instruction-set variables mean nothing on this CPU (not x86-64)" if asks else None
    too_high = [key for key in asks if LEVELS[key][env[key]] > level]
    if "ATEN_CPU_CAPABILITY" in too_high:
        return "it asks for more than this CPU has: torch would die with SIGILL instead of falling back"
    if too_high:
        return "it asks for more than this CPU has: MKL and oneDNN fall back, so it would repeat another variant"
    return None


def chosen(level: int | None, cores: int = os.cpu_count() or 1) -> list[str]:
    """The variants a CPU of `level` with `cores` CPUs can run."""
    return [name for name, env in VARIANTS.items() if why_not(env, level, cores) is None]


def this_cpu() -> int | None:
    if "ATEN_CPU_CAPABILITY" in os.environ:  # this process's torch reports what it was told
        return cpu_level(capability(), platform.machine())
    import torch

    return cpu_level(torch.backends.cpu.get_cpu_capability(), platform.machine())


LEVEL = this_cpu()
CHOSEN = chosen(LEVEL)


def nbval_under(env: dict[str, str], notebooks: tuple[str, ...] = ("notebooks",)) -> tuple[int, str]:
    """(exit code, output) of nbval over `notebooks` in a pytest process with `env` added, niced;
    that process is killed after VARIANT_TIMEOUT_S (its kernels, ipykernel's, end with their parent)."""
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "--no-header", "-p", "no:xdist",
               "--nbval-current-env", *notebooks]  # the kernel inherits env (not the other-CPU kernel's own)
    process = subprocess.Popen(command, cwd=ROOT, env=os.environ | env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    os.setpriority(os.PRIO_PROCESS, process.pid, 10)  # the kernels it starts inherit it
    try:
        output, _ = process.communicate(timeout=VARIANT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return -1, f"nbval did not finish within {VARIANT_TIMEOUT_S} s\n{output}"
    return process.returncode, output


STARTUP_DEATH = "RuntimeError: Kernel died before replying to kernel_info"


def checked_under(env: dict[str, str]) -> tuple[int, str]:
    """nbval_under(env), with the notebooks whose kernel died before its first reply run once more: that is a
    kernel that failed to start, not an output that differs (seen once in a fresh-clone run with many kernels
    starting at once; its cause was not found). Any other failure stands as it is."""
    code, output = nbval_under(env)
    failures = re.findall(r"^(?:FAILED|ERROR) (\S+?\.ipynb)::.*? - (.*)$", output, re.M)
    if code != 0 and failures and all(STARTUP_DEATH in why for _, why in failures):
        again = tuple(sorted({path for path, _ in failures}))
        code, rerun = nbval_under(env, again)
        output += f"\n--- {', '.join(again)} again, after a kernel died starting:\n{rerun}"
    return code, output


@pytest.mark.portability
@pytest.mark.skipif(os.environ.get("GPTLIB_PORTABILITY") != "all",
                    reason="make test's nbval pass runs under a simulated other CPU itself; make portability runs them all")
@pytest.mark.timeout(VARIANT_TIMEOUT_S * -(-len(CHOSEN) // 3) + 120)  # three at a time, a rerun's time aside
def test_notebooks_match_their_outputs_under_other_cpus():
    with ThreadPoolExecutor(max_workers=3) as pool:  # three nbval processes at a time
        results = dict(zip(CHOSEN, pool.map(checked_under, [VARIANTS[name] for name in CHOSEN])))
    failed = {name: output for name, (code, output) in results.items() if code != 0}
    assert not failed, "\n\n".join(
        f"variant '{name}' ({' '.join(f'{k}={v}' for k, v in VARIANTS[name].items())}; torch reports "
        f"{capability(VARIANTS[name])}):\n{output[-4000:]}" for name, output in failed.items())


def test_make_tests_kernel_is_unlike_the_native_run_in_every_variable():
    assert {key: LEVELS[key][OTHER_CPU[key]] for key in LEVELS} == dict.fromkeys(LEVELS, 0)  # the lowest level of each
    assert int(OTHER_CPU["GPTLIB_NUM_THREADS"]) != inspect.signature(make_deterministic).parameters["threads"].default


def test_pytest_runs_the_notebooks_in_the_other_cpu_kernel_and_jupyter_finds_it():
    from jupyter_client.kernelspec import KernelSpecManager

    assert "--nbval-kernel-name=gptlib-other-cpu" in pytest_addopts()
    assert KernelSpecManager().get_kernel_spec("gptlib-other-cpu").env == OTHER_CPU


def pytest_addopts() -> list[str]:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"].split()


@pytest.mark.parametrize("level", [0, 1])
def test_a_cpu_without_avx512_never_asks_for_it_and_still_varies_kernels_matmuls_and_threads(level):
    runs = [VARIANTS[name] for name in chosen(level, cores=4)]
    assert all(LEVELS[key][value] <= level for env in runs for key, value in env.items() if key in LEVELS)
    assert "SIGILL" in why_not({"ATEN_CPU_CAPABILITY": "avx512"}, level)
    assert {key: {env[key] for env in runs if key in env} for key in LEVELS} == {
        key: {value for value, needs in values.items() if needs <= level} for key, values in LEVELS.items()}
    assert {env.get("GPTLIB_NUM_THREADS") for env in runs} >= {"1", "2", "3", "4"}


def test_an_avx512_cpu_runs_every_variant():
    assert chosen(level=2, cores=4) == list(VARIANTS)


def test_a_machine_is_never_asked_for_more_threads_than_it_has_cpus():
    """make_deterministic refuses a thread count above the CPUs (a notebook's first cell would fail)."""
    assert {VARIANTS[name].get("GPTLIB_NUM_THREADS") for name in chosen(level=2, cores=2)} == {None, "1", "2"}
    assert "more threads" in why_not({"GPTLIB_NUM_THREADS": "3"}, level=2, cores=2)


def test_on_a_cpu_that_is_not_x86_only_thread_counts_vary():
    assert [VARIANTS[name] for name in chosen(level=cpu_level("SVE256", "aarch64"), cores=4)] == [
        {}, *({"GPTLIB_NUM_THREADS": str(n)} for n in (2, 3, 4))]


@pytest.mark.slow  # a fresh interpreter per variable
def test_this_cpu_is_never_asked_for_more_than_it_has():
    native = capability()
    for asked in {VARIANTS[name]["ATEN_CPU_CAPABILITY"] for name in CHOSEN if "ATEN_CPU_CAPABILITY" in VARIANTS[name]}:
        reported = capability({"ATEN_CPU_CAPABILITY": asked})
        assert cpu_level(reported, platform.machine()) <= cpu_level(native, platform.machine()), f"{asked}: {reported}"


def test_cpu_levels_are_read_from_what_torch_reports():
    assert [cpu_level(native, "x86_64") for native in ("DEFAULT", "NO AVX", "AVX2", "AVX512")] == [0, 0, 1, 2]
    assert cpu_level("AVX2", "AMD64") == 1 and cpu_level("SVE256", "aarch64") is None
