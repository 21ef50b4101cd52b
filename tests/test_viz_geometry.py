"""The d = 3 sphere widget and the Section 3-4 figures, without a browser: set sliders, check what was computed."""

import math
import re

import pytest
import torch

pytest.importorskip("ipywidgets")

from gptlib import geometry  # noqa: E402
from gptlib.viz import geometry as viz_geometry  # noqa: E402
from gptlib.viz.geometry import LayerNormSphere, sphere_scene  # noqa: E402

CSS_CLASSES = {name: name for name in ("u0", "u1", "u2", "scale", "eps", "gamma", "beta", "tilt", "turn", "view")}
CSS_CLASSES |= {"message": "status", "output": "image"}


def test_every_control_carries_its_css_class():
    widget = LayerNormSphere()
    for name, attribute in CSS_CLASSES.items():
        control = getattr(widget, attribute)
        assert f"gptlib-sphere-{name}" in control._dom_classes


def test_default_scene_lies_on_the_circle_and_matches_torch_layer_norm():
    widget = LayerNormSphere()
    scene = widget.scene
    u = torch.tensor([widget.u0.value, widget.u1.value, widget.u2.value], dtype=torch.float64)
    torch.testing.assert_close(scene["normalized"], torch.nn.functional.layer_norm(u, (3,), eps=0.0))
    assert abs(float(scene["normalized"].sum())) < 1e-12
    assert math.isclose(scene["normalized_norm"], math.sqrt(3), rel_tol=1e-12)
    assert "exactly on the circle" in widget.message
    assert widget.figure is not None and len(widget.figure.axes) == 1


def test_scale_slider_leaves_the_normalized_point_unchanged():
    widget = LayerNormSphere()
    before = widget.scene["normalized"].clone()
    widget.scale.value = 2.5
    torch.testing.assert_close(widget.scene["normalized"], before)
    widget.scale.value = -1.0
    torch.testing.assert_close(widget.scene["normalized"], -before)
    assert "c < 0" in widget.message


@pytest.mark.parametrize(
    "settings, phrase",
    [
        ({"u0": 1.0, "u1": 1.0, "u2": 1.0}, "u is constant"),
        ({"u0": 0.3, "u1": 0.3, "u2": 0.3, "eps": 0.1}, "u is constant"),  # decimals whose mean is not exact
        ({"scale": 0.0}, "u = 0"),
        ({"u0": 0.0, "u1": 0.0, "u2": 0.0, "eps": 0.3}, "u = 0"),
    ],
)
def test_degenerate_inputs_show_a_message_and_beta(settings, phrase):
    widget = LayerNormSphere()
    widget.beta.value = 0.7
    for name, value in settings.items():
        getattr(widget, name).value = value
    assert phrase in widget.message
    assert "Traceback" not in widget.message
    torch.testing.assert_close(widget.scene["image"], torch.full((3,), 0.7, dtype=torch.float64))
    assert torch.isfinite(widget.scene["normalized"]).all()


def test_eps_shrinks_the_point_by_the_closed_form():
    widget = LayerNormSphere()
    widget.eps.value = 0.3
    s = widget.scene["sigma"]
    assert math.isclose(widget.scene["normalized_norm"], math.sqrt(3) * s / math.sqrt(s**2 + 0.3), rel_tol=1e-12)
    assert "eps = 0.3 > 0" in widget.message
    widget.eps.value = 0.0
    assert "0/0" not in widget.message


def test_gamma_and_beta_move_the_image_off_the_plane():
    scene = sphere_scene((2.0, 0.0, 1.0), gamma=1.5, beta=0.5)
    torch.testing.assert_close(scene["image"], 1.5 * scene["normalized"] + 0.5)
    assert math.isclose(float(scene["image"].mean()), 0.5, rel_tol=1e-12)


