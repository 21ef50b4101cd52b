"""Training: AdamW on next-token cross-entropy (Section 5's loss), with resume.

The command line that trains the shipped checkpoints is `python -m gptlib.train` (__main__.py). The
loop is generic: `next_batch(generator) -> (inputs, targets)` supplies data, and resume
restores the weights, AdamW's state, the step and the batch generator's state, so training
k steps, saving, loading and training m more gives the same weights as k + m steps straight.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import time
from dataclasses import dataclass
from typing import Callable

import torch
from tqdm.auto import tqdm

from .. import data, validation
from ..config import COURSE_CONFIG
from ..model import GPT, eval_mode

Batch = tuple[torch.Tensor, torch.Tensor]  # inputs (B, T), targets (B, T)

MAX_TOKENS_PER_STEP = 2**20  # a sanity bound on batch_size * T: the shipped runs use 32 * 64 = 2,048


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt() parameters (malloc.h)


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory for reuse instead of handing it back to the kernel.

    A training step allocates and frees the same tens of MB of activations every step. By
    default glibc returns large freed blocks to the kernel, so the next step writes to fresh
    pages: thousands of page faults a step at the course shapes (about 4% of its time). With
    blocks up to 32 MB served from the heap and the heap never trimmed, every step after the
    first reuses the same pages; the process keeps its peak memory until it exits. Returns
    False, changing nothing, where the C library has no mallopt (not glibc).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, 32 * 2**20) == 1 and mallopt(M_TRIM_THRESHOLD, 2**30) == 1


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
        """Check every field (gptlib.validation) and store it as a plain int or float, fit for a checkpoint
        (object.__setattr__: the dataclass is frozen)."""
        for name in ("steps", "batch_size", "T", "eval_every"):
            object.__setattr__(self, name, validation.integer(name, getattr(self, name), at_least=1))
        object.__setattr__(self, "warmup", validation.integer("warmup", self.warmup, at_least=0))
        object.__setattr__(self, "seed", validation.seed("seed", self.seed))  # torch's seed range
        if self.batch_size * self.T > MAX_TOKENS_PER_STEP:
            raise ValueError(f"batch_size * T must be <= {MAX_TOKENS_PER_STEP:,} tokens a step, "
                             f"got {self.batch_size} * {self.T}")
        object.__setattr__(self, "lr", validation.real("lr", self.lr, above=0))
        object.__setattr__(self, "min_lr", validation.real("min_lr", self.min_lr, above=0, at_most=self.lr))
        object.__setattr__(self, "weight_decay", validation.real("weight_decay", self.weight_decay, at_least=0))
        object.__setattr__(self, "grad_clip", validation.real("grad_clip", self.grad_clip, above=0))


class Diverged(RuntimeError):
    """Training stopped because the loss, the gradient norm, an evaluation or the weights became NaN or inf."""


def learning_rate(step: int, settings: TrainSettings) -> float:
    """Learning rate at a 0-based step: linear warmup over `warmup` steps, then cosine to min_lr."""
    if step < settings.warmup:
        return settings.lr * (step + 1) / settings.warmup
    progress = (step - settings.warmup) / max(1, settings.steps - settings.warmup)
    return settings.min_lr + 0.5 * (settings.lr - settings.min_lr) * (1 + math.cos(math.pi * min(progress, 1.0)))


DEVICES = ("cpu", "cuda", "mps")


def check_device(name: str) -> torch.device:
    """torch.device(name) for name in DEVICES, or ValueError if this machine's torch cannot use it."""
    available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
    if name not in available:
        raise ValueError(f"device must be one of {DEVICES}, got {name!r}")
    if not available[name]:
        raise ValueError(f"device {name!r} is not available here (torch {torch.__version__}); use --device cpu")
    return torch.device(name)


def model_device(model: torch.nn.Module) -> torch.device:
    """Where the model's weights are (its first parameter's device; a GPT's is E's)."""
    return next(model.parameters()).device


def make_optimizer(model: GPT, settings: TrainSettings) -> torch.optim.AdamW:
    """AdamW with weight decay on weight matrices and embeddings, none on gains and biases.

    On CPU and CUDA torch's fused kernel updates every parameter in one call per tensor
    instead of about ten (the same arithmetic; a small model's step is otherwise ~1% optimizer
    overhead).
    """
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = model_device(model).type in ("cpu", "cuda")
    return torch.optim.AdamW(groups, lr=settings.lr, betas=(0.9, 0.95), fused=fused or None)


def mean_loss(model: GPT, inputs: torch.Tensor, targets: torch.Tensor, chunk: int = 256) -> float:
    """Mean next-token cross-entropy (nats per token) over windows (N, T), in eval mode, chunked.

    The windows may live on the CPU; each chunk is moved to the model's device. The model's
    train/eval mode is restored afterwards, also when a chunk is refused.
    """
    chunk = validation.integer("chunk", chunk, at_least=1)
    if len(inputs) == 0:
        raise ValueError("mean_loss needs at least one window, got none")
    total = 0.0
    device = model_device(model)
    with eval_mode(model):
        for start in range(0, len(inputs), chunk):
            _, loss = model(inputs[start : start + chunk].to(device), targets[start : start + chunk].to(device))
            total += loss.item() * len(inputs[start : start + chunk])
    return total / len(inputs)


