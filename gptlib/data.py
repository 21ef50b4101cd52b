"""The course's 65-character vocabulary (that of tiny Shakespeare), encode/decode, and the corpus.

The corpus part: load it (local copy, or a sha256-checked download), split it into training and
held-out text, and cut batches of windows for training (next-token targets, Section 5).
"""

from __future__ import annotations

import hashlib
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import torch

from . import validation

# sorted(set(tinyshakespeare.txt)): newline, space, 11 punctuation marks and digit 3, A-Z, a-z.
VOCABULARY = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
CHAR_TO_ID = {ch: i for i, ch in enumerate(VOCABULARY)}
UNKNOWN_SHOWN = 5  # how many unknown characters an error names before it counts the rest


def encode(text: str) -> torch.Tensor:
    """Characters -> token ids (T,), int64. Raises ValueError naming characters outside the vocabulary.

    At most UNKNOWN_SHOWN of them are named (in sorted order); the rest are counted.
    """
    if not isinstance(text, str):
        hint = "; decode the bytes to str first" if isinstance(text, (bytes, bytearray)) else ""
        raise ValueError(f"encode takes a str, got {type(text).__name__}{hint}")
    unknown = sorted(set(text) - CHAR_TO_ID.keys())
    if unknown:
        shown = ", ".join(repr(ch) for ch in unknown[:UNKNOWN_SHOWN])
        more = f" and {len(unknown) - UNKNOWN_SHOWN} more" if len(unknown) > UNKNOWN_SHOWN else ""
        raise ValueError(f"characters outside the course's 65-character vocabulary: {shown}{more}")
    return torch.tensor([CHAR_TO_ID[ch] for ch in text], dtype=torch.long)


def decode(ids) -> str:
    """Token ids -> text: a 1-D integer tensor, or a list (any ordered iterable) of ints, each in [0, 65)."""
    V = len(VOCABULARY)
    if not isinstance(ids, torch.Tensor):
        if isinstance(ids, (str, bytes, bytearray, set, frozenset, dict)) or not isinstance(ids, Iterable):
            raise ValueError("decode takes token ids (a 1-D integer tensor or a list of ints), "
                             f"got {type(ids).__name__}")
        ids = [validation.integer("each token id", i) for i in ids]  # Python ints (numpy ints too; bools refused)
        huge = [i for i in ids if not -(2**63) <= i < 2**63]  # beyond int64, so far outside [0, V)
        if huge:
            raise ValueError(f"token ids must lie in [0, V) = [0, {V}), got {huge[0]}")
        ids = torch.tensor(ids, dtype=torch.long)
    ids = validation.token_ids(ids, V, dims=(1,), allow_empty=True)
    return "".join(VOCABULARY[i] for i in ids.tolist())


# The tiny-Shakespeare corpus: found beside the checkout, or downloaded once and checksum-verified.
CORPUS_FILENAME = "tinyshakespeare.txt"
CORPUS_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
CORPUS_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
LOCAL_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / CORPUS_FILENAME  # ../shared/data
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "gptlib"


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def download_corpus(cache_dir: Path | str = DEFAULT_CACHE_DIR, url: str = CORPUS_URL) -> Path:
    """Fetch the corpus into cache_dir (once) and return its path; ValueError if its sha256 is not CORPUS_SHA256.

    The download goes to a temporary name and is renamed only after the checksum matches,
    so a failed or tampered download never leaves a file that looks valid.
    """
    cache_dir = Path(cache_dir)
    target = cache_dir / CORPUS_FILENAME
    if target.exists() and sha256_of(target) == CORPUS_SHA256:
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            body = response.read()
    except (OSError, ValueError) as error:  # no network, DNS failure, HTTP error, timeout, bad URL
        raise ConnectionError(f"could not download the corpus from {url}: {getattr(error, 'reason', error)}") from error
    partial.write_bytes(body)
    digest = sha256_of(partial)
    if digest != CORPUS_SHA256:
        partial.unlink()
        raise ValueError(f"downloaded corpus from {url} has sha256 {digest}, expected {CORPUS_SHA256}")
    partial.replace(target)
    return target


def load_corpus(path: Path | str | None = None, *, download: bool = False,
                cache_dir: Path | str | None = None) -> str:
    """The tiny-Shakespeare text.

    path: a local copy (read as is). Without one, ../shared/data/tinyshakespeare.txt beside the
    checkout, then a verified copy in cache_dir (default DEFAULT_CACHE_DIR); with download=True a
    missing corpus is fetched from CORPUS_URL and checked against CORPUS_SHA256.
    FileNotFoundError says where it looked; ConnectionError, why a download failed.
    """
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no corpus file at {path}")
        return read_text(path)
    cache_dir = DEFAULT_CACHE_DIR if cache_dir is None else Path(cache_dir)
    cached = cache_dir / CORPUS_FILENAME
    for candidate in (LOCAL_CORPUS, cached):
        if candidate.is_file():
            return read_text(candidate)
    if download:
        return read_text(download_corpus(cache_dir))
    raise FileNotFoundError(
        f"tiny-Shakespeare corpus not found at {LOCAL_CORPUS} or {cached}; "
        "pass a path, or download=True to fetch it (sha256-checked)"
    )


def read_text(path: Path) -> str:
    """A text file's contents; ValueError naming the file when it is not UTF-8 text."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"corpus {path} is not UTF-8 text (byte {error.start} cannot be decoded)") from None


def train_val_split(ids: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic split of a 1-D id sequence: the first (1 - val_fraction) for training, the rest held out."""
    if not 0 < validation.real("val_fraction", val_fraction) < 1:
        raise ValueError(f"val_fraction must lie strictly between 0 and 1, got {val_fraction!r}")
    if ids.dim() != 1:
        raise ValueError(f"ids must be 1-D (N,), got shape {tuple(ids.shape)}")
    n_train = int(len(ids) * (1 - val_fraction))
    if n_train < 2 or len(ids) - n_train < 2:
        raise ValueError(f"{len(ids)} tokens are too few to split with val_fraction={val_fraction}")
    return ids[:n_train], ids[n_train:]


def sample_batch(ids: torch.Tensor, B: int, T: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """B random windows of a 1-D id sequence: inputs (B, T) and next-token targets (B, T)."""
    B = validation.integer("B", B, at_least=1)
    if not len(ids) > validation.integer("T", T, at_least=1):
        raise ValueError(f"need 1 <= T < len(ids) to cut windows of T+1 tokens, got T={T}, len(ids)={len(ids)}")
    starts = torch.randint(len(ids) - T, (B,), generator=generator)  # (B,)
    windows = torch.stack([ids[s : s + T + 1] for s in starts.tolist()])  # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]


def heldout_windows(ids: torch.Tensor, T: int, max_windows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Consecutive non-overlapping windows of a held-out sequence: inputs (N, T) and targets (N, T).

    The same ids always give the same windows, so a validation loss computed on them is a fixed figure.
    """
    n = (len(ids) - 1) // validation.integer("T", T, at_least=1)
    if max_windows is not None:
        n = min(n, validation.integer("max_windows", max_windows, at_least=1))
    if n < 1:
        raise ValueError(f"need at least T+1={T + 1} held-out tokens, got {len(ids)}")
    x = ids[: n * T].view(n, T)  # (N, T)
    y = ids[1 : n * T + 1].view(n, T)  # (N, T)
    return x, y
