"""Section 6 and Rule-of-thumb 6.1: gptlib.analysis.cost's closed forms against FlopCounterMode."""

import re

import pytest
import torch

from gptlib import COURSE_CONFIG, GPT
from gptlib.analysis import cost

CONFIGS = [
    (COURSE_CONFIG, 64, 1),
    (COURSE_CONFIG, 64, 3),
    (COURSE_CONFIG.replace(d=64, H=2, L=2), 17, 2),
    (COURSE_CONFIG.replace(d_ff=100, tie_weights=True), 10, 1),
    (COURSE_CONFIG.replace(attn_only=True, L=2), 33, 1),
    (COURSE_CONFIG.replace(d=256, H=8, L=6, V=500), 1000, 1),
]


@pytest.mark.parametrize("config, T, B", CONFIGS)
def test_closed_form_equals_flop_counter(config, T, B):
    assert cost.forward_flops(config, T, B) == cost.measured_flops(config, T, B)
    assert cost.training_flops(config, T, B) == cost.measured_flops(config, T, B, training=True)


def test_a_count_without_the_T_squared_term_is_caught():
    # The check can fail: dropping attention's score/aggregation row leaves a visible gap.
    config, T = COURSE_CONFIG, 64
    rows = cost.forward_costs(config, T)
    linear_only = sum(rows.values()) - rows["attention scores and value aggregation"]
    assert linear_only != cost.measured_flops(config, T)
    assert cost.measured_flops(config, T) - linear_only == 4 * config.L * T * T * config.d


def test_meta_device_count_equals_a_real_cpu_run():
    config = COURSE_CONFIG.replace(d=32, H=2, L=2)
    assert cost.measured_flops(config, 16, 2, device="cpu") == cost.measured_flops(config, 16, 2)


def test_flop_counter_on_the_fused_cpu_attention_kernel_loses_exactly_the_attention_term_or_nothing():
    # PyTorch 2.13's FlopCounterMode has no formula for CPU's fused SDPA kernel, so exactly the
    # 4 L T^2 d term is lost (why measured_flops runs the explicit path); a later PyTorch may count it.
    config, T = COURSE_CONFIG.replace(d=32, H=2, L=2), 16
    lost = cost.forward_flops(config, T) - cost.measured_flops(config, T, fused=True, device="cpu")
    assert lost in (cost.forward_costs(config, T)["attention scores and value aggregation"], 0)
    if torch.__version__.startswith("2.13."):
        assert lost > 0


def test_score_and_aggregate_row_is_what_the_attention_core_costs():
    for config, T, B in CONFIGS:
        row = cost.forward_costs(config, T, B)["attention scores and value aggregation"]
        assert cost.measured_score_and_aggregate_flops(config, T, B) == row


@pytest.mark.parametrize("d, d_ff", [(128, None), (64, 100), (96, 384)])
def test_crossover_is_where_measured_attention_overtakes_projections_and_mlp(d, d_ff):
    config = COURSE_CONFIG.replace(d=d, H=4, d_ff=d_ff or 4 * d)
    T_star = cost.crossover_T(config)
    assert T_star == 2 * d + config.d_ff

    def measured_block_split(T):  # per block, from FlopCounterMode only
        block = cost.measured_flops(config.replace(L=2), T) - cost.measured_flops(config.replace(L=1), T)
        core = cost.measured_score_and_aggregate_flops(config.replace(L=1), T)
        return core, block - core

    core, rest = measured_block_split(T_star)
    assert core == rest
    core, rest = measured_block_split(T_star - 1)
    assert core < rest
    core, rest = measured_block_split(T_star + 1)
    assert core > rest


def test_course_non_embedding_parameters_from_the_lectures_table():
    # Lecture's table: total 816,640 minus token and positional embeddings 16,512.
    assert cost.non_embedding_parameters(COURSE_CONFIG) == 816_640 - 16_512
    assert cost.six_n_rule(COURSE_CONFIG, 10) == 6 * (816_640 - 16_512) * 10
    assert cost.non_embedding_parameters(COURSE_CONFIG) == sum(
        p.numel() for name, p in GPT(COURSE_CONFIG).named_parameters() if name not in ("E", "P")
    )


