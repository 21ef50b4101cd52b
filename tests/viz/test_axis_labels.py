"""Every figure gptlib.viz draws has labelled axes (issue 44, item 7).

Each figure function of gptlib/viz (every public `*_figure` and every `*Picture.draw`) is built here once, on
small inputs of the kinds the notebooks pass, and every axes it holds is read: a drawn axes needs a non-empty
x and y label, a colour bar a label along its scale. Axes switched off (no frame, no ticks) draw their own
labels as texts; those figures are named below with the texts they must hold.
"""

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
import torch

pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
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


LONG_TEXT = "PETRUCHIO:\nWhy, how now, Kate!"  # 30 characters


def _stream_case():
    """The bars and the title the stream explorer draws at position 20 of LONG_TEXT: a title as long as the page's."""
    run = _module("stream").stream_run(_small_model(), LONG_TEXT)
    return run.attribution("difference", 20, 0), run.title("difference", 20, 0)


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
        "Direct contributions to z('e') - z('o') (prediction minus true next) at position 39 after 'h'"),
    "stream.stream_figure": lambda: _module("stream").stream_figure(
        *_stream_case(), "logit", _module("stream").stream_run(_small_model(), LONG_TEXT), 0, 1, 20),
    "next_character.next_character_figure": lambda: _module("next_character").next_character_figure(
        "ROMEO:\n", torch.softmax(torch.linspace(0, 3, 65, dtype=torch.float64), dim=0), _module("next_character").VOCABULARY),
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


def texts_outside(fig) -> list[str]:
    """The titles, axis labels and figure texts of a drawn figure whose box reaches past the figure's edge (what a
    static PNG would clip), each as its text."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = fig.bbox
    texts = [*fig.texts, *(t for t in (fig._suptitle,) if t is not None)]
    for ax in fig.axes:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
    outside = []
    for text in texts:
        if not text.get_visible() or not text.get_text().strip():
            continue
        extent = text.get_window_extent(renderer)
        if extent.x0 < box.x0 - 1 or extent.x1 > box.x1 + 1 or extent.y0 < box.y0 - 1 or extent.y1 > box.y1 + 1:
            outside.append(text.get_text())
    return outside


# The explorers' static pictures go through display.render_png, which draws the figure's own box and nothing past it
# (display.figure_png, behind show_figure, crops to what is drawn and enlarges the canvas to hold it).
RENDERED_AS_IS = {"attention.AttentionPicture.draw", "counting.CountPicture.draw", "stream.stream_figure",
                  "layernorm.sphere_figure", "next_character.next_character_figure"}
RENDER_CALL = re.compile(r"render_png\((?:self\.picture\.draw|CountPicture\(\)\.draw|(\w+_figure))\(")


def test_every_picture_drawn_without_cropping_is_checked_below():
    calls = {(path.stem, match.group(1) or ("attention.AttentionPicture.draw" if "picture" in match.group(0)
                                             else "counting.CountPicture.draw"))
             for path in Path(gptlib.viz.__file__).parent.glob("*.py") if path.stem != "display"
             for match in RENDER_CALL.finditer(path.read_text())}
    assert {name if "." in name else f"{module}.{name}" for module, name in calls} == RENDERED_AS_IS
    assert len(calls) == len(re.findall(r"render_png\(", " ".join(
        p.read_text() for p in Path(gptlib.viz.__file__).parent.glob("*.py") if p.stem != "display")))


@pytest.mark.parametrize("name", sorted(RENDERED_AS_IS))
def test_every_title_and_label_of_a_static_picture_lies_inside_it(name):
    """What such a static PNG shows is the figure's box: a title or axis label past its edge is clipped."""
    assert texts_outside(BUILDERS[name]()) == [], name


def test_the_inside_check_finds_a_clipped_title():
    fig = Figure(figsize=(3, 2), layout="constrained")
    fig.subplots().set_title("a title far too long to fit across a figure only three inches wide, at any font size")
    assert len(texts_outside(fig)) == 1


def test_the_stream_figure_draws_the_caption_s_two_rows():
    """Figure 10.2's caption names a bar per write above and the chosen head's attention row below: the static
    picture holds both, the row with one bar per key s <= t whose heights are that row of A^h."""
    from gptlib.viz import stream

    run = stream.stream_run(_small_model(), LONG_TEXT)
    attribution, title = run.attribution("difference", 20, 0), run.title("difference", 20, 0)
    fig = stream.stream_figure(attribution, title, "logit difference", run, 0, 1, 20)
    bars, row = fig.axes
    assert len(bars.patches) == len(attribution.values) and len(row.patches) == 21
    heights = torch.tensor([p.get_height() for p in row.patches])  # (21,)
    torch.testing.assert_close(heights, run.A[0, 1, 20, :21].double(), rtol=0, atol=1e-6)
    assert fig.get_label().endswith(stream.describe_row(run, 0, 1, 20))
