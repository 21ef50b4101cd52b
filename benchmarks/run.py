"""gptlib against Hugging Face GPT-2 and TransformerLens, timed in one process, interleaved.

    make bench                                  # installs the bench extra, then runs this
    .venv/bin/python -m benchmarks.run [--reps 9] [--threads 2] [--clock wall|cpu] [--out benchmarks/results]

1. Correctness first: gptlib's weights are copied into both peers (benchmarks.peers) and the
   logits must agree to 1e-5 for the course config and a second config, or the run stops.
2. For each case (B, T) and each library, three measures: `forward` (no grad, the fast
   path), `forward_attn` (no grad, keeping every layer's attention matrices: gptlib's
   run_with_cache, GPT-2's eager attention with output_attentions, TransformerLens's
   run_with_cache) and `train_step` (forward, cross-entropy, backward, AdamW step).
   Repetitions are interleaved (every library once, then again, in rotating order), so load
   from other processes falls on all of them alike; medians are reported.
3. `import gptlib` on top of `import torch`, measured in fresh interpreters; with --nbval,
   the wall time of the whole nbval suite (`pytest notebooks`) as well.

Cases: the course shapes (B = 32, T = 64, T_max = 64), then T in {64, 256, 1024} with
T_max = 1024 and B * T = 2048 tokens per batch, so the T^2 attention term (Section 6) shows.
Prints medians and ratios (gptlib's time / the peer's; below 1 means gptlib is faster) and
writes results.json and results.png under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import torch
import torch.nn.functional as F

import gptlib
from gptlib import COURSE_CONFIG, GPT, GPTConfig, run_with_cache

from .peers import hf_gpt2_from, hooked_transformer_from, max_logit_difference, scrambled_model

LIBRARIES = ("gptlib", "hf_gpt2", "transformer_lens")
MEASURES = ("forward", "forward_attn", "train_step")
TOLERANCE = 1e-5  # max |logit difference| allowed between gptlib and a peer
TARGETS = {"train_ratio_max": 1.0, "attn_over_fast_max": 1.3, "import_overhead_max_s": 0.3, "nbval_max_s": 120}
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}  # cpu: this process's CPU time, all threads
TOKENS_PER_BATCH = 2048  # B * T in the sequence-length sweep
LONG_CONFIG = COURSE_CONFIG.replace(T_max=1024)
SECOND_CONFIG = GPTConfig(V=97, T_max=128, d=96, H=6, L=3, d_ff=200, ln_eps=1e-6)


def cases() -> list[tuple[str, GPTConfig, int, int]]:
    """(label, config, B, T): the course shapes, then the sequence-length sweep."""
    sweep = [(f"T={T}", LONG_CONFIG, TOKENS_PER_BATCH // T, T) for T in (64, 256, 1024)]
    return [("course", COURSE_CONFIG, 32, 64), *sweep]


def check_equivalence() -> list[dict]:
    """Max logit difference between gptlib and each peer, for two configs; exits if any is too large."""
    rows = []
    for label, config in (("course", COURSE_CONFIG), ("second", SECOND_CONFIG)):
        model = scrambled_model(config)
        idx = torch.randint(0, config.V, (4, config.T_max))  # (B, T), random tokens
        peers = {"hf_gpt2": hf_gpt2_from(model), "hf_gpt2_eager": hf_gpt2_from(model, "eager"),
                 "transformer_lens": hooked_transformer_from(model)}
        for name, peer in peers.items():
            rows.append({"config": label, "peer": name, "max_abs_diff": max_logit_difference(model, peer, idx)})
    bad = [row for row in rows if not row["max_abs_diff"] <= TOLERANCE]
    if bad:
        sys.exit(f"peers disagree with gptlib beyond {TOLERANCE}: {bad}")
    return rows


def hf_logits(hf, idx: torch.Tensor) -> torch.Tensor:
    return hf(idx, use_cache=False).logits  # (B, T, V); no key/value cache, as in training


def train_step(optimizer, logits_and_loss: Callable) -> None:
    """One step: forward with cross-entropy, backward, AdamW update."""
    optimizer.zero_grad(set_to_none=True)
    logits_and_loss()[1].backward()
    optimizer.step()


def runners(config: GPTConfig, B: int, T: int) -> dict[str, dict[str, Callable]]:
    """measure -> library -> a call doing one repetition, on three copies of one model.

    None of the three has dropout, so train and eval mode compute the same; the peers' zeroed
    Q, K, V and W_U biases are frozen (benchmarks.peers), so all three train the same parameters.
    """
    model = GPT(config)
    hf, hf_eager, tl = hf_gpt2_from(model), hf_gpt2_from(model, "eager"), hooked_transformer_from(model)
    idx = torch.randint(0, config.V, (B, T))  # (B, T)
    targets = torch.randint(0, config.V, (B, T))  # (B, T)

    def cross_entropy(logits):  # logits (B, T, V)
        return logits, F.cross_entropy(logits.reshape(-1, config.V), targets.reshape(-1))

    optimizers = {name: torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=3e-4)
                  for name, m in (("gptlib", model), ("hf_gpt2", hf), ("transformer_lens", tl))}
    no_grad = torch.no_grad()
    return {
        "forward": {
            "gptlib": no_grad(lambda: model(idx)),
            "hf_gpt2": no_grad(lambda: hf_logits(hf, idx)),
            "transformer_lens": no_grad(lambda: tl(idx)),
        },
        "forward_attn": {
            "gptlib": no_grad(lambda: run_with_cache(model, idx)),
            "hf_gpt2": no_grad(lambda: hf_eager(idx, use_cache=False, output_attentions=True)),
            "transformer_lens": no_grad(lambda: tl.run_with_cache(idx)),
        },
        "train_step": {
            "gptlib": lambda: train_step(optimizers["gptlib"], lambda: model(idx, targets)),
            "hf_gpt2": lambda: train_step(optimizers["hf_gpt2"], lambda: cross_entropy(hf_logits(hf, idx))),
            "transformer_lens": lambda: train_step(optimizers["transformer_lens"], lambda: cross_entropy(tl(idx))),
        },
    }


def seconds(call, clock) -> float:
    start = clock()
    call()
    return clock() - start


def time_interleaved(all_runners: dict[str, dict], reps: int, warmup: int, clock) -> dict[str, dict]:
    """case -> measure -> library -> list of seconds, every library timed once per round."""
    times = {case: {m: {lib: [] for lib in LIBRARIES} for m in MEASURES} for case in all_runners}
    for round_ in range(-warmup, reps):
        order = LIBRARIES[round_ % 3:] + LIBRARIES[: round_ % 3]  # rotate who goes first
        for case, by_measure in all_runners.items():
            for measure, by_library in by_measure.items():
                for library in order:
                    elapsed = seconds(by_library[library], clock)
                    if round_ >= 0:
                        times[case][measure][library].append(elapsed)
    return times


def import_overhead(reps: int) -> dict:
    """Seconds `import torch` takes, and `import gptlib` after it, each in a fresh interpreter."""
    code = ("import time; t0 = time.perf_counter(); import torch; t1 = time.perf_counter(); "
            "import gptlib; t2 = time.perf_counter(); print(t1 - t0, t2 - t1)")
    torch_s, gptlib_s = [], []
    for _ in range(reps):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        a, b = map(float, out.split())
        torch_s.append(a)
        gptlib_s.append(b)
    return {"reps": reps, "import_torch_s": statistics.median(torch_s), "gptlib_on_top_s": statistics.median(gptlib_s)}


def nbval_wall_time() -> dict:
    """Wall time of `pytest notebooks` (nbval re-executes and compares every notebook) in a subprocess."""
    root = Path(__file__).resolve().parent.parent
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "notebooks", "-q"], cwd=root, capture_output=True, text=True)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-200:]
    return {"wall_s": time.perf_counter() - start, "returncode": done.returncode, "summary": summary}


def summarize(times: dict, case_rows: list) -> list[dict]:
    """Medians in ms, gptlib/peer ratios per measure, and gptlib's attention-keeping/fast ratio."""
    out = []
    for label, config, B, T in case_rows:
        median_ms = {m: {lib: 1e3 * statistics.median(times[label][m][lib]) for lib in LIBRARIES} for m in MEASURES}
        ratio = {m: {peer: median_ms[m]["gptlib"] / median_ms[m][peer] for peer in LIBRARIES[1:]} for m in MEASURES}
        out.append({"case": label, "B": B, "T": T, "T_max": config.T_max, "median_ms": median_ms, "ratio": ratio,
                    "attn_over_fast": median_ms["forward_attn"]["gptlib"] / median_ms["forward"]["gptlib"]})
    return out


