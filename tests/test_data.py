"""gptlib.data: the vocabulary, encode/decode, the corpus loader and its checksum, the
train/validation split and batch windows."""

import hashlib

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
    with pytest.raises(ValueError, match=r"'é', '€'"):
        encode("café €5")
    with pytest.raises(ValueError, match=r"\[0, 65\)"):
        decode([3, 65])


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
