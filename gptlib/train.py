"""Training: AdamW on next-token cross-entropy (Section 5's loss), with resume and a command line.

    python -m gptlib.train {shakespeare,induction} --steps N --out PATH [--state PATH [--resume]]
    (the exact commands of the shipped checkpoints: `make train-shakespeare`, `make train-induction`)

The loop is generic: `next_batch(generator) -> (inputs, targets)` supplies data, and resume
restores the weights, AdamW's state, the step and the batch generator's state, so training
k steps, saving, loading and training m more gives the same weights as k + m steps straight.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm

from . import data, induction
from .checkpoint import load_weights_into, save_checkpoint
from .config import COURSE_CONFIG
from .induction import induction_eval_tokens  # noqa: F401  (notebook 08 imports it from here until it is re-run)
from .model import GPT

Batch = tuple[torch.Tensor, torch.Tensor]  # inputs (B, T), targets (B, T)

@dataclass(frozen=True)
class TrainSettings:
    """Optimisation hyperparameters: AdamW, linear warmup then cosine decay to min_lr."""

    steps: int
    batch_size: int = 32
    T: int = 64  # sequence length of a training window
    lr: float = 2e-3
    min_lr: float = 1e-4
    warmup: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 250
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "T", "eval_every"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if not 0 < self.min_lr <= self.lr:
            raise ValueError(f"need 0 < min_lr <= lr, got min_lr={self.min_lr}, lr={self.lr}")


def learning_rate(step: int, settings: TrainSettings) -> float:
    """Learning rate at a 0-based step: linear warmup over `warmup` steps, then cosine to min_lr."""
    if step < settings.warmup:
        return settings.lr * (step + 1) / settings.warmup
    progress = (step - settings.warmup) / max(1, settings.steps - settings.warmup)
    return settings.min_lr + 0.5 * (settings.lr - settings.min_lr) * (1 + math.cos(math.pi * min(progress, 1.0)))


def make_optimizer(model: GPT, settings: TrainSettings) -> torch.optim.AdamW:
    """AdamW with weight decay on weight matrices and embeddings, none on gains and biases."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=settings.lr, betas=(0.9, 0.95))


@torch.no_grad()
def mean_loss(model: GPT, inputs: torch.Tensor, targets: torch.Tensor, chunk: int = 256) -> float:
    """Mean next-token cross-entropy (nats per token) over windows (N, T), in eval mode, chunked."""
    was_training = model.training
    model.eval()
    total = 0.0
    for start in range(0, len(inputs), chunk):
        _, loss = model(inputs[start : start + chunk], targets[start : start + chunk])
        total += loss.item() * len(inputs[start : start + chunk])
    model.train(was_training)
    return total / len(inputs)


def train(model: GPT, next_batch: Callable[[torch.Generator], Batch], settings: TrainSettings,
          evaluate: Callable[[GPT], dict] | None = None, resume: dict | None = None,
          on_eval: Callable[[int, dict, dict], None] | None = None, progress: bool = True) -> dict:
    """Run AdamW from step 0 (or from resume["step"]) to settings.steps; returns the resume state.

    evaluate(model) -> {name: loss} runs every eval_every steps and at the end; on_eval(step,
    losses, state) is called after it (e.g. to save a checkpoint). The returned state has step,
    optimizer state, generator state and history (a list of {step, train_loss, **losses}).
    """
    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = make_optimizer(model, settings)
    step, history = 0, []
    if resume is not None:
        step, history = resume["step"], list(resume["history"])
        optimizer.load_state_dict(resume["optimizer"])
        generator.set_state(resume["generator"])
    model.train()

    def state() -> dict:
        return {"step": step, "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
                "history": history}

    bar = tqdm(total=settings.steps, initial=step, disable=not progress, desc="training", unit="step", mininterval=1.0)
    running = None  # exponential average of the training loss, for the progress bar
    while step < settings.steps:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, settings)
        inputs, targets = next_batch(generator)
        _, loss = model(inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        optimizer.step()
        step += 1
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        bar.update(1)
        bar.set_postfix(loss=f"{running:.3f}", refresh=False)
        if evaluate is not None and (step % settings.eval_every == 0 or step == settings.steps):
            losses = evaluate(model)
            model.train()
            history.append({"step": step, "train_loss": running, **losses})
            bar.write(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in losses.items()))
            if on_eval is not None:
                on_eval(step, losses, state())
    bar.close()
    model.eval()
    return state()


