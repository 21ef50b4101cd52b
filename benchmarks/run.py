"""gptlib against Hugging Face GPT-2, TransformerLens and a fused nanoGPT-style reference, timed in one process.

    make bench                                  # installs the bench extra, then runs this
    .venv/bin/python -m benchmarks.run [--reps 15] [--warmup 2] [--threads 2] [--clock wall|cpu]
                                       [--import-reps 7] [--nbval] [--out benchmarks/results]

1. Correctness first: gptlib's weights are copied into every peer (gptlib.export,
   benchmarks.nanogpt) and the logits must agree to 1e-5 for the course config and a second
   config, or the run stops.
2. For each case (B, T) and each library, three measures: `forward` (no grad, the fast
   path), `forward_attn` (no grad, keeping every layer's attention matrices: gptlib's
   run_with_cache, GPT-2's eager attention with output_attentions, TransformerLens's
   run_with_cache, nanoGPT's manual attention path) and `train_step` (forward, cross-entropy,
   backward, AdamW step; torch's fused AdamW for all four, the optimizer gptlib's training
   command and Hugging Face's Trainer use). Like the training command, the process first asks
   glibc to keep freed memory (gptlib.train.keep_freed_memory), so no library's step is timed
   while it page-faults in memory the previous step handed back. Repetitions are interleaved
   (every library once, then again, in rotating order), so load from other processes falls on
   all of them alike. A ratio is the
   median over rounds of gptlib's time / the peer's time in the same round (paired, so a
   slow round cancels); the report gives its interquartile range too.
   Each round also times a 2048 x 2048 float32 matmul: its median GFLOP/s is the machine's
   peak for the model FLOP utilisation (MFU) of each training step:
       model FLOPs per token = 6 N + 12 L T d
   N = Theorem 5.2's parameters without E and P (gptlib.analysis.cost.non_embedding_parameters: the
   6N rule of Section 6), 12 L T d = 3 x (Q K^T + A V) forward, counted in full T x T as a
   dense kernel computes them (PaLM's convention; a causal kernel skipping the upper triangle
   does about half that work, so this slightly flatters MFU at long T).
3. `import gptlib` on top of `import torch`, measured in fresh interpreters; with --nbval,
   the wall time of the whole nbval suite (`pytest notebooks`) as well.

Cases: the course shapes (B = 32, T = 64, T_max = 64), then T in {64, 256, 1024} with
T_max = 1024 and B * T = 2048 tokens per batch, so the T^2 attention term (Section 6) shows.
Prints medians and ratios (gptlib's time / the peer's; below 1 means gptlib is faster) and
writes results.json, table.md (the README's table) and results.png under --out.
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
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch
import torch.nn.functional as F

import gptlib
from gptlib import COURSE_CONFIG, GPT, GPTConfig, run_with_cache
from gptlib.analysis.cost import non_embedding_parameters
from gptlib.export import to_huggingface, to_transformer_lens
from gptlib.train import keep_freed_memory

from .nanogpt import nanogpt_from
from .peers import max_logit_difference, scrambled_model

LIBRARIES = ("gptlib", "hf_gpt2", "transformer_lens", "nanogpt")
PEERS = LIBRARIES[1:]
SHORT = {"hf_gpt2": "hf", "transformer_lens": "tl", "nanogpt": "nano"}
MEASURES = ("forward", "forward_attn", "train_step")
TOLERANCE = 1e-5  # max |logit difference| allowed between gptlib and a peer
TARGETS = {"train_ratio_max": 1.0, "attn_over_fast_max": 1.3, "attn_over_fast_up_to_T": 256,
           "import_overhead_max_s": 0.3, "nbval_max_s": 40}
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}  # cpu: this process's CPU time, all threads
TOKENS_PER_BATCH = 2048  # B * T in the sequence-length sweep
MATMUL_N = 2048  # the peak: an (n x n) @ (n x n) float32 product, 2 n^3 FLOPs
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
        peers = {"hf_gpt2": to_huggingface(model), "hf_gpt2_eager": to_huggingface(model, "eager"),
                 "transformer_lens": to_transformer_lens(model), "nanogpt": nanogpt_from(model)}
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


def training_steps(models: dict, idx: torch.Tensor, targets: torch.Tensor) -> dict[str, Callable]:
    """library -> a call doing one training step of models[library] on idx, targets (B, T) each.

    Every library gets torch's fused AdamW over its trainable parameters (the peers' zeroed
    Q, K, V and W_U biases are frozen, gptlib.export), so all train the same parameters.
    """
    def cross_entropy(logits):  # logits (B, T, V)
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    losses = {  # library -> model -> (logits, mean cross-entropy)
        "gptlib": lambda m: m(idx, targets),
        "hf_gpt2": lambda m: cross_entropy(hf_logits(m, idx)),
        "transformer_lens": lambda m: cross_entropy(m(idx)),
        "nanogpt": lambda m: m(idx, targets),
    }
    steps = {}
    for library, m in models.items():
        optimizer = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=3e-4, fused=True)
        steps[library] = partial(train_step, optimizer, partial(losses[library], m))
    return steps


def runners(config: GPTConfig, B: int, T: int) -> dict[str, dict[str, Callable]]:
    """measure -> library -> a call doing one repetition, on four copies of one model.

    None of them has dropout, so train and eval mode compute the same.
    """
    model = GPT(config)
    hf, hf_eager, tl = to_huggingface(model), to_huggingface(model, "eager"), to_transformer_lens(model)
    nano = nanogpt_from(model)
    idx = torch.randint(0, config.V, (B, T))  # (B, T)
    targets = torch.randint(0, config.V, (B, T))  # (B, T)
    no_grad = torch.no_grad()
    return {
        "forward": {
            "gptlib": no_grad(lambda: model(idx)),
            "hf_gpt2": no_grad(lambda: hf_logits(hf, idx)),
            "transformer_lens": no_grad(lambda: tl(idx)),
            "nanogpt": no_grad(lambda: nano(idx)),
        },
        "forward_attn": {
            "gptlib": no_grad(lambda: run_with_cache(model, idx)),
            "hf_gpt2": no_grad(lambda: hf_eager(idx, use_cache=False, output_attentions=True)),
            "transformer_lens": no_grad(lambda: tl.run_with_cache(idx)),
            "nanogpt": no_grad(lambda: nano(idx, keep=[])),
        },
        "train_step": training_steps(dict(zip(LIBRARIES, (model, hf, tl, nano))), idx, targets),
    }


def seconds(call, clock) -> float:
    start = clock()
    call()
    return clock() - start


def matmul_call() -> Callable:
    a, b = torch.randn(MATMUL_N, MATMUL_N), torch.randn(MATMUL_N, MATMUL_N)
    return lambda: a @ b


def time_interleaved(all_runners: dict[str, dict], reps: int, warmup: int, clock) -> tuple[dict, list]:
    """(case -> measure -> library -> seconds per round, matmul seconds per round); every library once a round."""
    times = {case: {m: {lib: [] for lib in LIBRARIES} for m in MEASURES} for case in all_runners}
    matmul, matmul_s = matmul_call(), []
    for round_ in range(-warmup, reps):
        shift = round_ % len(LIBRARIES)
        order = LIBRARIES[shift:] + LIBRARIES[:shift]  # rotate who goes first
        for case, by_measure in all_runners.items():
            for measure, by_library in by_measure.items():
                for library in order:
                    elapsed = seconds(by_library[library], clock)
                    if round_ >= 0:
                        times[case][measure][library].append(elapsed)
        elapsed = seconds(matmul, clock)
        if round_ >= 0:
            matmul_s.append(elapsed)
        label = f"warm-up round {round_ + warmup + 1}/{warmup}" if round_ < 0 else f"round {round_ + 1}/{reps}      "
        print(f"  {label}", end="\r", flush=True)
    print()
    return times, matmul_s


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
    done = subprocess.run([sys.executable, "-m", "pytest", "notebooks", "-q", "-p", "no:cacheprovider"],
                          cwd=root, capture_output=True, text=True)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-200:]
    return {"wall_s": time.perf_counter() - start, "returncode": done.returncode, "summary": summary}


def paired(numerators: list[float], denominators: list[float]) -> dict:
    """Median and quartiles of the per-round ratios numerator / denominator."""
    ratios = sorted(a / b for a, b in zip(numerators, denominators))
    q1, median, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return {"median": median, "q1": q1, "q3": q3}


def model_flops_per_token(config: GPTConfig, T: int) -> int:
    """Training FLOPs per token, 6 N + 12 L T d (see the module docstring)."""
    return 6 * non_embedding_parameters(config) + 12 * config.L * T * config.d


def summarize(times: dict, case_rows: list, peak_flops: float) -> list[dict]:
    """Medians in ms, paired gptlib/peer ratios, gptlib's attention-keeping/fast ratio, training MFU."""
    out = []
    for label, config, B, T in case_rows:
        t = times[label]
        median_ms = {m: {lib: 1e3 * statistics.median(t[m][lib]) for lib in LIBRARIES} for m in MEASURES}
        ratio = {m: {peer: paired(t[m]["gptlib"], t[m][peer]) for peer in PEERS} for m in MEASURES}
        step_flops = model_flops_per_token(config, T) * B * T
        mfu = {lib: step_flops / (median_ms["train_step"][lib] / 1e3) / peak_flops for lib in LIBRARIES}
        out.append({"case": label, "B": B, "T": T, "T_max": config.T_max, "median_ms": median_ms, "ratio": ratio,
                    "attn_over_fast": paired(t["forward_attn"]["gptlib"], t["forward"]["gptlib"]),
                    "train_flops": step_flops, "mfu": mfu,
                    "tokens_per_s": {lib: B * T / (median_ms["train_step"][lib] / 1e3) for lib in LIBRARIES}})
    return out


