"""gptlib.analysis.patching on the shipped induction model: patching names the heads notebook 08's scores name.

The independent reference is gptlib.analysis.induction.head_scores (attention patterns, no intervention):
heads found by restoring the clean run's writes must be the previous-token heads of layer 0 and the
induction heads of layer 1 it finds, and the heads it finds neither must restore nothing.
"""

import math

import pytest
import torch

from gptlib import GPT, GPTConfig, encode, pretrained
from gptlib.analysis.decomposition import logit_pieces, stream_writes
from gptlib.analysis.induction import head_scores, induction_eval_tokens
from gptlib.analysis.patching import ablation_effects, induction_patching_prompts, logits_from_writes, patching_restoration

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


# --- What the patching readers refuse: each message names the argument and the rule it breaks -------

SMALL = GPTConfig(T_max=16, d=12, H=3, L=2)


@pytest.fixture(scope="module")
def small():
    torch.manual_seed(0)
    return GPT(SMALL).eval()


def mean_logit(Z: torch.Tensor) -> float:
    return Z[..., 0].mean().item()


def rows(text: str, B: int = 1) -> torch.Tensor:
    return encode(text).repeat(B, 1)  # (B, T)


def test_a_model_that_is_not_a_gpt_is_refused_by_every_reader(small):
    idx = rows("abcdef")
    writes = stream_writes(small, idx)
    calls = (lambda m: ablation_effects(m, idx, torch.tensor([1]), torch.tensor([[1]])),
             lambda m: logits_from_writes(m, writes),
             lambda m: patching_restoration(m, idx, rows("fedcba"), mean_logit))
    for call in calls:
        for model in ("gpt", object(), torch.nn.Linear(12, 65)):
            with pytest.raises(ValueError, match=f"^model must be a gptlib GPT, got {type(model).__name__}$"):
                call(model)


def test_writes_of_another_width_are_refused(small):
    torch.manual_seed(1)
    narrow = GPT(SMALL.replace(d=8, H=2))
    with pytest.raises(ValueError, match=r"^writes must be a stack \(n, B, T, d\) .* with d = 8, got shape \(12, 1, 6, 12\)"):
        logits_from_writes(narrow, stream_writes(small, rows("abcdef")))


def test_positions_out_of_range_cite_the_sequence_length(small):
    with pytest.raises(ValueError, match=r"^positions must lie in \[0, T\) = \[0, 6\), got 6, 9$"):
        ablation_effects(small, rows("abcdef"), torch.tensor([1, 6, 9]), torch.tensor([[1, 2, 3]]))


@pytest.mark.parametrize("clean, corrupted, words", [
    (torch.zeros(0, dtype=torch.long), rows("abcdef"), r"^clean must hold at least one sequence"),
    (torch.full((6,), 99), rows("abcdef"), r"^clean must lie in \[0, V\) = \[0, 65\), got 99"),
    (rows("abcdef"), torch.full((1, 6), -1), r"^corrupted must lie in \[0, V\)"),
    (rows("abcdef").float(), rows("abcdef"), "^clean must have an integer dtype"),
    (rows("abcdef"), rows("fedcba", 3), r"^clean and corrupted must have the same shape \(B, T\), got \(1, 6\) and \(3, 6\)"),
    (rows("abcdef", 3), rows("fedcba"), r"got \(3, 6\) and \(1, 6\)"),
    (rows("abcdef", 2), rows("fedcba", 3), r"got \(2, 6\) and \(3, 6\)"),
    (rows("abcdef"), rows("fedcbaa"), r"got \(1, 6\) and \(1, 7\)"),
])
def test_clean_and_corrupted_are_named_and_must_match(small, clean, corrupted, words):
    with pytest.raises(ValueError, match=words):
        patching_restoration(small, clean, corrupted, mean_logit)


@pytest.mark.parametrize("value, words", [
    (math.nan, "got nan"), (math.inf, "got inf"), (-math.inf, "got -inf"), (torch.tensor(math.nan), "got nan"),
    ("a", "got 'a'"), (None, "got None"), (True, "got True"), (torch.ones(2, 3), r"got a tensor of shape \(2, 3\)"),
])
def test_a_metric_that_is_not_a_finite_number_is_refused_naming_the_metric(small, value, words):
    with pytest.raises(ValueError, match=r"^metric must return a finite number \(a float, or a tensor of one element\) "
                                         r"on the corrupted run, " + words):
        patching_restoration(small, rows("abcdef"), rows("fedcba"), lambda Z: value)


