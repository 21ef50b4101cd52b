"""Every figure gptlib.viz draws has labelled axes (issue 44, item 7).

Each figure function of gptlib/viz (every public `*_figure` and every `*Picture.draw`) is built here once, on
small inputs of the kinds the notebooks pass, and every axes it holds is read: a drawn axes needs a non-empty
x and y label, a colour bar a label along its scale. Axes switched off (no frame, no ticks) draw their own
labels as texts; those figures are named below with the texts they must hold.
"""

import importlib
import inspect
import pkgutil

import pytest
import torch

pytest.importorskip("matplotlib")

from matplotlib.figure import Figure  # noqa: E402

import gptlib.viz  # noqa: E402
from gptlib import COURSE_CONFIG, GPT, encode  # noqa: E402
from gptlib.analysis.causality import gradient_map, perturbation_map  # noqa: E402
from gptlib.analysis.cost import TokenTimes  # noqa: E402
from gptlib.analysis.counting import component_table  # noqa: E402
from gptlib.analysis.decomposition import Attribution, LensReading  # noqa: E402
from gptlib.analysis.jacobians import DepthStudyRow  # noqa: E402
from gptlib.analysis.residual import BlockDropLosses, BranchWriteRatios, WriteVariance  # noqa: E402
from gptlib.train.own_model import TrainingRun  # noqa: E402


def _small_model():
    torch.manual_seed(0)
    return GPT(COURSE_CONFIG.replace(d=32, L=1)).eval()


def _module(name):
    return importlib.import_module(f"gptlib.viz.{name}")


# name -> a zero-argument builder of that figure, with inputs of the kinds the notebooks pass
BUILDERS = {
    "attention.attention_figure": lambda: _module("attention").attention_figure(
        _module("attention").attention_view(_small_model(), "ab c", 0, 1)),
    "attention.AttentionPicture.draw": lambda: _module("attention").attention_figure(
        _module("attention").attention_view(_small_model(), "ab c", 0, 1)),
    "attention.singular_values_figure": lambda: _module("attention").singular_values_figure(
        {"M": torch.tensor([3.0, 1.0, 1e-9])}, 1e-6, "spectrum"),
    "causality.dependency_maps_figure": lambda: _module("causality").dependency_maps_figure(
        {"perturbation": perturbation_map(_small_model(), encode("abc")),
         "gradient": gradient_map(_small_model(), encode("abc"))}, "abc"),
    "cost.cost_vs_T_figure": lambda: _module("cost").cost_vs_T_figure(
        [64, 256], {"scores": [1.0, 4.0], "MLP": [8.0, 8.0]},
        TokenTimes((64, 256), median=(2e-6, 3e-6), fastest=(1e-6, 3e-6), slowest=(4e-6, 5e-6)), 768),
    "cost.six_n_rule_error_figure": lambda: _module("cost").six_n_rule_error_figure(
        [64, 512, 4096], [64, 256], [[0.01, 0.1, 0.5], [0.005, 0.05, 1.5]]),
    "counting.CountPicture.draw": lambda: _module("counting").CountPicture().draw(
        component_table(GPT(COURSE_CONFIG)), COURSE_CONFIG),
    "layernorm.sphere_figure": lambda: _module("layernorm").sphere_figure(
        _module("layernorm").sphere_scene((1.0, 0.5, -0.25))),
    "layernorm.norm_against_sigma_figure": lambda: _module("layernorm").norm_against_sigma_figure(
        8, torch.logspace(-4, 1, 20, dtype=torch.float64), [0.0, 1e-3]),
    "layernorm.gained_circle_figure": lambda: _module("layernorm").gained_circle_figure(
        torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64), torch.tensor([0.5, 0.0, -0.5], dtype=torch.float64),
        torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))),
    "induction.ov_eigenvalues_figure": lambda: _module("induction").ov_eigenvalues_figure(
        torch.tensor([2.0 + 0.0j, 0.5 + 1.5j, 0.5 - 1.5j]), "layer 1 head 2"),
    "positionwise.gelu_figure": lambda: _module("positionwise").gelu_figure(torch.linspace(-4, 4, 81)),
    "jacobians.block_spectrum_figure": lambda: _module("jacobians").block_spectrum_figure(
        {"pre": torch.tensor([3.0, 1.0, 1.0]), "post": torch.tensor([2.0, 0.5, 0.0])}),
    "jacobians.depth_study_figure": lambda: _module("jacobians").depth_study_figure(
        {"pre": [DepthStudyRow(1, torch.tensor([4.0, 2.0, 1.0]), torch.tensor([1.0, 2.0])),
                 DepthStudyRow(3, torch.tensor([9.0, 3.0, 0.5]), torch.tensor([1.0, 2.0, 3.0, 4.0]))]}),
    "residual.stream_figure": lambda: _module("residual").stream_figure(
        {"random": torch.tensor([1.0, 1.5, 2.0])}, {"random": torch.tensor([1.0, 0.9, 0.7])}),
    "residual.small_updates_figure": lambda: _module("residual").small_updates_figure(
        BranchWriteRatios(attn=torch.tensor([0.1, 0.2]), mlp=torch.tensor([0.3, 0.4])),
        BlockDropLosses(base=torch.tensor(1.5), dropped=torch.tensor([2.0, 1.75]))),
    "residual.init_variance_figure": lambda: _module("residual").init_variance_figure(
        [1, 4], [WriteVariance(1.0, 1.1), WriteVariance(1.2, 1.0)], [WriteVariance(2.0, 2.1), WriteVariance(8.0, 7.0)]),
    "decomposition.attribution_figure": lambda: _module("decomposition").attribution_figure(
        Attribution(("E[x]", "P", "L0H0", "L0 MLP"), torch.tensor([0.5, -0.25, 2.0, -1.0]), rest=0.125, logit=1.375),
        "demo"),
    "decomposition.logit_lens_figure": lambda: _module("decomposition").logit_lens_figure(
        {"trained": LensReading(torch.tensor([4.0, 2.0]), torch.tensor([3.0, 2.0]), torch.tensor([0.1, 0.4]))}, 4.17),
    "training.loss_curves_figure": lambda: _module("training").loss_curves_figure(
        [TrainingRun("mine", (50, 100), (10.0, 21.0), (9.0, 19.0), (2.5, 2.1), (2.6, 2.2))], target=2.0),
}

