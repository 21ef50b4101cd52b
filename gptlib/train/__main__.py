"""The command line that trains the shipped checkpoints (the exact commands: `make train-shakespeare`,
`make train-induction`); the loop it runs is gptlib.train's.

    python -m gptlib.train {shakespeare,induction} --steps N --out PATH [--state PATH [--resume]] [--device cuda]
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path

import torch

from .. import validation
from ..analysis import induction
from ..checkpoint import check_writable, load_weights_into, save_checkpoint
from ..model import GPT
from ..reproducibility import thread_count
from . import (
    DEVICES,
    Diverged,
    TrainSettings,
    check_device,
    keep_freed_memory,
    shakespeare_task,
    start_state,
    train,
)


def induction_task(settings: TrainSettings, args: argparse.Namespace):
    """Repeated random segments for training; evaluation: loss on each half of the fixed batch, head scores."""
    config = induction.INDUCTION_CONFIG
    tokens = induction.induction_eval_tokens(config).to(args.device)

    def next_batch(generator):
        return induction.training_batch(settings.batch_size, settings.T, config.V, generator)

    def evaluate(model):
        first, second = induction.half_losses(model, tokens)
        return {"loss_first_half": first, "loss_second_half": second}

    def final_metrics(model):
        previous, scores = induction.head_scores(model, tokens)
        return {**evaluate(model), "previous_token_scores": previous.tolist(), "induction_scores": scores.tolist()}

    return config, next_batch, evaluate, final_metrics


TASKS = {"shakespeare": shakespeare_task, "induction": induction_task}


def main(argv: list[str] | None = None) -> Path:
    """The command line: train one of TASKS, print periodic evaluations, write the checkpoint.

    Every flag and file is checked before any training: a bad one exits with code 2 and one
    line naming the flag and the rule. A run whose loss, gradients or weights become NaN or
    inf stops with exit code 1 and writes nothing more: --out and --state keep what they held.
    """
    parser = argparse.ArgumentParser(prog="python -m gptlib.train", description="Train one of the shipped checkpoints.")
    parser.add_argument("task", choices=sorted(TASKS))
    parser.add_argument("--out", type=Path, required=True, help="final checkpoint (weights, config, metadata)")
    parser.add_argument("--state", type=Path, help="resumable snapshot (adds AdamW state), written at each evaluation")
    parser.add_argument("--resume", action="store_true", help="continue from --state")
    parser.add_argument("--corpus", help="path to tinyshakespeare.txt (default: ../shared/data or the cache)")
    parser.add_argument("--download", action="store_true", help="fetch the corpus (sha256-checked) if it is not found")
    parser.add_argument("--eval-windows", type=int, default=200, help="held-out windows for periodic evaluation")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's own choice, one per core; on a machine "
                             "that other work keeps busy, 1 can be faster)")
    parser.add_argument("--device", default="cpu", choices=DEVICES,
                        help="where to train: cpu, cuda (an NVIDIA GPU) or mps (Apple silicon), if present")
    defaults = TrainSettings(steps=1)  # each flag's default and type
    for name, value in asdict(defaults).items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=type(value), default=None if name == "steps" else value, required=name == "steps",
                            help="TrainSettings." + name + ("" if name == "steps" else f" (default {value})"))
    args = parser.parse_args(argv)
    keep_freed_memory()
    try:  # a bad flag, corpus or snapshot: one line and exit code 2, before any work
        settings, config, model, resume, start, (next_batch, evaluate, final_metrics) = prepare(args)
    except (ValueError, OSError) as error:
        parser.error(str(error))
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    command = "python -m gptlib.train " + shlex.join(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter() - (resume or {}).get("wall_time_s", 0.0)

    snapshots = []  # steps saved to --state by this run

    def snapshot(step, losses, state):
        if args.state is not None:
            state["wall_time_s"] = time.perf_counter() - started
            save_checkpoint(args.state, model, {"task": args.task, "command": command}, training=state)
            snapshots.append(step)

    def stop(reason: str, code: int = 1):
        kept = "" if args.state is None else \
            f"; --state holds step {snapshots[-1]}" if snapshots else "; --state was not written"
        parser.exit(code, f"\n{parser.prog}: error: {reason}. --out was not written{kept}\n")

    try:
        state = train(model, next_batch, settings, evaluate, on_eval=snapshot, start=start)
    except Diverged as error:
        stop(str(error))
    except OSError as error:  # the disk filled up, or a folder went away or stopped taking files after the probe
        stop(f"could not write --state {args.state}: {error.strerror or error}")
    except KeyboardInterrupt:  # Ctrl-C: a save in progress removed its .part; say what is kept
        stop("interrupted", code=130)
    metadata = {
        "task": args.task, "command": command, "settings": asdict(settings), "steps": state["step"], "device": args.device,
        "tokens_seen": state["step"] * settings.batch_size * settings.T,
        "wall_time_s": round(time.perf_counter() - started, 1), "torch_version": str(torch.__version__),
        "history": state["history"], **final_metrics(model),
    }
    try:
        save_checkpoint(args.out, model, metadata)  # weights only: AdamW's state stays in --state
    except OSError as error:
        stop(f"could not write --out {args.out}: {error.strerror or error}")
    print({k: v for k, v in metadata.items() if k not in ("history", "settings")})
    return args.out


def prepare(args: argparse.Namespace):
    """Check every flag and file and build what the run needs; ValueError or OSError says what is wrong.

    Returns (settings, config, model, resume state or None, start_state's (optimizer, generator,
    step, history) for the model on its device, (next_batch, evaluate, final_metrics)).
    Nothing is written except an empty probe file in each output folder (created if needed).
    """
    if args.threads is not None:
        thread_count("--threads", args.threads)
    validation.integer("--eval-windows", args.eval_windows, at_least=1)
    if args.task != "shakespeare" and (args.corpus is not None or args.download):
        raise ValueError(f"--corpus and --download are for the shakespeare task; the {args.task} task has no corpus")
    device = check_device(args.device)
    try:
        settings = TrainSettings(**{f.name: getattr(args, f.name) for f in fields(TrainSettings)})
    except ValueError as error:
        raise ValueError(as_flags(str(error))) from None
    config, next_batch, evaluate, final_metrics = TASKS[args.task](settings, args)
    if settings.T > config.T_max:
        raise ValueError(f"--T {settings.T} exceeds the model's T_max={config.T_max}")
    try:  # the task's own rules on a batch (the induction task needs T >= 8)
        next_batch(torch.Generator().manual_seed(settings.seed))
    except ValueError as error:
        raise ValueError(f"--T {settings.T} does not suit the {args.task} task: {error}") from None
    torch.manual_seed(settings.seed)
    model = GPT(config)
    resume = None
    if args.resume:
        if args.state is None:
            raise ValueError("--resume needs --state PATH, the snapshot to continue from")
        try:
            payload = load_weights_into(model, args.state)
            if "training" not in payload:
                raise ValueError(f"{args.state} holds no resume state (a final --out checkpoint?)")
            validation.real("the resume state's wall_time_s", payload["training"].get("wall_time_s", 0.0), at_least=0)
        except (ValueError, OSError) as error:
            raise ValueError(f"--state: {error}") from None
        resume = payload["training"]
    model.to(device)  # initialised (or loaded) on the CPU: the same weights for every device
    try:  # AdamW built once, for the weights where they will train (fused on CPU and CUDA)
        start = start_state(model, settings, resume)
    except ValueError as error:
        raise ValueError(f"--state: {error}") from None
    for flag, path in (("--out", args.out), ("--state", args.state)):
        if path is not None:
            check_writable(path, name=flag)
    if args.state is not None and args.state.resolve() == args.out.resolve():
        raise ValueError("--state and --out must be different files: the final --out would replace the snapshot")
    return settings, config, model, resume, start, (next_batch, evaluate, final_metrics)


def as_flags(message: str) -> str:
    """A TrainSettings message with its field names spelled as flags: "grad_clip must" -> "--grad-clip must"."""
    names = sorted((f.name for f in fields(TrainSettings)), key=len, reverse=True)
    return re.sub(r"(?<![-\w])(" + "|".join(names) + r")\b", lambda m: "--" + m.group(1).replace("_", "-"), message)


if __name__ == "__main__":
    main()
