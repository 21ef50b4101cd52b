"""Save and load a GPT with its config, vocabulary and training metadata.

A checkpoint is a plain dict that torch.load(weights_only=True) accepts (tensors, numbers,
strings, lists, dicts), so loading one never runs code stored in the file:

    format        CHECKPOINT_FORMAT
    config        GPTConfig fields
    vocabulary    the characters behind token ids 0..V-1
    state_dict    the model's weights
    metadata      free-form training record (command, steps, losses, ...)
    training      optional resume state: step, optimizer state, batch generator state

Every check runs before any weight is copied, so a bad file leaves a model untouched.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections import OrderedDict
from dataclasses import fields
from pathlib import Path

import torch
from torch import nn

from .config import GPTConfig
from .data import VOCABULARY
from .model import GPT

CHECKPOINT_FORMAT = "gptlib-checkpoint-1"
REQUIRED_KEYS = ("format", "config", "vocabulary", "state_dict", "metadata")
PLAIN_TYPES = (type(None), bool, int, float, str, torch.Tensor, nn.Parameter)  # exact types, not subclasses
MAX_NESTING = 32  # containers within containers in metadata and resume state; training's own go 4 deep


def config_to_dict(config: GPTConfig) -> dict:
    """The constructor arguments of a GPTConfig, its fields."""
    return {f.name: getattr(config, f.name) for f in fields(config)}


def save_checkpoint(path: Path | str, model: GPT, metadata: dict | None = None,
                    training: dict | None = None) -> Path:
    """Write model (weights + config), the course vocabulary, metadata and optional resume state to path.

    Whatever read_checkpoint would refuse is refused here, before anything is written: NaN or
    inf weights, weights that are not float32, metadata or resume state holding anything but
    plain data (a Path, a numpy number, ...). The file is written to a temporary
    path.<random>.part beside it (its folders are created if needed), flushed and renamed, so a
    failed or interrupted save leaves no .part behind and never replaces a good checkpoint with a
    truncated one. A path that cannot be written (a directory, a file in the way of a folder, a
    folder without write permission, a full disk) raises the OSError that says why; to refuse
    such a path before any work, call check_writable first.
    """
    check_materialized(model)
    path = Path(path)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "config": config_to_dict(model.config),
        "vocabulary": VOCABULARY,
        "state_dict": {k: v.detach().to("cpu", memory_format=torch.contiguous_format, copy=True)
                       for k, v in model.state_dict().items()},
        "metadata": {} if metadata is None else metadata,
    }
    if training is not None:
        payload["training"] = training
    check_payload(payload, source=f"refusing to save {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{secrets.token_hex(4)}.part")  # two runs never share one
    try:
        with open(partial, "xb") as file:
            torch.save(payload, file)
            file.flush()
            os.fsync(file.fileno())
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


def check_writable(path: Path, name: str = "path") -> None:
    """ValueError unless a checkpoint can be written at path, probed by creating a file beside it.

    Folders that do not exist yet are created; a file in their way, a directory or device at
    path, or a folder that cannot be written is named.
    """
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise ValueError(f"{name} {path} is {kind}; give the path of a file")
    folder = next(p for p in path.parents if p.exists())  # the nearest existing one; '.' or '/' at worst
    if not folder.is_dir():
        raise ValueError(f"{name} {path} cannot be written: {folder} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as error:
        raise ValueError(f"{name} {path} cannot be written: {error.strerror or error}") from None


def read_checkpoint(path: Path | str) -> dict:
    """Load and validate a checkpoint dict (weights_only=True); ValueError says what is wrong.

    Nothing is allocated for the model while checking: the expected weights come from a GPT
    built on the meta device, so a small file claiming a huge config is refused for free.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint file at {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated zip, garbage bytes, disallowed pickle globals, ...
        # torch's own message suggests weights_only=False, which would run arbitrary code: not repeated here.
        raise ValueError(
            f"{path} is not a readable checkpoint (corrupted, truncated, or holding more than weights): "
            f"torch.load raised {type(error).__name__}"
        ) from error
    payload["config"] = check_payload(payload, source=str(path))
    return payload


def check_payload(payload, source: str) -> GPTConfig:
    """The rules of a checkpoint dict, for reading and for saving alike; returns its GPTConfig.

    The format tag and required keys; a config that builds a valid GPTConfig; the course's
    vocabulary; weights matching that config (check_state_dict); metadata a dict and the
    optional resume state a dict, both of plain data (check_plain).
    """
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{source} is not a gptlib checkpoint: expected format tag {CHECKPOINT_FORMAT!r}")
    missing = [k for k in REQUIRED_KEYS if k not in payload]
    if missing:
        raise ValueError(f"{source} lacks checkpoint keys {missing}")
    for key in ("config", "state_dict", "metadata") + (("training",) if "training" in payload else ()):
        if not isinstance(payload[key], dict):
            raise ValueError(f"{source}: {key} must be a dict, got {type(payload[key]).__name__}")
    try:
        config = GPTConfig(**payload["config"])
    except (TypeError, ValueError) as error:
        raise ValueError(f"{source} holds an invalid config: {error}") from error
    vocabulary = payload["vocabulary"]
    if vocabulary != VOCABULARY:
        found = f"{len(vocabulary)} symbols" if isinstance(vocabulary, str) else f"of type {type(vocabulary).__name__}"
        raise ValueError(f"{source}: its vocabulary ({found}) is not the course's 65-character vocabulary, "
                         "the only one gptlib's encode and decode use")
    if config.V != len(VOCABULARY):
        raise ValueError(f"{source}: config says V={config.V}, the course's vocabulary has {len(VOCABULARY)} symbols")
    if config.L > len(payload["state_dict"]):  # each block has weights: refused before building L blocks
        raise ValueError(f"{source}: config says L={config.L} blocks, but the file holds only "
                         f"{len(payload['state_dict'])} weights")
    with torch.device("meta"):  # names, shapes and dtypes only: no memory
        expected = GPT(config).state_dict()
    check_state_dict(payload["state_dict"], expected, source)
    check_plain(payload["metadata"], f"{source}: metadata")
    check_plain(payload.get("training"), f"{source}: training")
    return config


def check_state_dict(found: dict, expected: dict, source: str) -> None:
    """ValueError unless found has exactly expected's names, each a finite tensor of the same shape and dtype.

    Each must also hold its own data, as save_checkpoint writes it (dense, contiguous, not a
    view of a shared or expanded storage), so the model built from it is no larger than the file.
    """
    if not all(isinstance(k, str) for k in found):
        raise ValueError(f"{source}: weight names must be strings")
    missing = sorted(expected.keys() - found.keys())
    unexpected = sorted(found.keys() - expected.keys())
    if missing or unexpected:
        raise ValueError(f"{source}: weights do not match the model: "
                         f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    storages = set()
    for name, reference in expected.items():
        tensor = found[name]
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"{source}: weight {name} is a {type(tensor).__name__}, not a tensor")
        if tensor.shape != reference.shape:
            raise ValueError(f"{source}: weight {name} has shape {tuple(tensor.shape)}, "
                             f"the model needs {tuple(reference.shape)}")
        if tensor.dtype != reference.dtype:
            raise ValueError(f"{source}: weight {name} has dtype {tensor.dtype}, the model needs {reference.dtype}")
        if tensor.layout != torch.strided or not tensor.is_contiguous() or tensor.storage_offset() != 0 \
                or tensor.untyped_storage().nbytes() != tensor.numel() * tensor.element_size() \
                or tensor.untyped_storage().data_ptr() in storages:
            raise ValueError(f"{source}: weight {name} is a view of other data, not a tensor of its own")
        if tensor.numel():
            storages.add(tensor.untyped_storage().data_ptr())
        bad = tensor.numel() - int(torch.isfinite(tensor).sum())
        if bad:
            raise ValueError(f"{source}: weight {name} holds {bad} non-finite values (NaN or inf)")


def check_plain(value, where: str) -> None:
    """ValueError unless value is plain data that torch.load(weights_only=True) reads back.

    Plain: None, bool, int, float, str, tensors, and lists, tuples and dicts (str or int keys)
    of them, nested at most MAX_NESTING deep, none inside itself. Types are matched exactly: a
    numpy float is a float subclass, yet unreadable. The walk keeps its own stack rather than
    recursing, so no depth reaches Python's recursion limit, and it enters a container shared by
    several parents again only where it lies deeper than before.
    """
    pending = [(value, where, 0)]  # (value, its place, how many containers hold it); None: leave a container
    entered: list[int] = []  # ids of the containers around the current value
    checked_at: dict[int, int] = {}  # id of a container -> the greatest depth it was checked at
    while pending:
        item = pending.pop()
        if item is None:
            entered.pop()
            continue
        value, where, depth = item
        if type(value) in PLAIN_TYPES:
            continue
        if type(value) not in (list, tuple, dict, OrderedDict):
            raise ValueError(f"{where} is a {type(value).__module__}.{type(value).__qualname__}: a checkpoint "
                             "holds only None, bool, int, float, str, tensors, and lists, tuples and dicts of "
                             "them (convert it first, e.g. str(path), float(x))")
        if id(value) in entered:
            raise ValueError(f"{where} is a container that holds itself")
        if depth == MAX_NESTING:
            raise ValueError(f"{where} is too deep: lists, tuples and dicts nest at most {MAX_NESTING} deep")
        if checked_at.get(id(value), -1) >= depth:
            continue  # this very container was checked already, as deep or deeper: with as little room or less
        checked_at[id(value)] = depth
        if type(value) in (list, tuple):
            items = [(inner, f"{where}[{i}]") for i, inner in enumerate(value)]
        else:
            for key in value:
                if type(key) not in (str, int):
                    raise ValueError(f"{where} has a key of type {type(key).__name__}; keys must be str or int")
            items = [(inner, f"{where}[{key!r}]") for key, inner in value.items()]
        entered.append(id(value))
        pending.append(None)
        pending.extend((inner, place, depth + 1) for inner, place in reversed(items))  # the first checked first


def check_materialized(model) -> None:
    """ValueError unless model is a GPT whose weights hold data (not on the meta device)."""
    if not isinstance(model, GPT):
        raise ValueError(f"model must be a gptlib GPT, got {type(model).__name__}")
    if model.E.is_meta:
        raise ValueError("the model's weights are on the meta device, so they hold no values to save or load into")


def load_checkpoint(path: Path | str) -> tuple[GPT, dict]:
    """A fresh GPT with the checkpoint's config and weights (eval mode), and the checkpoint dict.

    The model is built on the meta device and takes the loaded tensors as its weights, so loading
    allocates nothing beyond the file's own tensors and draws nothing from torch's generator: a
    GPT(config) built after a load is the one built without it. (The returned dict's state_dict
    holds those same tensors.)
    """
    payload = read_checkpoint(path)
    with torch.device("meta"):
        model = GPT(payload["config"])
    model.load_state_dict(payload["state_dict"], assign=True)
    return model.eval(), payload


def load_weights_into(model: GPT, path: Path | str) -> dict:
    """Copy a checkpoint's weights into an existing model, only if its config matches model.config.

    Everything is validated first; on any mismatch a ValueError is raised and model is unchanged.
    Returns the checkpoint dict (metadata, optional resume state).
    """
    check_materialized(model)
    payload = read_checkpoint(path)
    if payload["config"] != model.config:
        ours, theirs = config_to_dict(model.config), config_to_dict(payload["config"])
        differences = ", ".join(f"{k} {theirs[k]!r} (file) vs {ours[k]!r} (model)"
                                for k in ours if ours[k] != theirs[k])
        raise ValueError(f"{path} was written for another model: its config differs in {differences}")
    for name, weight in model.state_dict().items():  # names, shapes and values were checked by read_checkpoint
        if weight.dtype != payload["state_dict"][name].dtype:  # a model made .double(), say: copying would cast
            raise ValueError(f"{path}: weight {name} has dtype {payload['state_dict'][name].dtype}, "
                             f"the model needs {weight.dtype}")
    model.load_state_dict(payload["state_dict"])
    return payload