# Figures laid out in pixels, whose axes are switched off on purpose: the texts that label their axes and colour
# bars instead (the attention picture names each heatmap's quantity above it, which its colour bar scales).
ATTENTION_TEXTS = ("key position s", "query position t", "head h", "row t: query t's attention over keys s (sums to 1)",
                   r"$\|(A^h X W_{OV}^h)_t\|$ at row t")
OWN_LABELS = {
    "attention.attention_figure": ATTENTION_TEXTS,
    "attention.AttentionPicture.draw": ATTENTION_TEXTS,
    "layernorm.sphere_figure": (),  # a 3-D scene projected on the screen: e_1, e_2, e_3 are drawn as arrows
}



def figure_functions() -> set[str]:
    """Every public `*_figure` function returning a Figure and every `*Picture.draw` method defined in a module
    of gptlib.viz."""
    found = set()
    for info in pkgutil.iter_modules(gptlib.viz.__path__):
        module = _module(info.name)
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", None) != module.__name__ or name.startswith("_"):
                continue
            returns = inspect.signature(obj).return_annotation if inspect.isfunction(obj) else None
            if name.endswith("_figure") and returns in ("Figure", Figure):
                found.add(f"{info.name}.{name}")
            if inspect.isclass(obj) and name.endswith("Picture") and hasattr(obj, "draw"):
                found.add(f"{info.name}.{name}.draw")
    return found


def unlabelled(fig, colour_bars: bool = True) -> list[str]:
    """What is missing: for each axes, the axis (x, y or colour bar, unless `colour_bars` is false) that has no
    label."""
    missing = []
    for i, ax in enumerate(fig.axes):
        colorbar = getattr(ax, "_colorbar", None)
        if colorbar is not None:
            if not colour_bars:
                continue
            long_axis = ax.yaxis if colorbar.orientation == "vertical" else ax.xaxis
            if not long_axis.get_label_text().strip():
                missing.append(f"axes {i} (colour bar): no label")
        elif ax.axison:
            missing += [f"axes {i} ({ax.get_title() or 'untitled'}): no {name} label"
                        for name, text in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())) if not text.strip()]
    return missing


def test_every_figure_function_of_gptlib_viz_is_built_here():
    assert figure_functions() == set(BUILDERS), "add a builder for each new figure function (and drop removed ones)"


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_axes_of_every_figure_is_labelled(name):
    fig = BUILDERS[name]()
    missing = unlabelled(fig, colour_bars=name not in OWN_LABELS)
    if name in OWN_LABELS:
        texts = {text.get_text() for text in fig.texts}
        assert set(OWN_LABELS[name]) <= texts, f"{name}: the texts that label its axes are missing"
    assert not missing, f"{name}: " + "; ".join(missing)


def test_the_check_fails_on_an_unlabelled_figure():
    fig = Figure()
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("t")
    image = ax.imshow([[0.0, 1.0]])
    fig.colorbar(image, ax=ax)
    assert unlabelled(fig) == ["axes 0 (untitled): no y label", "axes 1 (colour bar): no label"]
