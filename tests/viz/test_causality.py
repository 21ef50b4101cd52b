"""gptlib.viz.causality: each dependency map is drawn as given, exact zeros left blank (white)."""

import numpy as np
import pytest
import torch

pytest.importorskip("matplotlib")

from gptlib import COURSE_CONFIG, GPT, encode  # noqa: E402
from gptlib.analysis.causality import gradient_map, perturbation_map  # noqa: E402
from gptlib.viz.causality import dependency_maps_figure  # noqa: E402


def test_each_map_is_drawn_with_its_zeros_masked_and_one_shared_scale():
    model = GPT(COURSE_CONFIG.replace(d=32, L=1)).eval()
    text = "abc"
    maps = {"perturbation": perturbation_map(model, encode(text)), "gradient": gradient_map(model, encode(text))}
    fig = dependency_maps_figure(maps, text)
    images = [ax.images[0] for ax in fig.axes[: len(maps)]]
    for image, dependency_map in zip(images, maps.values()):
        drawn = image.get_array()
        np.testing.assert_array_equal(drawn.mask, dependency_map.numpy() == 0)  # the upper triangle, blank
        np.testing.assert_array_equal(drawn.data, dependency_map.numpy())
    positive = torch.cat([m[m > 0] for m in maps.values()])
    assert images[0].norm.vmin == images[1].norm.vmin == positive.min().item()
    assert images[0].norm.vmax == images[1].norm.vmax == positive.max().item()
    assert [label.get_text() for label in fig.axes[0].get_xticklabels()] == list(text)
    assert [ax.get_title() for ax in fig.axes[: len(maps)]] == list(maps)
    assert fig.get_label().endswith("not exactly 0: perturbation: 0 of 3; gradient: 0 of 3.")  # a causal model
