"""Re-run the notebooks through nbval as if on other CPUs: the variants, which of them this CPU can run, and their runner.

A notebook's committed outputs must match on any learner's machine, not only on the one that
executed them. These environment variables, read when a process starts, change which float kernels
torch uses, so on one machine they stand in for other CPUs (the kernel that nbval starts inherits
them):

* ATEN_CPU_CAPABILITY: torch's own vectorised kernels (default = no SIMD, avx2, avx512). torch does
  NOT fall back when the CPU lacks the level asked for: it reports that level and dies with SIGILL
  at the first vectorised op. So a variant never asks for more than the CPU has (`runnable`);
* MKL_ENABLE_INSTRUCTIONS: the instruction set MKL's matmuls may use (SSE4_2, AVX2, AVX512);
* ONEDNN_MAX_CPU_ISA: the same for oneDNN (SSE41, AVX2);
* GPTLIB_NUM_THREADS: the thread count that gptlib.make_deterministic sets, overriding the
  notebook's `threads=1` (without it every notebook pins one thread and the count could not vary).

The three instruction-set variables exist on x86-64 only. On another CPU (ARM, Apple Silicon) none of
them means anything, and only the thread count is varied.

`ci_variants()` is what `make test` runs (tests/test_portability.py): the first three of `CI` this CPU
can run; `WIDE` adds every value of every variable on its own and more combinations (`make portability`,
or `python -m tests.support.portability`).
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The variants are data, one dict of environment variables each; their entries look alike on purpose.
# In order of preference: `make test` runs the first three that this CPU can run.
CI = {
    "no SIMD kernels, SSE matmuls, 1 thread": {
        "ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ONEDNN_MAX_CPU_ISA": "SSE41", "GPTLIB_NUM_THREADS": "1"},
    "avx2 everywhere, 2 threads": {
        "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2", "GPTLIB_NUM_THREADS": "2"},
    "avx512 kernels and matmuls, oneDNN at most AVX2, 1 thread": {
        "ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX512",
        "ONEDNN_MAX_CPU_ISA": "AVX2", "GPTLIB_NUM_THREADS": "1"},
    "avx2 kernels, SSE matmuls, oneDNN SSE41, 2 threads": {
        "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ONEDNN_MAX_CPU_ISA": "SSE41", "GPTLIB_NUM_THREADS": "2"},
    "no SIMD kernels, native matmuls, 2 threads": {
        "ATEN_CPU_CAPABILITY": "default", "GPTLIB_NUM_THREADS": "2"},
}

# Where no instruction-set variable applies (not x86-64), or too few variants are runnable.
THREADS_ONLY = {f"{n} thread{'s' * (n > 1)}": {"GPTLIB_NUM_THREADS": str(n)} for n in (2, 3, 4)}

ONE_AT_A_TIME = {
    f"{variable}={value}": {variable: value}
    for variable, values in (("ATEN_CPU_CAPABILITY", ("default", "avx2", "avx512")),
                             ("MKL_ENABLE_INSTRUCTIONS", ("SSE4_2", "AVX2", "AVX512")),
                             ("ONEDNN_MAX_CPU_ISA", ("SSE41", "AVX2")),
                             ("GPTLIB_NUM_THREADS", ("2",)))
    for value in values
}

WIDE = CI | ONE_AT_A_TIME | {
    "no SIMD kernels, AVX512 matmuls, 2 threads": {
        "ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "AVX512", "GPTLIB_NUM_THREADS": "2"},
    "avx512 kernels, SSE matmuls, oneDNN AVX2, 2 threads": {
        "ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ONEDNN_MAX_CPU_ISA": "AVX2", "GPTLIB_NUM_THREADS": "2"},
}

# The x86-64 instruction-set level each value asks for: 0 = none beyond SSE4, 1 = AVX2, 2 = AVX-512.
LEVELS = {
    "ATEN_CPU_CAPABILITY": {"default": 0, "avx2": 1, "avx512": 2},
    "MKL_ENABLE_INSTRUCTIONS": {"SSE4_2": 0, "AVX2": 1, "AVX512": 2},
    "ONEDNN_MAX_CPU_ISA": {"SSE41": 0, "AVX2": 1},
}
LEVEL_NAMES = ("no AVX2", "AVX2", "AVX-512")

# One variant re-runs every notebook: about a minute and a half alone on a quiet 2-core machine, and
# up to 7 minutes niced beside the rest of `make test`. Past this it has hung.
VARIANT_TIMEOUT_S = 900

BACKGROUND_NICENESS = 10

FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+\.ipynb::Cell \d+)", re.MULTILINE)


def capability(env: dict[str, str] | None = None) -> str:
    """What torch reports as its SIMD level under `env` added; with no env, the CPU's own level.

    ATEN_CPU_CAPABILITY is taken out of the inherited environment first, so the CPU's own level is
    what torch picks by itself. Asking is safe even for a level the CPU lacks: torch only dies once a
    vectorised kernel runs. The CPU's own level, asked in a process whose torch chose by itself, is
    read from that torch without starting another (every collection of the suite asks it).
    """
    if not env and "ATEN_CPU_CAPABILITY" not in os.environ:
        import torch

        return torch.backends.cpu.get_cpu_capability()
    return _capability(tuple(sorted((env or {}).items())))


@functools.cache
def _capability(env: tuple[tuple[str, str], ...]) -> str:  # one process per environment: torch reads it at start
    inherited = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run([sys.executable, "-c", code], env=inherited | dict(env), capture_output=True,
                          text=True, check=True, timeout=60).stdout.strip()


def cpu_level(native: str, machine: str) -> int | None:
    """The instruction-set level (index into LEVEL_NAMES) of an x86-64 CPU whose torch reports `native`
    ("DEFAULT", "AVX2", "AVX512", ...), or None where the instruction-set variables mean nothing."""
    if machine.lower() not in ("x86_64", "amd64"):
        return None
    return 2 if "AVX512" in native.upper() else 1 if "AVX2" in native.upper() else 0


def needed_level(env: dict[str, str]) -> int:
    """The highest instruction-set level any variable of `env` asks for (0 for a thread count alone)."""
    return max((LEVELS[key][value] for key, value in env.items() if key in LEVELS), default=0)


def why_not(env: dict[str, str], level: int | None) -> str | None:
    """Why a CPU of `level` cannot run the variant `env`, or None if it can."""
    if level is None and any(key in LEVELS for key in env):
        return "the instruction-set variables mean nothing on this CPU (not x86-64); only thread counts vary"
    if level is None or needed_level(env) <= level:
        return None
    lacks = f"it asks for {LEVEL_NAMES[needed_level(env)]}, which this CPU lacks (torch reports {LEVEL_NAMES[level]} at most)"
    if needed_level({key: env[key] for key in env if key == "ATEN_CPU_CAPABILITY"}) > level:
        return f"{lacks}: torch would die with SIGILL instead of falling back"
    return f"{lacks}: MKL and oneDNN fall back to what the CPU has, so it would only repeat another variant"


def choose(variants: dict[str, dict[str, str]], level: int | None, at_least: int = 3,
           at_most: int | None = 3) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """(chosen, skipped): the first `at_most` variants a CPU of `level` can run (all of them for None),
    topped up with thread counts to `at_least`, and {name: why} for every variant left out."""
    chosen, skipped = {}, {}
    for name, env in variants.items():
        reason = why_not(env, level)
        if reason is None and at_most is not None and len(chosen) >= at_most:
            reason = f"{at_most} variants are chosen already"
        if reason is None:
            chosen[name] = env
        else:
            skipped[name] = reason
    for name, env in THREADS_ONLY.items():
        if len(chosen) >= at_least:
            break
        if env not in chosen.values():
            chosen[name] = env
    return chosen, skipped


def ci_variants() -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """(chosen, skipped) among CI's variants for this machine's own CPU."""
    return choose(CI, cpu_level(capability(), platform.machine()))


class VariantRun:
    """One variant's nbval run in a process of its own, started now; `result()` waits for its verdict.

    Its output goes to a temporary file, not a pipe, so nothing blocks while nobody reads it.
    """

    def __init__(self, env: dict[str, str], notebooks: list[str], timeout: float = VARIANT_TIMEOUT_S):
        self.timeout, self.deadline = timeout, time.monotonic() + timeout
        self.log = tempfile.TemporaryFile()
        command = [sys.executable, "-m", "pytest", "-q", "-rfE", "--no-header", *notebooks]
        self.process = subprocess.Popen(command, cwd=ROOT, env=os.environ | env, stdout=self.log,
                                        stderr=subprocess.STDOUT)
        # Background work: the rest of the suite, whose browser tests wait on pages, goes first.
        # The kernels it starts inherit this priority.
        os.setpriority(os.PRIO_PROCESS, self.process.pid, BACKGROUND_NICENESS)

    def result(self) -> tuple[list[str], str]:
        """The failed cells ('path::Cell n') and pytest's output, once the run ends or its time is up."""
        try:
            code = self.process.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            return [f"nbval did not finish within {self.timeout:.0f} s"], self.output()
        output = self.output()
        failed = FAILED.findall(output)
        if code != 0 and not failed:  # pytest itself broke: no cell to blame
            failed = [f"pytest exited with {code}"]
        return failed, output

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def run_variant(env: dict[str, str], notebooks: list[str], timeout: float = VARIANT_TIMEOUT_S) -> tuple[list[str], str]:
    """nbval over `notebooks` with `env` added: the failed cells ('path::Cell n') and pytest's output."""
    return VariantRun(env, notebooks, timeout).result()