# ---------------------------------------------------------------- the two shipped recipes

def shakespeare_task(settings: TrainSettings, args: argparse.Namespace):
    """Batches from the training split; evaluation on fixed held-out windows (and as many training ones)."""
    text = data.load_corpus(args.corpus, download=args.download)
    train_ids, val_ids = data.train_val_split(data.encode(text))
    val = data.heldout_windows(val_ids, settings.T, args.eval_windows)
    train_slice = data.heldout_windows(train_ids, settings.T, args.eval_windows)

    def next_batch(generator):
        return data.sample_batch(train_ids, settings.batch_size, settings.T, generator)

    def evaluate(model):
        return {"val_loss": mean_loss(model, *val)}

    def final_metrics(model):
        """Training loss on a fixed slice of training windows, validation loss on every held-out window."""
        return {"train_loss": mean_loss(model, *train_slice),
                "val_loss": mean_loss(model, *data.heldout_windows(val_ids, settings.T))}

    return COURSE_CONFIG, next_batch, evaluate, final_metrics


def induction_task(settings: TrainSettings, args: argparse.Namespace):
    """Repeated random segments for training; evaluation: loss on each half of the fixed batch, head scores."""
    config = induction.INDUCTION_CONFIG
    tokens = induction.induction_eval_tokens(config)

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
    """The command line: train one of TASKS, print periodic evaluations, write the checkpoint."""
    parser = argparse.ArgumentParser(prog="python -m gptlib.train", description=__doc__.splitlines()[0])
    parser.add_argument("task", choices=sorted(TASKS))
    parser.add_argument("--out", type=Path, required=True, help="final checkpoint (weights, config, metadata)")
    parser.add_argument("--state", type=Path, help="resumable snapshot (adds AdamW state), written at each evaluation")
    parser.add_argument("--resume", action="store_true", help="continue from --state")
    parser.add_argument("--corpus", help="path to tinyshakespeare.txt (default: ../shared/data or the cache)")
    parser.add_argument("--download", action="store_true", help="fetch the corpus (sha256-checked) if it is not found")
    parser.add_argument("--eval-windows", type=int, default=200, help="held-out windows for periodic evaluation")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    defaults = TrainSettings(steps=1)
    for name, value in asdict(defaults).items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=type(value), default=None if name == "steps" else value, required=name == "steps",
                            help="TrainSettings." + name + ("" if name == "steps" else f" (default {value})"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:  # bad settings or a missing corpus: a one-line error, not a traceback
        settings = TrainSettings(**{name: getattr(args, name) for name in asdict(defaults)})
        config, next_batch, evaluate, final_metrics = TASKS[args.task](settings, args)
        if settings.T > config.T_max:
            raise ValueError(f"--T {settings.T} exceeds the model's T_max={config.T_max}")
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    torch.manual_seed(settings.seed)
    model = GPT(config)
    command = "python -m gptlib.train " + shlex.join(sys.argv[1:] if argv is None else argv)
    resume = None
    if args.resume:
        if args.state is None:
            raise ValueError("--resume needs --state PATH, the snapshot to continue from")
        resume = load_weights_into(model, args.state)["training"]
    started = time.perf_counter() - (resume or {}).get("wall_time_s", 0.0)

    def snapshot(step, losses, state):
        if args.state is not None:
            state["wall_time_s"] = time.perf_counter() - started
            save_checkpoint(args.state, model, {"task": args.task, "command": command}, training=state)

    state = train(model, next_batch, settings, evaluate, resume, on_eval=snapshot)
    metadata = {
        "task": args.task, "command": command, "settings": asdict(settings), "steps": state["step"],
        "tokens_seen": state["step"] * settings.batch_size * settings.T,
        "wall_time_s": round(time.perf_counter() - started, 1), "torch_version": str(torch.__version__),
        "history": state["history"], **final_metrics(model),
    }
    save_checkpoint(args.out, model, metadata)  # weights only: AdamW's state stays in --state
    print({k: v for k, v in metadata.items() if k not in ("history", "settings")})
    return args.out


if __name__ == "__main__":
    main()
