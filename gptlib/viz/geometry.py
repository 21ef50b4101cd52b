"""Figures and the interactive sphere for Section 4 (LayerNorm geometry, Proposition 4.2, Remark 4.3).

    sphere_scene(u, c, eps, gamma, beta)   every point the d = 3 picture draws, plus a message
    sphere_figure(scene, elev, azim)       that picture as a 3-D matplotlib Figure
    LayerNormSphere()                      the widget: sliders -> scene -> figure + message
    norm_against_sigma_figure(...)         Remark 4.3: ||LN(u)|| against sigma(u) for several eps
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from .. import geometry
from .display import show_figure

D = 3
ONES = torch.ones(D, dtype=torch.float64)
# An orthonormal basis of the plane 1-perp in R^3, for drawing the plane and the circle.
PLANE_BASIS = torch.tensor([[1.0, -1.0, 0.0], [1.0, 1.0, -2.0]], dtype=torch.float64)
PLANE_BASIS = PLANE_BASIS / torch.linalg.vector_norm(PLANE_BASIS, dim=1, keepdim=True)  # (2, 3)
CONSTANT_TOLERANCE = 1e-12  # sigma(u) below this times max|u| counts as zero (slider values are decimals)


def sphere_scene(u, c: float = 1.0, eps: float = 0.0, gamma: float = 1.0, beta: float = 0.0) -> dict:
    """The points of the d = 3 picture for the vector c*u, and a plain-language message.

    gamma and beta are shared scalars: the learned gain and shift are gamma*1 and beta*1, so the
    affine image gamma * LN(u) + beta * 1 stays on a circle of radius |gamma| sqrt(3), moved by
    beta along the all-ones direction (off the plane when beta != 0).
    Returns tensors (3,): u (= c * input), projection (P u), normalized (LN with gamma = 1,
    beta = 0), image (gamma * normalized + beta); floats sigma, normalized_norm, gamma, beta;
    degenerate (zero variance) and message (str). Invalid numbers raise ValueError.
    """
    values = [float(x) for x in u]
    if len(values) != D:
        raise ValueError(f"u must have exactly {D} coordinates for the sphere picture, got {len(values)}")
    for name, value in {"u": sum(values), "c": c, "eps": eps, "gamma": gamma, "beta": beta}.items():
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0 (Definition 4.1), got {eps!r}")
    scaled = c * torch.tensor(values, dtype=torch.float64)  # (3,)
    projection = geometry.center(scaled)  # (3,), in 1-perp
    spread = float(geometry.sigma(scaled))
    degenerate = spread <= CONSTANT_TOLERANCE * float(scaled.abs().max())
    if degenerate:  # a constant u: its centered part is rounding noise, not a direction
        projection = torch.zeros(D, dtype=torch.float64)
        spread = 0.0
    normalized = geometry.radial_rescale(projection, eps)  # LN(u) with gamma = 1, beta = 0
    image = gamma * normalized + beta * ONES
    normalized_norm = float(torch.linalg.vector_norm(normalized))
    return {
        "u": scaled,
        "projection": projection,
        "normalized": normalized,
        "image": image,
        "sigma": spread,
        "normalized_norm": normalized_norm,
        "degenerate": degenerate,
        "gamma": float(gamma),
        "beta": float(beta),
        "message": _message(scaled, c, eps, spread, normalized_norm, degenerate, gamma, beta),
    }


def _message(scaled, c, eps, spread, normalized_norm, degenerate, gamma, beta) -> str:
    root_d = math.sqrt(D)
    affine = f"so LN(u) = beta*1 = ({beta:g}, {beta:g}, {beta:g})"
    if not bool(scaled.any()):
        lines = [f"u = 0{' (c = 0)' if c == 0 else ''}: there is no direction to normalize; the centred vector is 0, {affine}."]
    elif degenerate:
        lines = [f"u is constant (a multiple of 1): projecting onto the plane gives 0 and sigma(u) = 0, {affine}."]
    else:
        lines = [f"sigma(cu) = {spread:.4g}; ||LN(cu)|| = {normalized_norm:.4f} (the circle has radius sqrt(3) = {root_d:.4f})."]
    if eps == 0 and (degenerate or not bool(scaled.any())):
        lines.append("eps = 0 makes the formula 0/0 here; gptlib maps a zero-variance vector to 0 instead of NaN.")
    elif eps == 0:
        lines.append("eps = 0: the idealized Proposition 4.2, so LN(cu) lies exactly on the circle.")
    elif not degenerate:
        shrink = normalized_norm / root_d
        lines.append(f"eps = {eps:g} > 0: the point sits at {shrink:.3f} of the radius, sigma/sqrt(sigma^2 + eps).")
        if shrink < 0.9:
            lines.append("sigma^2 is comparable to eps: scale invariance (Remark 4.3) visibly fails.")
    if c < 0 and not degenerate and bool(scaled.any()):
        lines.append("c < 0 reflects u through 0, so LN(cu) = -LN(u): invariance holds only for c > 0.")
    if gamma != 1 or beta != 0:
        lines.append(f"gamma = {gamma:g}, beta = {beta:g}: the image gamma*LN + beta*1 lies on the dashed circle.")
    return " ".join(lines)


def sphere_figure(scene: dict, elev: float = 15.0, azim: float = -15.0) -> Figure:
    """A 3-D Figure of the plane 1-perp, the circle of radius sqrt(3), the all-ones axis, and the scene's vectors."""
    vectors = torch.stack([scene["u"], scene["projection"], scene["normalized"], scene["image"]])  # (4, 3)
    extent = max(2.5, 1.15 * float(vectors.abs().max()))
    fig = Figure(figsize=(6.0, 6.0))
    ax = fig.add_subplot(projection="3d")
    grid = torch.linspace(-extent, extent, 2, dtype=torch.float64)
    s, t = torch.meshgrid(grid, grid, indexing="ij")
    plane = s[..., None] * PLANE_BASIS[0] + t[..., None] * PLANE_BASIS[1]  # (2, 2, 3)
    ax.plot_surface(plane[..., 0].numpy(), plane[..., 1].numpy(), plane[..., 2].numpy(), alpha=0.12, color="tab:blue")
    angles = torch.linspace(0, 2 * math.pi, 200, dtype=torch.float64)
    circle = math.sqrt(D) * (torch.cos(angles)[:, None] * PLANE_BASIS[0] + torch.sin(angles)[:, None] * PLANE_BASIS[1])
    ax.plot(*circle.T.numpy(), color="tab:blue", lw=1.5, label="circle: 1-perp, radius sqrt(3)")
    axis = torch.tensor([-extent, extent], dtype=torch.float64)[:, None] * ONES / math.sqrt(D)
    ax.plot(*axis.T.numpy(), color="gray", ls="--", lw=0.8, label="all-ones direction")
    origin = [0.0, 0.0, 0.0]
    ax.quiver(*origin, *scene["u"].tolist(), color="black", arrow_length_ratio=0.08, label="c u")
    ax.quiver(*origin, *scene["projection"].tolist(), color="tab:orange", arrow_length_ratio=0.08, lw=2.5, label="projection P(cu)")
    ax.plot(*torch.stack([scene["u"], scene["projection"]]).T.numpy(), color="tab:orange", ls=":", lw=1)
    ax.scatter(*scene["normalized"].tolist(), color="tab:green", s=40, depthshade=False, label="LN(cu), gamma=1, beta=0")
    ax.plot(*torch.stack([scene["projection"], scene["normalized"]]).T.numpy(), color="tab:green", ls="--", lw=1)
    gamma, beta = scene["gamma"], scene["beta"]
    if gamma != 1 or beta != 0:
        ax.plot(*(gamma * circle + beta * ONES).T.numpy(), color="tab:purple", ls="--", lw=1)
        ax.scatter(*scene["image"].tolist(), color="tab:purple", s=40, depthshade=False, label="gamma*LN + beta*1")
    ax.set_xlim(-extent, extent)
    ax.set_ylim(-extent, extent)
    ax.set_zlim(-extent, extent)
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("coordinate 1")
    ax.set_ylabel("coordinate 2")
    ax.set_zlabel("coordinate 3")
    ax.view_init(elev=elev, azim=azim)
    ax.legend(loc="upper left", fontsize=7)
    return fig