def verdicts(rows: list[dict], imports: dict) -> dict:
    """Each of TARGETS: the measured value and whether it is met."""
    worst_train = max(max(row["ratio"]["train_step"].values()) for row in rows)
    course_attn = rows[0]["attn_over_fast"]
    return {
        "train_step_ratio_worst": {"value": worst_train, "met": worst_train <= TARGETS["train_ratio_max"]},
        "attn_over_fast_course": {"value": course_attn, "met": course_attn <= TARGETS["attn_over_fast_max"]},
        "import_overhead_s": {"value": imports["gptlib_on_top_s"],
                              "met": imports["gptlib_on_top_s"] < TARGETS["import_overhead_max_s"]},
    }


def machine() -> dict:
    """CPU, core count and the versions of everything timed."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor())
    versions = {name: version(name) for name in ("gptlib", "transformers", "transformer-lens")}
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            **versions}


def loadavg() -> str:
    path = Path("/proc/loadavg")
    return " ".join(path.read_text().split()[:3]) if path.exists() else "n/a"


def print_report(rows: list[dict], imports: dict, checks: dict) -> None:
    print(f"\n{'case':<8}{'B':>4}{'T':>6}  {'measure':<13}" + "".join(f"{lib:>18}" for lib in LIBRARIES)
          + f"{'vs hf':>8}{'vs tl':>8}")
    for row in rows:
        for m in MEASURES:
            ms = row["median_ms"][m]
            r = row["ratio"][m]
            print(f"{row['case']:<8}{row['B']:>4}{row['T']:>6}  {m:<13}"
                  + "".join(f"{ms[lib]:>15.1f} ms" for lib in LIBRARIES)
                  + f"{r['hf_gpt2']:>8.2f}{r['transformer_lens']:>8.2f}")
        print(f"{'':<20}gptlib forward_attn / forward = {row['attn_over_fast']:.2f}")
    print(f"\nimport torch: {imports['import_torch_s']:.2f} s; import gptlib on top: "
          f"{imports['gptlib_on_top_s']:.3f} s (median of {imports['reps']})")
    for name, check in checks.items():
        print(f"target {name}: {check['value']:.3f} -> {'met' if check['met'] else 'MISSED'}")


def write_figure(rows: list[dict], path: Path) -> None:
    """Grouped bars per measure: median ms per case for each library (log scale)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 3.8), layout="constrained")
    axes = fig.subplots(1, len(MEASURES), sharey=True)
    width = 0.8 / len(LIBRARIES)
    for ax, measure in zip(axes, MEASURES):
        for i, lib in enumerate(LIBRARIES):
            xs = [j + (i - 1) * width for j in range(len(rows))]
            ax.bar(xs, [row["median_ms"][measure][lib] for row in rows], width, label=lib)
        ax.set_xticks(range(len(rows)), [f"{row['case']}\nB={row['B']}" for row in rows])
        ax.set_yscale("log")
        ax.set_title(measure)
    axes[0].set_ylabel("median time per call (ms)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=len(LIBRARIES))
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=9, help="timed repetitions per library and measure")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or CPU time (steadier on a loaded machine with --threads 1)")
    parser.add_argument("--import-reps", type=int, default=7, help="fresh interpreters for the import cost")
    parser.add_argument("--nbval", action="store_true", help="also time the whole nbval suite (pytest notebooks)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    if args.reps < 1 or args.threads < 1 or args.import_reps < 1 or args.warmup < 0:
        parser.error("--reps, --threads and --import-reps must be >= 1 and --warmup >= 0")
    gptlib.make_deterministic(seed=0, threads=args.threads)

    equivalence = check_equivalence()
    for row in equivalence:
        print(f"logits {row['config']:<7} gptlib vs {row['peer']:<17} max |diff| = {row['max_abs_diff']:.1e}")
    case_rows = cases()
    load_before = loadavg()
    times = time_interleaved({label: runners(c, B, T) for label, c, B, T in case_rows}, args.reps, args.warmup,
                             CLOCKS[args.clock])
    imports = import_overhead(args.import_reps)
    rows = summarize(times, case_rows)
    checks = verdicts(rows, imports)
    nbval = nbval_wall_time() if args.nbval else None
    if nbval is not None:
        checks["nbval_wall_s"] = {"value": nbval["wall_s"], "met": nbval["wall_s"] < TARGETS["nbval_max_s"]}
        print(f"nbval suite: {nbval['wall_s']:.1f} s wall, {nbval['summary']}")
    print_report(rows, imports, checks)
    print(f"load average (1, 5, 15 min) before timing: {load_before}; after: {loadavg()}")

    result = {"machine": machine(), "loadavg_before": load_before, "loadavg_after": loadavg(),
              "settings": {"threads": args.threads, "clock": args.clock, "reps": args.reps, "warmup": args.warmup,
                           "tokens_per_batch_in_sweep": TOKENS_PER_BATCH},
              "equivalence": equivalence, "cases": rows, "imports": imports, "nbval": nbval,
              "targets": TARGETS, "checks": checks}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result, indent=2))
    write_figure(rows, args.out / "results.png")
    print(f"wrote {args.out / 'results.json'} and {args.out / 'results.png'}")
    return result


if __name__ == "__main__":
    main()
