"""The d = 3 sphere widget and the Section 3-4 figures, without a browser: set sliders, check what was computed."""

import json
import math
import re
import shutil
import subprocess
import warnings

import pytest
import torch

pytest.importorskip("anywidget")

from gptlib.analysis import layernorm  # noqa: E402
from gptlib.viz import layernorm as viz_geometry  # noqa: E402
from gptlib.viz.layernorm import LayerNormSphere, sphere_scene  # noqa: E402


def test_the_front_end_is_the_sphere_module_and_the_values_are_synced_traits():
    widget = LayerNormSphere()
    assert "export function layerNorm" in widget._esm and "function numberControl" in widget._esm  # common.js too
    state = widget.get_state()
    for name in (*viz_geometry.RANGES, "eps", "message", "stale"):
        assert state[name] == getattr(widget, name)


def test_default_scene_lies_on_the_circle_and_matches_torch_layer_norm():
    widget = LayerNormSphere()
    scene = widget.scene
    u = torch.tensor([widget.u0, widget.u1, widget.u2], dtype=torch.float64)
    torch.testing.assert_close(scene["normalized"], torch.nn.functional.layer_norm(u, (3,), eps=0.0))
    assert abs(float(scene["normalized"].sum())) < 1e-12
    assert math.isclose(scene["normalized_norm"], math.sqrt(3), rel_tol=1e-12)
    assert "exactly on the circle" in widget.message


def test_scale_slider_leaves_the_normalized_point_unchanged():
    widget = LayerNormSphere()
    before = widget.scene["normalized"].clone()
    widget.scale = 2.5
    torch.testing.assert_close(widget.scene["normalized"], before)
    widget.scale = -1.0
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
    widget.beta = 0.7
    for name, value in settings.items():
        setattr(widget, name, value)
    assert phrase in widget.message
    assert "Traceback" not in widget.message
    torch.testing.assert_close(widget.scene["image"], torch.full((3,), 0.7, dtype=torch.float64))
    assert torch.isfinite(widget.scene["normalized"]).all()


def test_eps_shrinks_the_point_by_the_closed_form():
    widget = LayerNormSphere()
    widget.eps = 0.3
    s = widget.scene["sigma"]
    assert math.isclose(widget.scene["normalized_norm"], math.sqrt(3) * s / math.sqrt(s**2 + 0.3), rel_tol=1e-12)
    assert "eps = 0.3 > 0" in widget.message
    widget.eps = 0.0
    assert "0/0" not in widget.message


def test_gamma_and_beta_move_the_image_off_the_plane():
    scene = sphere_scene((2.0, 0.0, 1.0), gamma=1.5, beta=0.5)
    torch.testing.assert_close(scene["image"], 1.5 * scene["normalized"] + 0.5)
    assert math.isclose(float(scene["image"].mean()), 0.5, rel_tol=1e-12)


def test_view_presets_look_down_the_axis_and_along_the_plane():
    widget = LayerNormSphere()
    widget.tilt, widget.turn = viz_geometry.VIEWS["down the all-ones axis"]
    right, up = viz_geometry.view_basis(widget.tilt, widget.turn)
    ones = torch.ones(3, dtype=torch.float64)
    assert abs(float(right @ ones)) < 1e-12 and abs(float(up @ ones)) < 1e-12  # the screen is the plane: a round circle
    torch.testing.assert_close(right @ up, torch.tensor(0.0, dtype=torch.float64))
    widget.tilt, widget.turn = viz_geometry.VIEWS["side-on to the plane"]
    right, up = viz_geometry.view_basis(widget.tilt, widget.turn)
    torch.testing.assert_close(up, ones / math.sqrt(3))  # 1 points up, the plane is a horizontal line
    scene = widget.scene  # u off the plane, P(u) in it: their heights on screen are <u,1>/sqrt(3) and 0
    assert abs(float(scene["projection"] @ up)) < 1e-12
    assert math.isclose(float(scene["u"] @ up), float(scene["u"].sum()) / math.sqrt(3), rel_tol=1e-12)


def test_figure_draws_the_scene_in_the_chosen_view():
    widget = LayerNormSphere()
    widget.tilt, widget.turn = 40.0, 100.0
    screen = viz_geometry.view_basis(40.0, 100.0)  # (2, 3)
    ax = viz_geometry.sphere_figure(widget.scene, widget.tilt, widget.turn).axes[0]
    points = [tuple(line.get_xydata()[0]) for line in ax.lines if line.get_marker() == "o"]
    expected = tuple((widget.scene["normalized"] @ screen.T).tolist())
    assert any(math.dist(point, expected) < 1e-12 for point in points)  # the LN(u) dot


@pytest.mark.parametrize("name, label, value", [("u1", "u_2", float("nan")), ("u0", "u_1", True), ("eps", "eps", True),
                                               ("scale", "c", float("inf")), ("gamma", "gamma", "1.5"), ("turn", "turn", None)])
