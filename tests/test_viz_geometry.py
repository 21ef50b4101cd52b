"""The d = 3 sphere widget and the Section 3-4 figures, without a browser: set sliders, check what was computed."""

import math

import pytest
import torch

pytest.importorskip("ipywidgets")

from gptlib import geometry  # noqa: E402
from gptlib.viz import geometry as viz_geometry  # noqa: E402
from gptlib.viz.geometry import LayerNormSphere, sphere_scene  # noqa: E402

CSS_CLASSES = ["u0", "u1", "u2", "scale", "eps", "gamma", "beta", "elev", "azim", "message", "output"]


def test_every_control_carries_its_css_class():
    widget = LayerNormSphere()
    for name in CSS_CLASSES:
        control = getattr(widget, name)
        assert f"gptlib-sphere-{name}" in control._dom_classes


def test_default_scene_lies_on_the_circle_and_matches_torch_layer_norm():
    widget = LayerNormSphere()
    scene = widget.scene
    u = torch.tensor([widget.u0.value, widget.u1.value, widget.u2.value], dtype=torch.float64)
    torch.testing.assert_close(scene["normalized"], torch.nn.functional.layer_norm(u, (3,), eps=0.0))
    assert abs(float(scene["normalized"].sum())) < 1e-12
    assert math.isclose(scene["normalized_norm"], math.sqrt(3), rel_tol=1e-12)
    assert "exactly on the circle" in widget.message.value
    assert widget.figure is not None and len(widget.figure.axes) == 1


def test_scale_slider_leaves_the_normalized_point_unchanged():
    widget = LayerNormSphere()
    before = widget.scene["normalized"].clone()
    widget.scale.value = 2.5
    torch.testing.assert_close(widget.scene["normalized"], before)
    widget.scale.value = -1.0
    torch.testing.assert_close(widget.scene["normalized"], -before)
    assert "c < 0" in widget.message.value


@pytest.mark.parametrize(
    "settings, phrase",
    [
        ({"u0": 1.0, "u1": 1.0, "u2": 1.0}, "u is constant"),
        ({"u0": 0.3, "u1": 0.3, "u2": 0.3, "eps": 0.1}, "u is constant"),  # decimals whose mean is not exact
        ({"scale": 0.0}, "u = 0"),
        ({"u0": 0.0, "u1": 0.0, "u2": 0.0, "eps": 0.5}, "u = 0"),
    ],
)
def test_degenerate_inputs_show_a_message_and_beta(settings, phrase):
    widget = LayerNormSphere()
    widget.beta.value = 0.7
    for name, value in settings.items():
        getattr(widget, name).value = value
    assert phrase in widget.message.value
    assert "Traceback" not in widget.message.value
    torch.testing.assert_close(widget.scene["image"], torch.full((3,), 0.7, dtype=torch.float64))
    assert torch.isfinite(widget.scene["normalized"]).all()


def test_eps_shrinks_the_point_by_the_closed_form():
    widget = LayerNormSphere()
    widget.eps.value = 0.5
    s = widget.scene["sigma"]
    assert math.isclose(widget.scene["normalized_norm"], math.sqrt(3) * s / math.sqrt(s**2 + 0.5), rel_tol=1e-12)
    assert "eps = 0.5 > 0" in widget.message.value
    widget.eps.value = 0.0
    assert "0/0" not in widget.message.value


def test_gamma_and_beta_move_the_image_off_the_plane():
    scene = sphere_scene((2.0, 0.0, 1.0), gamma=1.5, beta=0.5)
    torch.testing.assert_close(scene["image"], 1.5 * scene["normalized"] + 0.5)
    assert math.isclose(float(scene["image"].mean()), 0.5, rel_tol=1e-12)


def test_view_sliders_redraw_with_the_new_angles():
    widget = LayerNormSphere()
    widget.elev.value = 40.0
    widget.azim.value = 100.0
    ax = widget.figure.axes[0]
    assert (ax.elev, ax.azim) == (40.0, 100.0)


def test_sphere_scene_refuses_bad_numbers():
    with pytest.raises(ValueError, match="exactly 3"):
        sphere_scene((1.0, 2.0))
    with pytest.raises(ValueError, match="eps must be >= 0"):
        sphere_scene((1.0, 2.0, 3.0), eps=-0.1)
    with pytest.raises(ValueError, match="finite"):
        sphere_scene((1.0, float("nan"), 3.0))


def test_norm_against_sigma_figure_draws_the_geometry_values():
    sigmas = torch.logspace(-3, 0, 10, dtype=torch.float64)
    fig = viz_geometry.norm_against_sigma_figure(8, sigmas, [0.0, 1e-3])
    lines = fig.axes[0].get_lines()
    torch.testing.assert_close(torch.as_tensor(lines[1].get_ydata()), geometry.output_norm_against_sigma(8, sigmas, 1e-3))