class LayerNormSphere(widgets.VBox):
    """Proposition 4.2 in R^3: move u, scale it by c, change eps, gamma, beta and the view.

    Controls are attributes (set .value in tests): u0, u1, u2 (coordinates of u), scale (c),
    eps, gamma and beta (shared scalars: gain gamma*1 and shift beta*1), elev and azim (view
    angles in degrees). After each change: .scene (sphere_scene's dict), .figure (the Figure
    drawn into .output) and .message (an HTML line; never a traceback: constant u, u = 0 and
    eps = 0 are explained there).

    CSS classes: gptlib-sphere-u0, gptlib-sphere-u1, gptlib-sphere-u2, gptlib-sphere-scale,
    gptlib-sphere-eps, gptlib-sphere-gamma, gptlib-sphere-beta, gptlib-sphere-elev,
    gptlib-sphere-azim, gptlib-sphere-message, gptlib-sphere-output; the whole widget has
    gptlib-sphere.
    """

    def __init__(self, u=(2.4, 1.6, 0.2), c: float = 1.0, eps: float = 0.0, gamma: float = 1.0, beta: float = 0.0):
        def slider(css, description, value, low, high, step):
            control = widgets.FloatSlider(
                value=value, min=low, max=high, step=step, description=description, continuous_update=False,
                readout_format=".2f", style={"description_width": "5em"},
            )
            control.add_class(f"gptlib-sphere-{css}")
            return control

        self.u0 = slider("u0", "u_1", u[0], -3.0, 3.0, 0.1)
        self.u1 = slider("u1", "u_2", u[1], -3.0, 3.0, 0.1)
        self.u2 = slider("u2", "u_3", u[2], -3.0, 3.0, 0.1)
        self.scale = slider("scale", "scale c", c, -3.0, 3.0, 0.05)
        self.eps = slider("eps", "epsilon", eps, 0.0, 2.0, 0.01)
        self.gamma = slider("gamma", "gamma", gamma, -2.0, 2.0, 0.1)
        self.beta = slider("beta", "beta", beta, -2.0, 2.0, 0.1)
        self.elev = slider("elev", "elevation", 15.0, -90.0, 90.0, 5.0)
        self.azim = slider("azim", "azimuth", -15.0, -180.0, 180.0, 5.0)
        self.message = widgets.HTML()
        self.message.add_class("gptlib-sphere-message")
        self.output = widgets.Output()
        self.output.add_class("gptlib-sphere-output")
        controls = (self.u0, self.u1, self.u2, self.scale, self.eps, self.gamma, self.beta, self.elev, self.azim)
        columns = widgets.HBox([widgets.VBox(controls[:4]), widgets.VBox(controls[4:7]), widgets.VBox(controls[7:])])
        super().__init__([columns, self.message, self.output])
        self.add_class("gptlib-sphere")
        self.scene: dict | None = None
        self.figure: Figure | None = None
        for control in controls:
            control.observe(self.update, names="value")
        self.update()

    def update(self, _change=None) -> None:
        """Recompute the scene from the sliders, redraw, and say what is special about it."""
        try:
            self.scene = sphere_scene(
                (self.u0.value, self.u1.value, self.u2.value), self.scale.value, self.eps.value,
                self.gamma.value, self.beta.value,
            )
        except ValueError as error:  # unreachable from the sliders' ranges, kept for programmatic values
            self.message.value = f"<b>cannot draw:</b> {error}"
            return
        self.message.value = self.scene["message"]
        self.figure = sphere_figure(self.scene, self.elev.value, self.azim.value)
        self.output.clear_output(wait=True)
        with self.output:
            show_figure(self.figure)


def norm_against_sigma_figure(d: int, sigmas: torch.Tensor, eps_values) -> Figure:
    """Remark 4.3: ||LN(u)|| against sigma(u) (log axis) for each eps, with the ideal sqrt(d) line."""
    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.add_subplot()
    for eps in eps_values:
        ax.semilogx(sigmas, geometry.output_norm_against_sigma(d, sigmas, eps), label=f"eps = {eps:g}")
    ax.axhline(math.sqrt(d), color="black", ls=":", lw=1, label=f"sqrt(d) = {math.sqrt(d):.2f}")
    ax.set_xlabel("sigma(u)")
    ax.set_ylabel("||LN(u)||  (gamma = 1, beta = 0)")
    ax.set_title(f"epsilon breaks scale invariance near zero variance (d = {d})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