def test_a_value_that_is_no_finite_number_raises_where_it_is_set_and_never_reaches_the_page(name, label, value):
    widget = LayerNormSphere()
    before, sent = widget.get_state(), []
    widget.send_state = lambda key=None: sent.append(key)  # what would travel to the page
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no serialization warning either
        with pytest.raises(ValueError, match=f"^{re.escape(label)} must be a finite number, got {re.escape(repr(value))}$"):
            setattr(widget, name, value)
    assert sent == [] and widget.get_state() == before and not widget.stale


@pytest.mark.parametrize("eps", [0.5, 2.0, 1e-7])
def test_an_eps_that_is_not_a_step_is_refused_with_its_reason_and_the_static_copy_keeps_the_last_input(eps):
    widget = LayerNormSphere()
    widget.u0 = 2.0
    picture, state = widget.static_png(), widget.state()
    widget.eps = eps
    assert widget.scene is None and widget.stale
    steps = "0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3"
    assert widget.message == (f"Cannot draw: eps must be one of the slider's steps ({steps}), got {eps:g} "
                              "(the picture still shows the last valid input).")
    assert widget.static_png() == picture and widget.state() == state  # the last valid input, not the defaults
    assert state["u0"] == 2.0 and state["eps"] == 0.0 and state["stale"] is False
    widget.eps = 0.01
    assert widget.scene is not None and not widget.stale


def test_values_the_scene_cannot_hold_are_refused_in_the_message():
    widget = LayerNormSphere()
    widget.u0, widget.scale = 1e300, 3.0
    widget.u1 = 1e308  # c * u_2 = 3e308: beyond a float64
    assert widget.scene is None and widget.stale and "does not fit in a float64" in widget.message


def test_constructor_refuses_what_a_slider_would_clamp():
    with pytest.raises(ValueError, match=re.escape("u_1 must be a finite number in [-3.0, 3.0], got 1e+200")):
        LayerNormSphere(u=(1e200, 0.0, 0.0))
    with pytest.raises(ValueError, match=re.escape("u_2 must be a finite number in [-3.0, 3.0], got nan")):
        LayerNormSphere(u=(1.0, float("nan"), 0.0))
    with pytest.raises(ValueError, match=re.escape("eps must be one of the slider's steps (0, 0.001, 0.003, 0.01, 0.03, "
                                                   "0.1, 0.3, 1, 3), got 0.5")):
        LayerNormSphere(eps=0.5)
    with pytest.raises(ValueError, match=re.escape("eps must be a finite number, got True")):
        LayerNormSphere(eps=True)
    with pytest.raises(ValueError, match=re.escape("u must have exactly 3 coordinates for the sphere picture, got 2")):
        LayerNormSphere(u=(1, 2))


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
    with pytest.raises(ValueError, match=re.escape("u must be a sequence of 3 numbers, got None")):
        sphere_scene(None)
    with pytest.raises(ValueError, match=re.escape("u_1 must be a finite number, got '1.5'")):
        sphere_scene(("1.5", "0", "0"))  # strings are not read as numbers
    with pytest.raises(ValueError, match=re.escape("u_1 must be a finite number, got True")):
        sphere_scene((True, 0, 0))
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
                               layernorm.output_norm_against_sigma(8, sigmas, 1e-3))
    ideal, flat = lines["sqrt(d) = 2.83"], lines["eps = 0"]
    assert flat.get_zorder() > ideal.get_zorder() and flat.get_linewidth() > lines["eps = 0.001"].get_linewidth()
    # at sigma = 1e-3 and eps = 1e-3, ||LN(u)|| = sqrt(d) sigma / sqrt(sigma^2 + eps) = sqrt(8 * 1e-6 / 1.001e-3)
    assert fig.get_label().endswith(f"at sigma(u) = 1e-03 ||LN(u)|| is 2.8e+00 for eps = 0, {(8e-6 / 1.001e-3) ** 0.5:.1e} "
                                    "for eps = 0.001.")


NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_front_ends_layer_norm_is_gptlibs_on_many_points(tmp_path):
    """js/layernorm.js computes LN(cu) in the page: its scene() must be sphere_scene's, point by point."""
    generator = torch.Generator().manual_seed(0)
    cases = []
    for i in range(600):
        u = (torch.rand(3, generator=generator, dtype=torch.float64) * 6 - 3).tolist()
        if i % 5 == 0:
            u = [round(x, 1) for x in u]  # slider steps, including constant and zero vectors
        if i % 50 == 1:
            u = [0.3, 0.3, 0.3]
        scale = float(torch.rand(1, generator=generator, dtype=torch.float64)) * 6 - 3
        eps = viz_geometry.EPS_STEPS[i % len(viz_geometry.EPS_STEPS)]
        cases.append({"u0": u[0], "u1": u[1], "u2": u[2], "scale": scale, "eps": eps, "gamma": 1.5, "beta": -0.5})
    source = tmp_path / "sphere.mjs"
    source.write_text(LayerNormSphere._esm)
    runner = tmp_path / "run.mjs"
    runner.write_text(f"import {{scene}} from {json.dumps(source.as_uri())};\n"
                      f"console.log(JSON.stringify({json.dumps(cases)}.map(scene)));\n")
    done = subprocess.run([NODE, str(runner)], capture_output=True, text=True, timeout=60, check=True)
    for case, drawn in zip(cases, json.loads(done.stdout), strict=True):
        expected = sphere_scene((case["u0"], case["u1"], case["u2"]), case["scale"], case["eps"], 1.5, -0.5)
        assert drawn["degenerate"] == expected["degenerate"], case
        for key in ("u", "projection", "normalized", "image"):
            torch.testing.assert_close(torch.tensor(drawn[key], dtype=torch.float64), expected[key],
                                       atol=1e-12, rtol=1e-12, msg=f"{key} for {case}")