def verdicts(rows: list[dict], imports: dict) -> dict:
    """Each of TARGETS: the measured value and whether it is met."""
    worst_train = max(r["median"] for row in rows for r in row["ratio"]["train_step"].values())
    worst_attn = max(row["attn_over_fast"]["median"] for row in rows if row["T"] <= TARGETS["attn_over_fast_up_to_T"])
    return {
        "train_step_ratio_worst": {"value": worst_train, "met": worst_train <= TARGETS["train_ratio_max"]},
        "attn_over_fast_worst_up_to_T=256": {"value": worst_attn, "met": worst_attn <= TARGETS["attn_over_fast_max"]},
        "import_overhead_s": {"value": imports["gptlib_on_top_s"],
                              "met": imports["gptlib_on_top_s"] < TARGETS["import_overhead_max_s"]},
    }


def installed_version(name: str) -> str:
    """The installed version of distribution `name`, or "not installed"."""
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def machine() -> dict:
    """CPU, core count and the versions of everything timed ("not installed" for a missing peer)."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor())
    versions = {name: installed_version(name) for name in ("gptlib", "transformers", "transformer-lens")}
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            **versions}


def loadavg() -> str:
    path = Path("/proc/loadavg")
    return " ".join(path.read_text().split()[:3]) if path.exists() else "n/a"


def busy_warning(load: str, threads: int) -> None:
    """Say so when other processes compete for the cores: ratios stay fair, absolute times do not."""
    cores = os.cpu_count() or 1
    if load != "n/a" and float(load.split()[0]) > cores - 0.5:
        print(f"warning: load average {load.split()[0]} on {cores} cores: other work competes for the CPU. "
              "Ratios are paired per round and stay comparable; absolute times are not."
              + (" With several threads per process a busy machine makes them wait on each other: "
                 "--threads 1 --clock cpu is steadier." if threads > 1 else ""))


def print_report(rows: list[dict], imports: dict, checks: dict, peak_gflops: float) -> None:
    print(f"\n{'case':<8}{'B':>4}{'T':>6}  {'measure':<13}" + "".join(f"{lib:>19}" for lib in LIBRARIES)
          + "".join(f"{'vs ' + SHORT[p]:>9}" for p in PEERS))
    for row in rows:
        for m in MEASURES:
            ms, r = row["median_ms"][m], row["ratio"][m]
            print(f"{row['case']:<8}{row['B']:>4}{row['T']:>6}  {m:<13}"
                  + "".join(f"{ms[lib]:>16.1f} ms" for lib in LIBRARIES)
                  + "".join(f"{r[p]['median']:>9.2f}" for p in PEERS))
        a = row["attn_over_fast"]
        print(f"{'':<20}gptlib forward_attn / forward = {a['median']:.2f} (quartiles {a['q1']:.2f}-{a['q3']:.2f}); "
              "train MFU " + ", ".join(f"{lib} {row['mfu'][lib]:.0%}" for lib in LIBRARIES))
    print(f"\nmatmul peak ({MATMUL_N}^2 float32, median): {peak_gflops:.0f} GFLOP/s; MFU = (6 N + 12 L T d) "
          "FLOPs per token x tokens / step time / peak, N = non-embedding parameters")
    print(f"import torch: {imports['import_torch_s']:.2f} s; import gptlib on top: "
          f"{imports['gptlib_on_top_s']:.3f} s (median of {imports['reps']})")
    for name, check in checks.items():
        print(f"target {name}: {check['value']:.3f} -> {'met' if check['met'] else 'MISSED'}")


def markdown_table(result: dict) -> str:
    """The README's table: one row per case, with the machine, versions and load it was measured under."""
    m, s = result["machine"], result["settings"]
    lines = [
        f"Measured by benchmarks.run on {m['cpu']} ({m['cores']} cores), torch threads: {s['threads']}, "
        f"python {m['python']}, torch {m['torch']}, transformers {m['transformers']}, "
        f"transformer-lens {m['transformer-lens']}; load average {result['loadavg_before']} before, "
        f"{result['loadavg_after']} after; medians of {s['reps']} interleaved rounds; "
        f"matmul peak {result['peak_gflops']:.0f} GFLOP/s.",
        "",
        "| shapes | training step (ms) gptlib / HF / TL / nano | train ratio vs HF / TL / nano | gptlib MFU "
        "| forward (ms) gptlib / HF / TL / nano | keep-A / fast |",
        "|---|---|---|---|---|---|",
    ]
    for row in result["cases"]:
        ms, r = row["median_ms"], row["ratio"]
        train = " / ".join(f"{ms['train_step'][lib]:.1f}" for lib in LIBRARIES)
        ratios = " / ".join(f"{r['train_step'][p]['median']:.2f}" for p in PEERS)
        forward = " / ".join(f"{ms['forward'][lib]:.1f}" for lib in LIBRARIES)
        shapes = f"course B={row['B']}, T={row['T']}" if row["case"] == "course" else \
            f"B={row['B']}, T={row['T']}, T_max={row['T_max']}"
        lines.append(f"| {shapes} | {train} | {ratios} | {row['mfu']['gptlib']:.0%} "
                     f"| {forward} | {row['attn_over_fast']['median']:.2f} |")
    nbval = result["nbval"]
    lines += ["", f"`import gptlib` adds {result['imports']['gptlib_on_top_s']:.3f} s to `import torch`"
              + (f"; the nbval suite ran in {nbval['wall_s']:.0f} s ({nbval['summary']})." if nbval else ".")]
    lines += ["", "Targets: " + "; ".join(f"{name} {check['value']:.3f} ({'met' if check['met'] else 'missed'})"
                                     for name, check in result["checks"].items()) + "."]
    return "\n".join(lines) + "\n"