def test_a_metric_that_turns_non_finite_on_a_patched_run_is_refused_there(small):
    calls = []

    def metric(Z):
        calls.append(Z)
        return mean_logit(Z) if len(calls) <= 2 else math.nan
    with pytest.raises(ValueError, match=r"^metric must return a finite number .* on the run patched with L0H0, got nan"):
        patching_restoration(small, rows("abcdef"), rows("fedcba"), metric)


def test_a_metric_that_cannot_be_called_is_refused_before_any_run(small):
    with pytest.raises(ValueError, match=r"^metric must be a function of the logits \(B, T, V\), got int"):
        patching_restoration(small, rows("abcdef"), rows("fedcba"), 3)


def test_one_sequence_is_one_row(small):
    assert torch.equal(patching_restoration(small, encode("abcdef"), rows("fedcba"), mean_logit),
                       patching_restoration(small, rows("abcdef"), encode("fedcba"), mean_logit))
    with pytest.raises(ValueError, match=r"got \(1, 6\) and \(2, 6\)"):
        patching_restoration(small, encode("abcdef"), rows("fedcba", 2), mean_logit)


def test_a_metric_returning_a_one_element_tensor_counts_as_its_number(small):
    as_float = patching_restoration(small, rows("abcdef", 2), rows("fedcba", 2), mean_logit)
    as_tensor = patching_restoration(small, rows("abcdef", 2), rows("fedcba", 2), lambda Z: Z[..., 0].mean().reshape(1))
    assert torch.equal(as_float, as_tensor)


@pytest.mark.parametrize("V, seed, words", [
    (1, 0, r"^V must be an integer >= 2, got 1"), (True, 0, "^V must be an integer >= 2, got True"),
    (65.0, 0, r"^V must be an integer >= 2, got 65.0"),
    (65, True, r"^seed must be an integer in \[0, 18446744073709551615\], got True"),
    (65, 1.5, "^seed must be an integer .* got 1.5"), (65, 2**70, f"^seed must be an integer .* got {2**70}"),
    (65, -1, "^seed must be an integer .* got -1"),
])
def test_prompts_refuse_a_vocabulary_or_seed_that_breaks_the_rules(V, seed, words):
    tokens = torch.tensor([[0, 0, 0, 0, 0, 0]]) if V == 1 else torch.tensor([[1, 2, 3, 1, 2, 3]])
    with pytest.raises(ValueError, match=words):
        induction_patching_prompts(tokens, V, seed=seed)


def test_prompts_take_the_largest_seed_and_a_two_character_vocabulary():
    tokens = torch.tensor([[0, 1, 1, 0, 1, 1]])
    prompts = induction_patching_prompts(tokens, 2, seed=2**64 - 1)
    assert torch.equal(prompts.corrupted[:, [0, 2]], 1 - tokens[:, [0, 2]])  # the one other character


def test_every_patching_reader_refuses_a_model_with_non_finite_weights(small):
    model = GPT(SMALL).eval()
    with torch.no_grad():
        model.blocks[0].mlp.W_1[0, 0] = math.nan
    idx = rows("abcdef")
    writes = stream_writes(small, idx)
    words = r"^model's weights must be finite, got 1 NaN or inf values in blocks.0.mlp.W_1$"
    for call in (lambda: ablation_effects(model, idx, torch.tensor([1]), torch.tensor([[1]])),
                 lambda: logits_from_writes(model, writes),
                 lambda: patching_restoration(model, idx, rows("fedcba"), mean_logit)):
        with pytest.raises(ValueError, match=words):
            call()


@pytest.mark.parametrize("Z, words", [
    ("logits", "got str"), (torch.zeros(1, 6, 65), r"got \(1, 6, 65\)"), (torch.zeros(2, 6, 3), r"got \(2, 6, 3\)"),
    (torch.zeros(2, 6, 65, dtype=torch.long), r"got \(2, 6, 65\)"),
])
def test_the_prompts_metric_names_logits_of_another_shape(Z, words):
    prompts = induction_patching_prompts(torch.tensor([[1, 2, 3, 1, 2, 3], [4, 5, 6, 4, 5, 6]]), 65)
    with pytest.raises(ValueError, match=r"^Z must be floating-point logits \(B, 2n, V\) with \(B, 2n\) = \(2, 6\) "
                                         r"and every target below V, " + words):
        prompts.log_prob(Z)
