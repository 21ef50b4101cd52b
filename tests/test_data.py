"""gptlib.data: the vocabulary, encode/decode, the corpus loader and its checksum, the
train/validation split and batch windows."""

import hashlib
import re

import numpy as np
import pytest
import torch

from gptlib import VOCABULARY, data, decode, encode


def test_vocabulary_is_the_corpus_character_set(corpus_path):
    assert VOCABULARY == "".join(sorted(set(corpus_path.read_text())))
    assert len(VOCABULARY) == 65


def test_encode_decode_round_trip():
    text = "First Citizen:\nBefore we proceed any further, hear me speak!"
    ids = encode(text)
    assert ids.dtype == torch.long and ids.shape == (len(text),)
    assert decode(ids) == text
    assert encode("\n")[0] == 0 and decode([64]) == "z"


def test_unknown_characters_are_named():
    with pytest.raises(ValueError, match=r"vocabulary: '5', 'é', '€'$"):
        encode("café €5")
    with pytest.raises(ValueError, match=r"\[0, 65\)"):
        decode([3, 65])


def test_many_unknown_characters_are_named_five_and_counted():
    text = "".join(chr(0x4E00 + i) for i in range(10_000))  # 10,000 distinct characters, none in the vocabulary
    with pytest.raises(ValueError) as caught:
        encode(text)
    message = str(caught.value)
    assert message == ("characters outside the course's 65-character vocabulary: "
                       "'一', '丁', '丂', '七', '丄' and 9995 more")


@pytest.mark.parametrize("text, rule", [
    (b"ROMEO", "encode takes a str, got bytes; decode the bytes to str first"),
    (["R", "O"], "encode takes a str, got list"),
    (None, "encode takes a str, got NoneType"),
    (65, "encode takes a str, got int"),
])
def test_encode_takes_text(text, rule):
    with pytest.raises(ValueError, match=re.escape(rule)):
        encode(text)


@pytest.mark.parametrize("ids, rule", [
    ("ROMEO", "decode takes token ids (a 1-D integer tensor or a list of ints), got str"),
    (b"\x01\x02", "decode takes token ids (a 1-D integer tensor or a list of ints), got bytes"),
    (5, "decode takes token ids (a 1-D integer tensor or a list of ints), got int"),
    ({1, 2}, "decode takes token ids (a 1-D integer tensor or a list of ints), got set"),  # no order
    ({1: 2}, "decode takes token ids (a 1-D integer tensor or a list of ints), got dict"),
    ([1.0, 2.0], "each token id must be an integer, got 1.0"),
    ([True, False], "each token id must be an integer, got True"),
    ([1, "a"], "each token id must be an integer, got 'a'"),
    ([10**30], f"token ids must lie in [0, V) = [0, 65), got {10**30}"),
    ([-1, 3, 99], "token ids must lie in [0, V) = [0, 65), got -1, 99"),
    (torch.tensor([1.0, 2.0]), "token ids must have an integer dtype, got torch.float32"),
    (torch.zeros(2, 3, dtype=torch.long), "token ids must be 1-D (T,), got shape (2, 3)"),
    (torch.tensor([1, 2], dtype=torch.bool), "token ids must have an integer dtype, got torch.bool"),
])
def test_decode_takes_integer_ids(ids, rule):
    with pytest.raises(ValueError, match=re.escape(rule)):
        decode(ids)


def test_decode_accepts_any_integer_form():
    assert decode([]) == "" == decode(torch.zeros(0, dtype=torch.long))
    ids = encode("To be")
    assert decode(ids.to(torch.uint8)) == decode(ids.tolist()) == decode(iter(ids.tolist())) == "To be"
    assert decode(np.array(ids.tolist())) == "To be"  # a numpy array is an iterable of numpy integers


def test_local_corpus_matches_the_published_checksum(corpus_path):
    text = data.load_corpus()
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == data.CORPUS_SHA256
    assert len(data.encode(text)) == len(text)  # every character is in the course vocabulary


def test_download_verifies_the_checksum_and_caches(tmp_path, corpus_path):
    path = data.download_corpus(tmp_path, url=corpus_path.as_uri())  # file:// stands in for the network
    assert path == tmp_path / data.CORPUS_FILENAME and data.sha256_of(path) == data.CORPUS_SHA256


def test_download_with_a_wrong_checksum_leaves_nothing(tmp_path):
    fake = tmp_path / "fake.txt"
    fake.write_text("not shakespeare")
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match="sha256"):
        data.download_corpus(cache, url=fake.as_uri())
    assert list(cache.iterdir()) == []


def test_missing_corpus_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "LOCAL_CORPUS", tmp_path / "absent.txt")
    with pytest.raises(FileNotFoundError, match="download=True"):
        data.load_corpus(cache_dir=tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match="no corpus file"):
        data.load_corpus(tmp_path / "nope.txt")
    own = tmp_path / "own.txt"
    own.write_text("To be, or not to be")
    assert data.load_corpus(own) == "To be, or not to be"


def test_split_is_a_deterministic_partition():
    ids = torch.arange(1000)
    train, val = data.train_val_split(ids, val_fraction=0.1)
    assert torch.equal(torch.cat([train, val]), ids) and len(val) == 100
    for bad in (0, 1, 1.5):
        with pytest.raises(ValueError, match="val_fraction"):
            data.train_val_split(ids, bad)


def test_batches_are_contiguous_windows_with_shifted_targets():
    ids = torch.arange(500)  # the value of each id is its position, so a window is an arange
    x, y = data.sample_batch(ids, B=8, T=16, generator=torch.Generator().manual_seed(3))
    assert x.shape == y.shape == (8, 16)
    assert torch.equal(x - x[:, :1], torch.arange(16).expand(8, 16)) and torch.equal(y, x + 1)
    x2, _ = data.sample_batch(ids, B=8, T=16, generator=torch.Generator().manual_seed(3))
    assert torch.equal(x, x2)
    with pytest.raises(ValueError, match="T < len"):
        data.sample_batch(ids[:10], B=1, T=10, generator=torch.Generator())


def test_heldout_windows_tile_the_sequence():
    ids = torch.arange(50)
    x, y = data.heldout_windows(ids, T=8)
    assert x.shape == (6, 8) and torch.equal(x.flatten(), ids[:48]) and torch.equal(y, x + 1)
    assert data.heldout_windows(ids, T=8, max_windows=2)[0].shape == (2, 8)


@pytest.mark.parametrize("call, rule", [
    (lambda ids: data.train_val_split(ids, "0.1"), "val_fraction must be a finite number, got '0.1'"),
    (lambda ids: data.train_val_split(ids, float("nan")), "val_fraction must be a finite number, got nan"),
    (lambda ids: data.sample_batch(ids, 0, 4, torch.Generator()), "B must be an integer >= 1, got 0"),
    (lambda ids: data.sample_batch(ids, 2, 4.0, torch.Generator()), "T must be an integer >= 1, got 4.0"),
    (lambda ids: data.heldout_windows(ids, 0), "T must be an integer >= 1, got 0"),
    (lambda ids: data.heldout_windows(ids, 4, max_windows=-1), "max_windows must be an integer >= 1, got -1"),
])
def test_the_corpus_helpers_check_their_sizes(call, rule):
    with pytest.raises(ValueError, match=re.escape(rule)):
        call(torch.arange(100))