def test_view_presets_look_down_the_axis_and_along_the_plane():
    widget = LayerNormSphere()
    widget.view.value = "down the all-ones axis"
    assert (widget.tilt.value, widget.turn.value) == viz_geometry.VIEWS["down the all-ones axis"]
    right, up = viz_geometry.view_basis(widget.tilt.value, widget.turn.value)
    ones = torch.ones(3, dtype=torch.float64)
    assert abs(float(right @ ones)) < 1e-12 and abs(float(up @ ones)) < 1e-12  # the screen is the plane: a round circle
    torch.testing.assert_close(right @ up, torch.tensor(0.0, dtype=torch.float64))
    widget.view.value = "side-on to the plane"
    right, up = viz_geometry.view_basis(widget.tilt.value, widget.turn.value)
    torch.testing.assert_close(up, ones / math.sqrt(3))  # 1 points up, the plane is a horizontal line
    scene = widget.scene  # u off the plane, P(u) in it: their heights on screen are <u,1>/sqrt(3) and 0
    assert abs(float(scene["projection"] @ up)) < 1e-12
    assert math.isclose(float(scene["u"] @ up), float(scene["u"].sum()) / math.sqrt(3), rel_tol=1e-12)


def test_the_view_toggle_follows_tilt_and_turn_and_a_preset_click_always_applies():
    widget = LayerNormSphere()
    assert widget.view.value == "oblique"  # the default view is that preset
    oblique = viz_geometry.VIEWS["oblique"]
    widget.tilt.value = oblique[0] + 25.0  # dragged away: no preset matches the view any more
    assert widget.view.value is None
    widget.view.value = "oblique"  # clicking the preset brings the view back
    assert (widget.tilt.value, widget.turn.value) == oblique
    widget.turn.value, widget.tilt.value = viz_geometry.VIEWS["side-on to the plane"][::-1]  # reached by hand
    assert widget.view.value == "side-on to the plane"
    widget.turn.value = 0.0
    assert widget.view.value is None and widget.scene is not None


def test_figure_draws_the_scene_in_the_chosen_view():
    widget = LayerNormSphere()
    widget.tilt.value, widget.turn.value = 40.0, 100.0
    screen = viz_geometry.view_basis(40.0, 100.0)  # (2, 3)
    ax = widget.figure.axes[0]
    points = [tuple(line.get_xydata()[0]) for line in ax.lines if line.get_marker() == "o"]
    expected = tuple((widget.scene["normalized"] @ screen.T).tolist())
    assert any(math.dist(point, expected) < 1e-12 for point in points)  # the LN(u) dot


def test_bad_values_from_code_keep_the_picture_greyed_and_clear_the_scene():
    widget = LayerNormSphere()
    picture = bytes(widget.image.value)
    widget.u1.value = float("nan")
    assert widget.scene is None and widget.figure is None
    assert widget.message.startswith("Cannot draw: u_2 must be a finite number")
    assert "last valid input" in widget.message
    assert bytes(widget.image.value) == picture and "gptlib-stale" in widget.image._dom_classes
    widget.u1.value = 0.5
    assert widget.scene is not None and "gptlib-stale" not in widget.image._dom_classes


def test_a_number_typed_beside_a_slider_moves_it_and_redraws():
    widget = LayerNormSphere()
    assert "gptlib-sphere-u0-text" in widget.typed["u0"]._dom_classes and not widget.u0.readout
    picture = bytes(widget.image.value)
    widget.typed["u0"].value = " -0.35 "
    assert widget.u0.value == -0.35 and bytes(widget.image.value) != picture
    u = torch.tensor([-0.35, widget.u1.value, widget.u2.value], dtype=torch.float64)
    torch.testing.assert_close(widget.scene["normalized"], torch.nn.functional.layer_norm(u, (3,), eps=0.0))
    widget.turn.value = 45.0  # moving a slider shows its value in the box, as the readout did
    assert widget.typed["turn"].value == "45" and widget.typed["u0"].value == "-0.35"


@pytest.mark.parametrize(
    "typed, reason",
    [("abc", "u_1: 'abc' is not a number"), ("", "u_1: '' is not a number"),
     ("nan", "u_1: 'nan' is not a finite number"), ("5", "u_1 must be a finite number in [-3.0, 3.0], got 5.0"),
     ("1e400", "u_1 must be a finite number in [-3.0, 3.0], got inf")],
)
def test_text_that_is_not_a_number_in_range_is_refused_never_clamped(typed, reason):
    widget = LayerNormSphere()
    picture, scene, before = bytes(widget.image.value), widget.scene, widget.u0.value
    widget.typed["u0"].value = typed
    assert widget.message.startswith(f"Cannot draw: {reason} ") and "last valid input" in widget.message
    assert widget.u0.value == before and widget.scene is scene
    assert bytes(widget.image.value) == picture and "gptlib-stale" in widget.image._dom_classes
    widget.typed["u0"].value = f"{before}"  # the slider's own value typed again: drawn afresh
    assert "gptlib-stale" not in widget.image._dom_classes and widget.typed["u0"].value == "1.20"


