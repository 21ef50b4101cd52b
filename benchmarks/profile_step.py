"""Where gptlib's training step and the fused nanoGPT-style reference's differ, operator by operator.

    .venv/bin/python -m benchmarks.profile_step [--case course] [--threads 2] [--rounds 6] [--top 20]

Builds gptlib's model and its nanoGPT-style copy for one case of benchmarks.run (the same
weights, batch and fused AdamW; no other peer, so the bench extra is not needed), keeps freed
memory as the benchmark does, then profiles a few training steps of each, alternating which
goes first, with torch.profiler. Prints each library's profiled milliseconds per step and the
operators whose self time differs most (gptlib minus nanoGPT), so that a ratio above 1.0 in
`make bench` can be traced to the operators that make it. Profiling adds its own overhead to
every operator call: compare the two columns, not the totals with `make bench`.
"""

from __future__ import annotations

import argparse
from collections import Counter

import torch
from torch.profiler import ProfilerActivity, profile

import gptlib
from gptlib import GPT
from gptlib.train import keep_freed_memory

from .nanogpt import nanogpt_from
from .run import cases, training_steps

LIBRARIES = ("gptlib", "nanogpt")


def self_ms_per_step(step, steps: int) -> Counter:
    """operator name -> self CPU milliseconds per training step, over `steps` profiled steps."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    return Counter({event.key: event.self_cpu_time_total / 1e3 / steps for event in prof.key_averages()})


def main(argv: list[str] | None = None) -> dict[str, Counter]:
    labels = [label for label, *_ in cases()]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", choices=labels, default="course", help="one of benchmarks.run's cases")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--rounds", type=int, default=6, help="profiled rounds, two steps per library each")
    parser.add_argument("--top", type=int, default=20, help="operators to list")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.rounds < 1 or args.top < 1:
        parser.error("--threads, --rounds and --top must be >= 1")
    keep_freed_memory()
    gptlib.make_deterministic(seed=0, threads=args.threads)
    _, config, B, T = next(case for case in cases() if case[0] == args.case)
    model = GPT(config)
    idx, targets = torch.randint(0, config.V, (2, B, T))  # (B, T) each
    steps = training_steps({"gptlib": model, "nanogpt": nanogpt_from(model)}, idx, targets)
    for _ in range(5):  # warm-up: the heap reaches its peak, kernels pick their paths
        for step in steps.values():
            step()
    totals = {lib: Counter() for lib in LIBRARIES}
    for round_ in range(args.rounds):
        for lib in LIBRARIES[round_ % 2:] + LIBRARIES[: round_ % 2]:  # alternate who goes first
            totals[lib].update({op: ms / args.rounds for op, ms in self_ms_per_step(steps[lib], 2).items()})
    print(f"{args.case}: B={B}, T={T}, {args.threads} threads; profiled ms per training step: "
          + ", ".join(f"{lib} {sum(totals[lib].values()):.2f}" for lib in LIBRARIES))
    g, n = totals["gptlib"], totals["nanogpt"]
    print(f"{'operator':<62}{'gptlib ms':>11}{'nanogpt ms':>12}{'difference':>12}")
    for op in sorted(set(g) | set(n), key=lambda op: -abs(g[op] - n[op]))[: args.top]:
        print(f"{op[:61]:<62}{g[op]:>11.3f}{n[op]:>12.3f}{g[op] - n[op]:>+12.3f}")
    return totals


if __name__ == "__main__":
    main()
