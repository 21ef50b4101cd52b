from pathlib import Path

import pytest
import torch

from gptlib import VOCABULARY, decode, encode

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"


@pytest.mark.skipif(not CORPUS.exists(), reason="course corpus not beside this checkout")
def test_vocabulary_is_the_corpus_character_set():
    assert VOCABULARY == "".join(sorted(set(CORPUS.read_text())))
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
