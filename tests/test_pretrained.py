"""Shipped checkpoints: they load, are small, and reach the figures stored in their metadata.

The figures are recomputed here from scratch (held-out windows of the corpus; the fixed
induction batch) and compared with what training recorded, with a small margin.
"""

import math

import pytest
import torch

from gptlib import GPT, data, induction, pretrained
from gptlib.induction import INDUCTION_CONFIG, induction_eval_tokens
from gptlib.sampling import next_token_probabilities, sample
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
@pytest.mark.skipif(not data.LOCAL_CORPUS.is_file(), reason=f"corpus absent at {data.LOCAL_CORPUS} (CI has it)")
def test_shakespeare_reaches_its_stated_validation_loss():
    model = pretrained.load_pretrained("shakespeare")
    metadata = pretrained.load_metadata("shakespeare")
    T = TrainSettings(**metadata["settings"]).T
    _, val_ids = data.train_val_split(data.encode(data.load_corpus()))
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


def test_sampling_at_tiny_temperature_is_greedy_decoding():
    model = GPT(INDUCTION_CONFIG.replace(attn_only=False, L=1)).eval()
    prompt = data.encode("ROMEO:")
    ids = sample(model, prompt, 10, temperature=1e-4, generator=torch.Generator().manual_seed(0))
    greedy = prompt.clone()
    for _ in range(10):  # independent greedy loop
        with torch.no_grad():
            greedy = torch.cat([greedy, model(greedy[-model.config.T_max :])[-1].argmax().view(1)])
    assert torch.equal(ids, greedy)


def test_sampling_is_reproducible_and_checks_its_input():
    model = GPT(INDUCTION_CONFIG.replace(attn_only=False, L=1)).eval()
    prompt = data.encode("To be")
    a = sample(model, prompt, 20, temperature=1.0, generator=torch.Generator().manual_seed(5))
    b = sample(model, prompt, 20, temperature=1.0, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b) and torch.equal(a[:5], prompt) and len(a) == 25
    probabilities = next_token_probabilities(model, prompt, temperature=2.0)
    with torch.no_grad():
        expected = torch.softmax(model(prompt)[-1].double() / 2.0, -1)
    assert torch.allclose(probabilities, expected) and probabilities.sum().item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="temperature"):
        sample(model, prompt, 3, temperature=0.0)
    with pytest.raises(ValueError, match="1-D"):
        sample(model, prompt.view(1, -1), 3)