def train(model: GPT, next_batch: Callable[[torch.Generator], Batch], settings: TrainSettings,
          evaluate: Callable[[GPT], dict] | None = None, resume: dict | None = None,
          on_eval: Callable[[int, dict, dict], None] | None = None, progress: bool = True,
          start: tuple | None = None) -> dict:
    """Run AdamW from step 0 (or from resume["step"]) to settings.steps; returns the resume state.

    Trains on the device the model is on; next_batch may return CPU tensors (its generator
    is a CPU one, so a run draws the same batches on any device). evaluate(model) -> {name:
    loss} runs every eval_every steps and at the end; on_eval(step, losses, state) is called
    after it (e.g. to save a checkpoint). The returned state has step, optimizer state,
    generator state and history (a list of {step, train_loss, **losses}). The progress bar
    shows the running loss and tokens per second (training steps only, evaluations left out).
    start is what start_state(model, settings, resume) returned, for a caller that built it
    already (the command does, to check a resume state before any work); resume is then None.
    """
    if start is None:
        start = start_state(model, settings, resume)
    elif resume is not None:
        raise ValueError("train takes a resume state or a start built from one, not both")
    optimizer, generator, step, history = start
    model.train()

    def state() -> dict:
        return {"step": step, "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
                "history": history}

    device = model_device(model)
    bar = tqdm(total=settings.steps, initial=step, disable=not progress, desc="training", unit="step", mininterval=1.0)
    running = None  # exponential average of the training loss, for the progress bar
    tokens, seconds = 0, 0.0  # trained tokens and the time their steps took, for tokens per second
    while step < settings.steps:
        started = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, settings)
        inputs, targets = (t.to(device) for t in next_batch(generator))
        _, loss = model(inputs, targets)
        loss_value = loss.item()  # the loss read once a step (on a GPU this waits for the forward pass)
        require_finite(step + 1, "the training loss", loss_value)  # before backward: the weights stay as they were
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        require_finite(step + 1, "the gradient norm", norm.item())  # before the step: the weights stay as they were
        optimizer.step()
        step += 1
        running = loss_value if running is None else 0.95 * running + 0.05 * loss_value
        tokens, seconds = tokens + inputs.numel(), seconds + time.perf_counter() - started
        bar.update(1)
        bar.set_postfix(loss=f"{running:.3f}", tok_per_s=f"{tokens / seconds:,.0f}", refresh=False)
        if evaluate is not None and (step % settings.eval_every == 0 or step == settings.steps):
            losses = evaluate(model)
            model.train()
            for name, value in losses.items():
                require_finite(step, name, value)
            require_finite_weights(model, step)
            history.append({"step": step, "train_loss": running, **losses})
            bar.write(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in losses.items()))
            if on_eval is not None:
                on_eval(step, losses, state())
    bar.close()
    require_finite_weights(model, step)
    model.eval()
    return state()


def start_state(model: GPT, settings: TrainSettings, resume: dict | None):
    """(optimizer, generator, step, history): fresh at step 0, or restored from a resume state.

    The resume state is checked here, before any step: ValueError names what does not fit
    (a missing part, a step beyond settings.steps, optimizer state for other weights, ...).
    """
    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = make_optimizer(model, settings)
    if resume is None:
        return optimizer, generator, 0, []
    if not isinstance(resume, dict):
        raise ValueError(f"the resume state must be a dict, got {type(resume).__name__}")
    missing = [k for k in ("step", "optimizer", "generator", "history") if k not in resume]
    if missing:
        raise ValueError(f"the resume state lacks {missing}")
    step = validation.integer("the resume state's step", resume["step"], at_least=0)
    if step > settings.steps:
        raise ValueError(f"the resume state is at step {step}, beyond steps={settings.steps}: ask for more steps")
    if not isinstance(resume["history"], list):
        raise ValueError(f"the resume state's history must be a list, got {type(resume['history']).__name__}")
    math_keys = ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize")  # not device flags such as fused
    hyperparameters = [{k: group[k] for k in math_keys} for group in optimizer.param_groups]
    try:
        optimizer.load_state_dict(resume["optimizer"])
        generator.set_state(resume["generator"])
    except (ValueError, RuntimeError, TypeError, KeyError, IndexError, AttributeError) as error:
        raise ValueError(f"the resume state's optimizer or generator state does not fit: {error}") from None
    for group, settings_group in zip(optimizer.param_groups, hyperparameters):
        group.update(settings_group)  # the snapshot gives AdamW's moments; settings give betas, decay, ...
    for group in optimizer.param_groups:
        for p in group["params"]:
            if any(isinstance(v, torch.Tensor) and v.dim() and v.shape != p.shape for v in optimizer.state[p].values()):
                raise ValueError("the resume state's optimizer state is for weights of other shapes "
                                 f"than {tuple(p.shape)}")
    return optimizer, generator, step, list(resume["history"])


def require_finite(step: int, what: str, value: float) -> None:
    """Raise Diverged when a measured value is NaN or inf."""
    if not math.isfinite(value):
        raise Diverged(f"training stopped at step {step}: {what} is {value}; try a lower learning rate "
                       "or gradient clip")


def require_finite_weights(model: GPT, step: int) -> None:
    """Raise Diverged when any weight is NaN or inf."""
    bad = [name for name, p in model.named_parameters() if not torch.isfinite(p).all()]
    if bad:
        raise Diverged(f"training stopped at step {step}: weights {bad[:3]} hold NaN or inf; "
                       "try a lower learning rate or gradient clip")


def shakespeare_task(settings: TrainSettings, args: argparse.Namespace):
    """The course GPT's recipe (the command line's and gptlib.train.own_model's): batches from the training
    split; evaluation on fixed held-out windows (and as many training ones). Returns (config,
    next_batch, evaluate, final_metrics)."""
    text = data.load_corpus(args.corpus, download=args.download)
    train_ids, val_ids = data.train_val_split(data.encode(text))
    val = data.heldout_windows(val_ids, settings.T, args.eval_windows)  # CPU; mean_loss moves chunks
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
