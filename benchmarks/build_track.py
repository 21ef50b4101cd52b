"""The build track's claim, measured: a GPT written plainly in torch (gptlib.exercises.answers.build:
explicit attention matrices, LayerNorm as a formula, one module per head) trained on tiny Shakespeare
with the build track's settings reaches held-out loss below 2.0 nats/char within 3 minutes, and its
curve tracks gptlib's own GPT trained with the same settings, batches and seed.

    .venv/bin/python -m benchmarks.build_track [--steps 600] [--threads N] [--corpus PATH] [--out PATH]

Writes both runs (steps, wall and CPU seconds, held-out and training losses), the machine, the load
average before and after, and the command (paths cut to file names), as JSON: notebook 09 reads it
(own_model.load_measured_runs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
from dataclasses import asdict, replace
from pathlib import Path

import torch

from gptlib import COURSE_CONFIG, GPT
from gptlib.exercises.answers import build as build_solutions
from gptlib.train import keep_freed_memory
from gptlib.train.own_model import BUILD_SETTINGS, MEASURED_RUNS, TARGET_LOSS, TARGET_SECONDS, train_on_shakespeare

from .run import loadavg


def plain_gpt(seed: int) -> build_solutions.GPT:
    """The reference solution at the course sizes, initialised as Project aside 5.2 says."""
    torch.manual_seed(seed)
    c = COURSE_CONFIG
    return build_solutions.init_weights(build_solutions.GPT(c.V, c.T_max, c.d, c.H, c.L, c.d_ff))


def machine() -> dict:
    """CPU (from /proc/cpuinfo), core count, python and torch versions."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "threads": torch.get_num_threads()}


def shown_command(argv: list[str]) -> str:
    """The command as run, each path cut to its file name (a stored record names no machine's folders)."""
    return shlex.join(["python", "-m", "benchmarks.build_track"] + [Path(a).name if "/" in a else a for a in argv])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.build_track", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=BUILD_SETTINGS.steps)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--out", type=Path, default=MEASURED_RUNS)
    parser.add_argument("--corpus", help="path to tinyshakespeare.txt (default: ../shared/data or the cache)")
    args = parser.parse_args(argv)
    keep_freed_memory()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    settings = replace(BUILD_SETTINGS, steps=args.steps)
    result = {"command": shown_command(sys.argv[1:] if argv is None else argv), "machine": machine(),
              "load_average_before": loadavg(), "settings": asdict(settings), "runs": []}
    torch.manual_seed(settings.seed)
    models = {"plain GPT (build_solutions)": lambda: plain_gpt(settings.seed), "gptlib GPT": lambda: GPT(COURSE_CONFIG)}
    runs = []
    for name, build in models.items():
        torch.manual_seed(settings.seed)
        runs.append(train_on_shakespeare(build(), settings, name=name, corpus=args.corpus))
        result.update(load_average_after=loadavg(), runs=[asdict(run) for run in runs])
        args.out.write_text(json.dumps(result, indent=1) + "\n")  # after each run: a later failure keeps it
    for run in runs:
        seconds = run.reached(TARGET_LOSS)
        when = f"{seconds:.0f} s" if seconds is not None else "never"
        print(f"{run.name}: held-out {run.val_losses[-1]:.3f} after {run.steps[-1]} steps, {run.seconds[-1]:.0f} s "
              f"({run.cpu_seconds[-1]:.0f} s CPU); "
              f"below {TARGET_LOSS} after {when} (target {TARGET_SECONDS} s)")
    print(f"load average {result['load_average_before']} before, {result['load_average_after']} after; wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