_CI_RUNS: dict[str, VariantRun] = {}


def ci_run(name: str) -> VariantRun:
    """The nbval run over notebooks/ of CI's chosen variant `name`, started the first time it is asked
    for (conftest.py asks for every selected one when the first portability test is set up)."""
    if name not in _CI_RUNS:
        _CI_RUNS[name] = VariantRun(ci_variants()[0][name], ["notebooks"])
    return _CI_RUNS[name]


def stop_ci_runs() -> None:
    """Kill whatever CI variant run is still going (the suite ended or was stopped before waiting for it)."""
    for run in _CI_RUNS.values():
        run.stop()


def describe(name: str, env: dict[str, str]) -> str:
    settings = " ".join(f"{key}={value}" for key, value in env.items())
    return f"variant '{name}' ({settings}; torch reports {capability(env)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--matrix", choices=("ci", "wide"), default="wide")
    parser.add_argument("notebooks", nargs="*", default=["notebooks"])
    args = parser.parse_args(argv)
    level = cpu_level(capability(), platform.machine())
    variants, skipped = choose(CI, level) if args.matrix == "ci" else choose(WIDE, level, at_most=None)
    print(f"this CPU: {platform.machine()}, torch reports {capability()}", flush=True)
    for name, reason in skipped.items():
        print(f"skipped variant '{name}': {reason}", flush=True)
    failures = 0
    for name, env in variants.items():
        start = time.perf_counter()
        failed, output = run_variant(env, args.notebooks)
        verdict = "passed" if not failed else "FAILED: " + ", ".join(failed)
        print(f"{describe(name, env)}: {verdict} [{time.perf_counter() - start:.0f} s]", flush=True)
        if failed:
            failures += 1
            print(output[-6000:], flush=True)
    print(f"{len(variants) - failures} of {len(variants)} variants passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
