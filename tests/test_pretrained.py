"""Shipped checkpoints: they load, are small, and reach the figures stored in their metadata.

The figures are recomputed here from scratch (held-out windows of the corpus; the fixed
induction batch) and compared with what training recorded, with a small margin.
"""

import math

import pytest
import torch

from gptlib import GPT, data, pretrained
from gptlib.analysis import induction
from gptlib.analysis.induction import INDUCTION_CONFIG, induction_eval_tokens
from gptlib.train import TrainSettings, mean_loss

MARGIN = 0.01  # nats: room for summation-order differences across machines and thread counts


def shipped(name):
    return pytest.mark.skipif(name not in pretrained.available(), reason=f"{name}.pt not shipped yet")


def test_names_and_errors(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"\['induction', 'shakespeare'\]"):
        pretrained.load_pretrained("gpt2")
    monkeypatch.setattr(pretrained, "CHECKPOINT_DIR", tmp_path)
    assert pretrained.available() == []
    with pytest.raises(FileNotFoundError, match="make train-shakespeare"):
        pretrained.load_pretrained("shakespeare")


@pytest.mark.parametrize("name", sorted(pretrained.PRETRAINED))
def test_each_shipped_checkpoint_loads_small_and_documented(name):
    if name not in pretrained.available():
        pytest.skip(f"{name}.pt not shipped yet")
    assert pretrained.checkpoint_path(name).stat().st_size < 5 * 2**20
    model = pretrained.load_pretrained(name)
    assert isinstance(model, GPT) and not model.training
    metadata = pretrained.load_metadata(name)
    assert metadata["command"].startswith(f"python -m gptlib.train {name}")
    assert metadata["steps"] == metadata["settings"]["steps"]


@shipped("shakespeare")
@pytest.mark.slow  # a fresh interpreter or a training run
def test_shakespeare_reaches_its_stated_validation_loss(corpus_path):
    model = pretrained.load_pretrained("shakespeare")
    metadata = pretrained.load_metadata("shakespeare")
    T = TrainSettings(**metadata["settings"]).T
    _, val_ids = data.train_val_split(data.encode(data.load_corpus(corpus_path)))
    val_loss = mean_loss(model, *data.heldout_windows(val_ids, T))
    assert val_loss <= metadata["val_loss"] + MARGIN
    assert val_loss < math.log(65) - 2  # far below the uniform guess ln 65


@shipped("induction")
def test_induction_model_reaches_its_stated_losses_and_has_its_heads():
    model = pretrained.load_pretrained("induction")
    metadata = pretrained.load_metadata("induction")
    assert model.config == INDUCTION_CONFIG
    tokens = induction_eval_tokens()
    first, second = induction.half_losses(model, tokens)
    assert first == pytest.approx(metadata["loss_first_half"], abs=MARGIN)
    assert second <= metadata["loss_second_half"] + MARGIN
    assert first > math.log(65) - 0.1  # the first copy is unpredictable
    assert second < first / 4  # the second copy is mostly predicted
    previous, scores = induction.head_scores(model, tokens)
    assert torch.allclose(previous, torch.tensor(metadata["previous_token_scores"]), atol=1e-3)
    assert torch.allclose(scores, torch.tensor(metadata["induction_scores"]), atol=1e-3)
    assert previous[0].max() > 0.5 and scores[1].max() > 0.5  # a previous-token head feeds an induction head