def test_constructor_refuses_what_a_slider_would_clamp():
    with pytest.raises(ValueError, match=re.escape("u_1 must be a finite number in [-3.0, 3.0], got 1e+200")):
        LayerNormSphere(u=(1e200, 0.0, 0.0))
    with pytest.raises(ValueError, match=re.escape("u_2 must be a finite number in [-3.0, 3.0], got nan")):
        LayerNormSphere(u=(1.0, float("nan"), 0.0))
    with pytest.raises(ValueError, match="eps must be one of"):
        LayerNormSphere(eps=0.5)


@pytest.mark.parametrize("u", [(1e200, 0.0, 0.0), (1e308, 1e308, 0.0), (1e-200, 0.0, 0.0), (3e-320, 0.0, 1e-320)])
@pytest.mark.parametrize("eps", [0.0, 0.01])
def test_huge_and_tiny_u_normalize_like_their_rescaled_copy(u, eps):
    scene = sphere_scene(u, eps=eps)
    m = max(abs(x) for x in u)
    unit = torch.tensor(u, dtype=torch.float64) / m
    if eps == 0:  # scale invariance: LN(u) = LN(u / m), computed by torch in a safe range
        expected = torch.nn.functional.layer_norm(unit, (3,), eps=0.0)
    else:  # LN_eps(u) = (u - mean) / sqrt(sigma^2 + eps): for |u| >> 1 eps is negligible, for |u| << 1 it dominates
        expected = torch.nn.functional.layer_norm(unit, (3,), eps=0.0) if m > 1 else torch.zeros(3, dtype=torch.float64)
    torch.testing.assert_close(scene["normalized"], expected, atol=1e-12, rtol=1e-12)
    assert math.isfinite(scene["sigma"]) and scene["sigma"] > 0
    if eps == 0:
        assert "exactly on the circle" in scene["message"] and math.isclose(scene["normalized_norm"], math.sqrt(3))


def test_widget_repr_is_one_line_and_says_to_run_the_cell():
    text = repr(LayerNormSphere())
    assert text.startswith("LayerNormSphere") and "run this cell" in text and len(text) <= 110


def test_sphere_scene_refuses_bad_numbers():
    with pytest.raises(ValueError, match="exactly 3"):
        sphere_scene((1.0, 2.0))
    with pytest.raises(ValueError, match=re.escape("eps must be a finite number >= 0, got -0.1")):
        sphere_scene((1.0, 2.0, 3.0), eps=-0.1)
    with pytest.raises(ValueError, match=re.escape("u_2 must be a finite number, got nan")):
        sphere_scene((1.0, float("nan"), 3.0))
    with pytest.raises(ValueError, match="does not fit in a float64"):
        sphere_scene((1e308, 1e308, 0.0), c=3.0)
    with pytest.raises(ValueError, match=re.escape("its projection P(cu) does not fit in a float64")):
        sphere_scene((1.7e308, -1.7e308, 1.7e308))  # u fits, but u_2 - mean(u) = -2.3e308 does not


def test_norm_against_sigma_figure_draws_the_geometry_values():
    sigmas = torch.logspace(-3, 0, 10, dtype=torch.float64)
    fig = viz_geometry.norm_against_sigma_figure(8, sigmas, [0.0, 1e-3])
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    torch.testing.assert_close(torch.as_tensor(lines["eps = 0.001"].get_ydata()),
                               geometry.output_norm_against_sigma(8, sigmas, 1e-3))
    ideal, flat = lines["sqrt(d) = 2.83"], lines["eps = 0"]
    assert flat.get_zorder() > ideal.get_zorder() and flat.get_linewidth() > lines["eps = 0.001"].get_linewidth()