def test_the_gained_circle_figure_draws_the_ellipse_and_the_outputs_on_it():
    gamma = torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    beta = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    u = torch.randn(40, 3, dtype=torch.float64)
    fig = viz_geometry.gained_circle_figure(gamma, beta, u)
    a, b = layernorm.gained_sphere(gamma, beta).semi_axes.tolist()
    assert f"semi-axes {a:.2f} and {b:.2f}" in fig.get_label() and "40 LayerNorm outputs" in fig.get_label()
    flat = fig.axes[1]
    ellipse = next(line for line in flat.lines if line.get_label().startswith("ellipse"))
    x, y = (torch.as_tensor(v, dtype=torch.float64) for v in ellipse.get_data())
    assert float(((x / a) ** 2 + (y / b) ** 2 - 1).abs().max()) < 1e-9  # drawn with the computed semi-axes
    dots = [line for line in flat.lines if line.get_marker() == "o"]
    assert len(dots) == 1 and len(dots[0].get_xdata()) == 40
    x, y = (torch.as_tensor(v, dtype=torch.float64) for v in dots[0].get_data())
    assert float(((x / a) ** 2 + (y / b) ** 2 - 1).abs().max()) < 1e-9  # every output on the ellipse


FORMATTED = [0.0, -0.0, 0.5, 2.0, 3.0, 1e-7, 1e-4, 1.5e-5, 0.001, 123456.0, 1234567.0, 1e6, 999999.4, 0.1 + 0.2, -2.5,
             1e300, 5e-324, 7.0 / 3.0, 100.0, 12345.678]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_page_refuses_an_eps_in_the_kernels_words(tmp_path):
    """js/layernorm.js's epsRefusal and common.js's formatG against eps_refusal and Python's format(x, "g")."""
    source = tmp_path / "sphere.mjs"
    source.write_text(LayerNormSphere._esm + "\nexport { formatG };\n")
    runner = tmp_path / "run.mjs"
    values = [*FORMATTED, *viz_geometry.EPS_STEPS]
    runner.write_text(f"import {{epsRefusal, formatG}} from {json.dumps(source.as_uri())};\n"
                      f"const values = {json.dumps(values)};\n"
                      "console.log(JSON.stringify({formatted: values.map(formatG), refused: values.map(epsRefusal)}));\n")
    done = json.loads(subprocess.run([NODE, str(runner)], capture_output=True, text=True, timeout=60, check=True).stdout)
    for value, formatted in zip(values, done["formatted"], strict=True):
        assert formatted == format(value, "g"), value
    assert done["refused"] == [viz_geometry.eps_refusal(value) for value in values]


@pytest.mark.parametrize("tilt, turn, words", [(math.nan, 0.0, "tilt must be a finite number, got nan"),
                                               (0.0, math.inf, "turn must be a finite number, got inf"),
                                               ("30", 0.0, "tilt must be a finite number, got '30'")])
def test_a_view_that_is_not_two_finite_angles_is_refused(tilt, turn, words):
    """A NaN tilt gave a screen basis of NaN, and a blank picture, silently."""
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        viz_geometry.view_basis(tilt, turn)
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        viz_geometry.sphere_figure(sphere_scene([1.0, 2.0, 4.0]), tilt, turn)


def test_sphere_scene_reads_a_tensor_u_as_its_numbers():
    """Each coordinate of a tensor u was a 0-d tensor, refused as 'u_1 must be a finite number, got tensor(1.)'."""
    scene, same = sphere_scene(torch.tensor([1.0, 2.0, 4.0])), sphere_scene((1.0, 2.0, 4.0))
    assert torch.equal(scene["image"], same["image"]) and scene["message"] == same["message"]
    with pytest.raises(ValueError, match=re.escape("u_2 must be a finite number, got nan")):
        sphere_scene(torch.tensor([1.0, float("nan"), 3.0]))
    with pytest.raises(ValueError, match=re.escape("u_1 must be a finite number, got True")):
        sphere_scene(torch.tensor([True, False, False]))