@pytest.mark.parametrize("config", [config for config, _, _ in CONFIGS])
def test_embedding_and_non_embedding_parameters_split_the_model_s_own_count(config):
    with torch.device("meta"):  # shapes only
        params = dict(GPT(config).named_parameters())  # a tied W_U = E^T is E, counted once
    assert cost.embedding_parameters(config) == params["E"].numel() + params["P"].numel()
    assert cost.non_embedding_parameters(config) == sum(p.numel() for name, p in params.items() if name not in ("E", "P"))


@pytest.mark.parametrize("d, T", [(128, 64), (128, 1024), (512, 128), (64, 2048)])
def test_six_n_rule_error_follows_the_attention_term(d, T):
    # Measured/rule - 1 from the derivation: weights give 6 (12 L d^2 + dV) per token, attention 12 L T d.
    config = COURSE_CONFIG.replace(d=d, H=4)
    L, V = config.L, config.V
    per_token = 6 * (12 * L * d * d + d * V) + 12 * L * T * d
    assert cost.six_n_rule_error(config, T) == pytest.approx(per_token / (6 * cost.non_embedding_parameters(config)) - 1)


@pytest.mark.parametrize("d, T", [(64, 4096), (128, 1024), (1024, 32)])  # corners of notebook 07's grid
def test_six_n_rule_error_is_the_error_against_what_flop_counter_measures(d, T):
    config = COURSE_CONFIG.replace(d=d, T_max=T)
    measured = cost.measured_flops(config, T, training=True)
    assert cost.six_n_rule_error(config, T) == measured / cost.six_n_rule(config, T) - 1


def test_six_n_rule_is_off_by_more_than_20_percent_only_for_long_sequences():
    config = COURSE_CONFIG
    assert abs(cost.six_n_rule_error(config, 64)) < 0.2  # course length T = 64 < 1.2 d
    assert cost.six_n_rule_error(config, 256) > 0.2  # T = 2d


def test_seconds_per_token_times_every_length_in_rounds():
    model = GPT(COURSE_CONFIG.replace(d=16, H=2, L=1)).eval()
    times = cost.seconds_per_token(model, [4, 8], tokens=16, rounds=3)
    assert times.T == (4, 8)
    for fastest, median, slowest in zip(times.fastest, times.median, times.slowest):
        assert 0 < fastest <= median <= slowest


@pytest.mark.parametrize("T_values, tokens, rounds, message", [
    ([], 16, 3, "T_values must hold at least one length T, got none"),
    (8, 16, 3, "T_values must be a sequence of lengths T, got 8"),
    ("8", 16, 3, "T_values must be a sequence of lengths T, got '8'"),
    ([8, 65], 128, 3, "T must be an integer in [1, 64], got 65"),
    ([8.0], 16, 3, "T must be an integer in [1, 64], got 8.0"),
    ([8, 32], 16, 3, "tokens must be an integer >= 32, got 16"),
    ([8], 16, 0, "rounds must be an integer >= 1, got 0"),
])
def test_seconds_per_token_refuses_bad_lengths_and_counts(T_values, tokens, rounds, message):
    model = GPT(COURSE_CONFIG.replace(d=16, H=2, L=1)).eval()
    with pytest.raises(ValueError, match=re.escape(message)):
        cost.seconds_per_token(model, T_values, tokens=tokens, rounds=rounds)


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match=re.escape("T must be an integer >= 1, got 0")):
        cost.forward_costs(COURSE_CONFIG, 0)
    with pytest.raises(ValueError, match=re.escape("B must be an integer >= 1, got 0")):
        cost.measured_flops(COURSE_CONFIG, 8, B=0)
    with pytest.raises(ValueError, match="attention-only"):
        cost.crossover_T(COURSE_CONFIG.replace(attn_only=True))