def write_figure(rows: list[dict], path: Path) -> None:
    """Grouped bars per measure: median ms per case for each library (log scale)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 3.8), layout="constrained")
    axes = fig.subplots(1, len(MEASURES), sharey=True)
    width = 0.8 / len(LIBRARIES)
    for ax, measure in zip(axes, MEASURES):
        for i, lib in enumerate(LIBRARIES):
            xs = [j + (i - (len(LIBRARIES) - 1) / 2) * width for j in range(len(rows))]
            ax.bar(xs, [row["median_ms"][measure][lib] for row in rows], width, label=lib)
        ax.set_xticks(range(len(rows)), [f"{row['case']}\nB={row['B']}" for row in rows])
        ax.set_yscale("log")
        ax.set_title(measure)
    axes[0].set_ylabel("median time per call (ms)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=len(LIBRARIES))
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=15, help="timed rounds (every library, measure and case once each)")
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
    keep_freed_memory()
    gptlib.make_deterministic(seed=0, threads=args.threads)

    equivalence = check_equivalence()
    for row in equivalence:
        print(f"logits {row['config']:<7} gptlib vs {row['peer']:<17} max |diff| = {row['max_abs_diff']:.1e}")
    case_rows = cases()
    load_before = loadavg()
    print(f"timing {len(case_rows)} cases x {len(MEASURES)} measures x {len(LIBRARIES)} libraries, "
          f"{args.warmup} + {args.reps} rounds; load average {load_before}")
    busy_warning(load_before, args.threads)
    times, matmul_s = time_interleaved({label: runners(c, B, T) for label, c, B, T in case_rows}, args.reps,
                                       args.warmup, CLOCKS[args.clock])
    peak_flops = 2 * MATMUL_N**3 / statistics.median(matmul_s)
    load_after = loadavg()
    imports = import_overhead(args.import_reps)
    rows = summarize(times, case_rows, peak_flops)
    checks = verdicts(rows, imports)
    nbval = nbval_wall_time() if args.nbval else None
    if nbval is not None:
        checks["nbval_wall_s"] = {"value": nbval["wall_s"],
                                  "met": nbval["returncode"] == 0 and nbval["wall_s"] < TARGETS["nbval_max_s"]}
        print(f"nbval suite: {nbval['wall_s']:.1f} s wall, {nbval['summary']}")
    print_report(rows, imports, checks, peak_flops / 1e9)
    print(f"load average (1, 5, 15 min) before timing: {load_before}; after: {load_after}")

    result = {"machine": machine(), "loadavg_before": load_before, "loadavg_after": load_after,
              "settings": {"threads": args.threads, "clock": args.clock, "reps": args.reps, "warmup": args.warmup,
                           "tokens_per_batch_in_sweep": TOKENS_PER_BATCH, "matmul_n": MATMUL_N},
              "flops_convention": "6 N + 12 L T d per token; N = non-embedding parameters (without E, P)",
              "peak_gflops": peak_flops / 1e9, "equivalence": equivalence, "cases": rows, "imports": imports,
              "nbval": nbval, "targets": TARGETS, "checks": checks}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result, indent=2))
    (args.out / "table.md").write_text(markdown_table(result))
    write_figure(rows, args.out / "results.png")
    print(f"wrote results.json, table.md (the README's table) and results.png under {args.out}")
    return result


if __name__ == "__main__":
    main()
