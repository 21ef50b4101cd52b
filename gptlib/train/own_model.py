"""Train and sample ANY module mapping token ids (B, T) to logits (B, T, V) on tiny Shakespeare,
with gptlib.train's loop, optimizer and batches, so a learner's own GPT and gptlib's run alike.

    run = train_on_shakespeare(my_gpt, BUILD_SETTINGS)     # progress bar: loss, tokens/s
    run.val_losses, run.seconds, run.reached(2.0)          # held-out loss over time
    text = sample_text(my_gpt, "ROMEO:\\n", 200)           # gptlib.sampling on the learner's model
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from .. import data, sampling, train
from ..model import GPT, next_token_loss

# The build track's run: the shipped checkpoint's settings (batch 32 x 64 characters, AdamW,
# lr 2e-3 with warmup and cosine decay), shortened to a few hundred steps.
BUILD_SETTINGS = train.TrainSettings(steps=600, warmup=50, eval_every=50)
EVAL_WINDOWS = 200  # held-out windows of 64 characters for each evaluation (train.shakespeare_task)


class AsGPT(nn.Module):
    """A learner's model seen as gptlib's GPT: idx (T,) or (B, T) -> logits, or (logits, loss) with
    targets, and a `config` carrying V and T_max (all that gptlib.train and gptlib.sampling read)."""

    def __init__(self, model: nn.Module, V: int, T_max: int):
        super().__init__()
        self.model = model
        self.config = SimpleNamespace(V=V, T_max=T_max)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        squeeze = idx.dim() == 1
        Z = self.model(idx.unsqueeze(0) if squeeze else idx)  # (B, T, V)
        if isinstance(Z, (tuple, list)):
            Z = Z[0]
        if squeeze:
            Z = Z.squeeze(0)
        if targets is None:
            return Z
        return Z, next_token_loss(Z, targets)


@dataclass(frozen=True)
class TrainingRun:
    """One run: held-out loss (nats/char) at each evaluation, with the steps and the wall time then."""

    name: str
    steps: tuple[int, ...]
    seconds: tuple[float, ...]  # wall time since the first step, evaluations included
    cpu_seconds: tuple[float, ...]  # CPU time of this process (all its threads) since the first step
    val_losses: tuple[float, ...]
    train_losses: tuple[float, ...]  # running average of the training loss

    def reached(self, loss: float) -> float | None:
        """Seconds until the held-out loss was first below `loss`, or None if it never was."""
        return next((s for s, v in zip(self.seconds, self.val_losses) if v < loss), None)


def train_on_shakespeare(model: nn.Module, settings: train.TrainSettings = BUILD_SETTINGS, *, name: str = "your GPT",
                         eval_windows: int = EVAL_WINDOWS, corpus: str | Path | None = None,
                         progress: bool = True) -> TrainingRun:
    """Train `model` in place with gptlib.train.train on tiny Shakespeare (gptlib.data.load_corpus(corpus))
    and evaluate it on held-out windows every settings.eval_every steps; the batches are drawn from
    a generator seeded with settings.seed, so two models trained with one settings see the same data."""
    task = train.shakespeare_task(settings, argparse.Namespace(corpus=corpus, download=False, eval_windows=eval_windows))
    _, next_batch, evaluate, _ = task
    wrapped = model if isinstance(model, GPT) else AsGPT(model, len(data.VOCABULARY), settings.T)
    started, cpu_started = time.perf_counter(), time.process_time()
    seconds, cpu_seconds = [], []

    def clock(step, losses, state):
        seconds.append(time.perf_counter() - started)
        cpu_seconds.append(time.process_time() - cpu_started)

    state = train.train(wrapped, next_batch, settings, evaluate, progress=progress, on_eval=clock)
    history = state["history"]
    return TrainingRun(name, tuple(h["step"] for h in history), tuple(seconds), tuple(cpu_seconds),
                       tuple(h["val_loss"] for h in history), tuple(h["train_loss"] for h in history))


def sample_text(model: nn.Module, prompt: str, new_characters: int, *, T_max: int = 64, temperature: float = 0.8,
                seed: int = 0) -> str:
    """The prompt followed by new_characters drawn from `model` with gptlib.sampling.sample (seeded)."""
    wrapped = model if isinstance(model, GPT) else AsGPT(model, len(data.VOCABULARY), T_max)
    ids = sampling.sample(wrapped, data.encode(prompt), new_characters, temperature,
                          generator=torch.Generator().manual_seed(seed))
    return data.decode(ids)


TARGET_LOSS, TARGET_SECONDS = 2.0, 180  # the build track's claim: below 2.0 nats/char within 3 minutes
MEASURED_RUNS = Path(__file__).resolve().parents[1] / "checkpoints" / "build_track.json"  # benchmarks/build_track.py writes it


def load_measured_runs(path: Path = MEASURED_RUNS) -> tuple[dict, list[TrainingRun]]:
    """(what the benchmark recorded about itself: command, machine, load, settings; its runs)."""
    stored = json.loads(Path(path).read_text())
    runs = [TrainingRun(**{k: tuple(v) if isinstance(v, list) else v for k, v in run.items()}) for run in stored.pop("runs")]
    return stored, runs
