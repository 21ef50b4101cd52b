"""gptlib.sampling: tiny temperature is greedy decoding, a seeded generator reproduces, every argument is
checked before the first step, and the model always gets its own train/eval mode back."""

import copy
import re

import pytest
import torch

from gptlib import GPT, GPTConfig, data
from gptlib.analysis.induction import INDUCTION_CONFIG
from gptlib.sampling import next_token_probabilities, sample


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


SMALL = GPTConfig(V=65, T_max=8, d=16, H=2, L=1)


@pytest.fixture
def model():
    return GPT(SMALL)


# each refused with new_tokens = 0 (which used to skip every check) and with new_tokens = 4
REFUSALS = [
    (dict(prompt="ROMEO"), "prompt must be a torch.Tensor of integers (see gptlib.encode), got str"),
    (dict(prompt=[1, 2, 3]), "prompt must be a torch.Tensor of integers (see gptlib.encode), got list"),
    (dict(prompt=torch.tensor([1.0, 2.0])), "prompt must have an integer dtype, got torch.float32"),
    (dict(prompt=torch.zeros(1, 3, dtype=torch.long)), "prompt must be 1-D (T,), got shape (1, 3)"),
    (dict(prompt=torch.zeros(0, dtype=torch.long)), "prompt must hold at least one sequence"),
    # 70 comes before the last T_max = 8 ids, the only ones the model sees
    (dict(prompt=torch.tensor([70] + [1] * 20)), "prompt must lie in [0, V) = [0, 65), got 70"),
    (dict(temperature="0.5"), "temperature must be a finite number > 0, got '0.5'"),
    (dict(temperature=0.0), "temperature must be a finite number > 0, got 0.0"),
    (dict(temperature=-1), "temperature must be a finite number > 0, got -1.0"),
    (dict(temperature=float("nan")), "temperature must be a finite number > 0, got nan"),
    (dict(temperature=float("inf")), "temperature must be a finite number > 0, got inf"),
    (dict(generator=5), "generator must be a torch.Generator or None, got int"),
]
NEW_TOKENS_REFUSALS = [
    (dict(new_tokens=2.5), "new_tokens must be an integer >= 0, got 2.5"),
    (dict(new_tokens=3.0), "new_tokens must be an integer >= 0, got 3.0"),
    (dict(new_tokens=-1), "new_tokens must be an integer >= 0, got -1"),
    (dict(new_tokens=True), "new_tokens must be an integer >= 0, got True"),
]


@pytest.mark.parametrize(
    "kwargs, rule", [(kwargs | dict(new_tokens=n), rule) for kwargs, rule in REFUSALS for n in (0, 4)] + NEW_TOKENS_REFUSALS
)
@pytest.mark.parametrize("training", [False, True])
def test_bad_arguments_are_refused_before_any_step(model, kwargs, rule, training, same_state):
    """Also with new_tokens=0, which used to skip every check; the mode and weights stay as they were."""
    model.train(training)
    before = copy.deepcopy(model.state_dict())
    arguments = dict(prompt=data.encode("To be"), temperature=1.0, generator=None) | kwargs
    with pytest.raises(ValueError, match=re.escape(rule)):
        sample(model, **arguments)
    assert model.training == training
    assert same_state(before, model)


def test_a_failure_during_sampling_restores_the_mode(model):
    """Finite weights whose products overflow float32 (1e30 x 1e30) make the logits inf or NaN mid-call:
    one clear error, and the model is still in train mode."""
    with torch.no_grad():
        model.ln_f.gamma.fill_(1e30)
        model.W_U.fill_(1e30)
    model.train()
    with pytest.raises(ValueError, match="the model's logits are not finite"):
        sample(model, data.encode("To be"), 3)
    assert model.training


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_weight_is_refused_by_name_before_the_first_step(model, value):
    """The fused attention kernel gives finite logits for a NaN query weight: only the weights tell."""
    with torch.no_grad():
        model.blocks[0].attn.W_Q[0, 0, 0] = value
    model.train()
    words = r"^model's weights must be finite, got 1 NaN or inf values in blocks.0.attn.W_Q$"
    for call in (lambda: sample(model, data.encode("To be"), 0), lambda: next_token_probabilities(model, data.encode("To"))):
        with pytest.raises(ValueError, match=words):
            call()
    assert model.training


@pytest.mark.parametrize("temperature", [1e-300, 5e-324])
def test_any_positive_temperature_gives_greedy_decoding_in_the_limit(model, temperature):
    """Logits divided by 5e-324 overflow to inf; shifted to a maximum of 0 first, every probability stays finite."""
    model.eval()
    prompt = data.encode("ROMEO:")
    ids = sample(model, prompt, 10, temperature=temperature, generator=torch.Generator().manual_seed(0))
    greedy = prompt.clone()
    for _ in range(10):  # independent greedy loop
        with torch.no_grad():
            greedy = torch.cat([greedy, model(greedy[-SMALL.T_max :])[-1].argmax().view(1)])
    assert torch.equal(ids, greedy)
    assert torch.isfinite(next_token_probabilities(model, prompt, temperature)).all()


def test_a_long_prompt_is_kept_and_only_its_last_T_max_ids_are_seen(model):
    prompt = data.encode("To be, or not to be, that is the question")
    ids = sample(model, prompt, 3, generator=torch.Generator().manual_seed(1))
    assert torch.equal(ids[: len(prompt)], prompt) and len(ids) == len(prompt) + 3
    assert torch.equal(next_token_probabilities(model, prompt), next_token_probabilities(model, prompt[-SMALL.T_max :]))


def test_small_integer_dtypes_sample_the_same(model):
    prompt = data.encode("To be")
    a = sample(model, prompt, 5, generator=torch.Generator().manual_seed(2))
    b = sample(model, prompt.to(torch.uint8), 5, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and b.dtype == torch.long


@pytest.mark.parametrize("temperature", [0.7, 1.0, 3.0])
def test_sample_draws_each_token_from_next_token_probabilities(model, temperature):
    """sample's loop skips re-checking its growing ids; its tokens are bit for bit those of the public,
    checked next_token_probabilities fed to the same seeded generator (past T_max, so the window slides)."""
    model.eval()  # sample runs the model in eval mode; the loop below calls it as it is
    prompt = data.encode("To be, or")
    ids = sample(model, prompt, 20, temperature=temperature, generator=torch.Generator().manual_seed(3))
    generator, expected = torch.Generator().manual_seed(3), prompt.clone()
    for _ in range(20):
        probabilities = next_token_probabilities(model, expected, temperature)
        expected = torch.cat([expected, torch.multinomial(probabilities, 1, generator=generator)])
    assert torch.equal(ids, expected)
