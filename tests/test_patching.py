"""gptlib.analysis.patching on the shipped induction model: patching names the heads notebook 08's scores name.

The independent reference is gptlib.analysis.induction.head_scores (attention patterns, no intervention):
heads found by restoring the clean run's writes must be the previous-token heads of layer 0 and the
induction heads of layer 1 it finds, and the heads it finds neither must restore nothing.
"""

import pytest
import torch

from gptlib import pretrained
from gptlib.analysis.decomposition import logit_pieces, stream_writes
from gptlib.analysis.induction import head_scores, induction_eval_tokens
from gptlib.analysis.patching import ablation_effects, induction_patching_prompts, patching_restoration

SCORE = 0.5  # notebook 08's threshold on previous-token and induction scores
FOUND = 0.1  # a head restoring at least a tenth of the log-probability gap counts as found by patching


@pytest.fixture(scope="module")
def toy():
    return pretrained.load_pretrained("induction")


@pytest.fixture(scope="module")
def prompts():
    return induction_patching_prompts(induction_eval_tokens()[:32], 65, seed=0)


def test_the_corruption_keeps_the_targets_and_removes_the_earlier_occurrence(prompts):
    n = prompts.clean.shape[1] // 2
    i = prompts.positions - n
    assert torch.equal(prompts.corrupted[:, n:], prompts.clean[:, n:])  # second copy untouched
    assert torch.equal(prompts.corrupted[:, i + 1], prompts.targets)  # a_(i+1) kept in the first copy
    assert (prompts.corrupted[:, i] != prompts.clean[:, i]).all()  # a_i replaced everywhere


def test_patching_finds_the_heads_the_attention_scores_find(toy, prompts):
    previous, induction = head_scores(toy, prompts.clean)  # (L, H) each
    restored = patching_restoration(toy, prompts.clean, prompts.corrupted, prompts.log_prob)
    assert (restored[0] > FOUND).tolist() == (previous[0] > SCORE).tolist()
    assert (restored[1] > FOUND).tolist() == (induction[1] > SCORE).tolist()
    controls = restored[0][previous[0] <= SCORE]
    assert len(controls) > 0 and controls.abs().max() < 0.05  # heads that should restore nothing


def test_patching_every_head_of_a_run_into_itself_changes_nothing(toy, prompts):
    clean = stream_writes(toy, prompts.clean)
    heads = {label: clean[label] for label in clean.labels if "H" in label}
    again = stream_writes(toy, prompts.clean, replace=heads)
    assert torch.equal(logit_pieces(toy, again).total, logit_pieces(toy, clean).total)


def test_patching_refuses_runs_with_nothing_to_restore(toy, prompts):
    with pytest.raises(ValueError, match="nothing to restore"):
        patching_restoration(toy, prompts.clean, prompts.clean, prompts.log_prob)


def test_layer_0_heads_act_through_layer_1_not_directly(toy, prompts):
    effects = ablation_effects(toy, prompts.clean, prompts.positions, prompts.targets)
    previous, _ = head_scores(toy, prompts.clean)
    strongest = int(previous[0].argmax())
    assert abs(effects.direct[0, strongest]) < 0.1  # its write says almost nothing to the logits
    assert effects.ablated_drop[0, strongest] > 10 * abs(effects.direct[0, strongest])  # yet removing it costs


@pytest.mark.parametrize(
    "tokens, rule",
    [(torch.randint(0, 65, (2, 10)), "said twice"), (torch.zeros(2, 4, dtype=torch.long), "n >= 3")],
)
def test_prompts_need_rows_said_twice(tokens, rule):
    with pytest.raises(ValueError, match=rule):
        induction_patching_prompts(tokens, 65)
