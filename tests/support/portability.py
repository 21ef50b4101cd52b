"""Re-run the notebooks through nbval as if on other CPUs: the variants and their runner.

A notebook's committed outputs must match on any learner's machine, not only on the one that
executed them. These environment variables, read when a process starts, change which float kernels
torch uses, so on one machine they stand in for other CPUs (the kernel that nbval starts inherits
them):

* ATEN_CPU_CAPABILITY: torch's own vectorised kernels (default = no SIMD, avx2, avx512; a
  capability the CPU lacks falls back to the best it has, so the label below says what ATen chose);
* MKL_ENABLE_INSTRUCTIONS: the instruction set MKL's matmuls may use (SSE4_2, AVX2, AVX512);
* ONEDNN_MAX_CPU_ISA: the same for oneDNN (SSE41, AVX2);
* GPTLIB_NUM_THREADS: the thread count that gptlib.make_deterministic sets, overriding the
  notebook's `threads=1` (without it every notebook pins one thread and the count could not vary).

`CI` runs in `make test` (tests/test_portability.py); `WIDE` adds every value of every variable on
its own and more combinations (`make portability`, or `python -m tests.portability`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

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
}

ONE_AT_A_TIME = {
    f"{variable}={value}": {variable: value}
    for variable, values in (("ATEN_CPU_CAPABILITY", ("default", "avx2", "avx512")),
                             ("MKL_ENABLE_INSTRUCTIONS", ("SSE4_2", "AVX2", "AVX512")),
                             ("ONEDNN_MAX_CPU_ISA", ("SSE41", "AVX2")),
                             ("GPTLIB_NUM_THREADS", ("2",)))
    for value in values
}

# The variants are data, one dict of environment variables each; their entries look alike on purpose.
WIDE = CI | ONE_AT_A_TIME | {
    "no SIMD kernels, AVX512 matmuls, 2 threads": {
        "ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "AVX512", "GPTLIB_NUM_THREADS": "2"},
    "avx512 kernels, SSE matmuls, oneDNN AVX2, 2 threads": {
        "ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ONEDNN_MAX_CPU_ISA": "AVX2", "GPTLIB_NUM_THREADS": "2"},
    "avx2 kernels, SSE matmuls, oneDNN SSE41, 2 threads": {
        "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ONEDNN_MAX_CPU_ISA": "SSE41", "GPTLIB_NUM_THREADS": "2"},
}

# Waiting threads sleep instead of spinning: on a busy shared machine two spinning threads made
# the runs up to ten times slower. It changes no result.
QUIET_THREADS = {"OMP_WAIT_POLICY": "PASSIVE"}

FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+\.ipynb::Cell \d+)", re.MULTILINE)


def capability(env: dict[str, str]) -> str:
    """The SIMD level torch's kernels actually use under `env` (a CPU without avx512 falls back)."""
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run([sys.executable, "-c", code], env=os.environ | env, capture_output=True,
                          text=True, check=True).stdout.strip()


def run_variant(env: dict[str, str], notebooks: list[str]) -> tuple[list[str], str]:
    """nbval over `notebooks` with `env` added: the failed cells ('path::Cell n') and pytest's output."""
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "--no-header", *notebooks]
    result = subprocess.run(command, cwd=ROOT, env=os.environ | QUIET_THREADS | env, capture_output=True, text=True)
    failed = FAILED.findall(result.stdout)
    if result.returncode != 0 and not failed:  # pytest itself broke: no cell to blame
        failed = [f"pytest exited with {result.returncode}"]
    return failed, result.stdout + result.stderr


def describe(name: str, env: dict[str, str]) -> str:
    settings = " ".join(f"{key}={value}" for key, value in env.items())
    return f"variant '{name}' ({settings}; ATen uses {capability(env)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--matrix", choices=("ci", "wide"), default="wide")
    parser.add_argument("notebooks", nargs="*", default=["notebooks"])
    args = parser.parse_args(argv)
    variants = CI if args.matrix == "ci" else WIDE
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
