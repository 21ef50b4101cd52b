"""Figures and the interactive sphere for Section 4 (LayerNorm geometry, Proposition 4.2, Remark 4.3).

    sphere_scene(u, c, eps, gamma, beta)   every point the d = 3 picture draws, plus a message
    sphere_figure(scene, tilt, turn)       that picture, seen from a view about the all-ones axis, in 2-D
    LayerNormSphere()                      the explorer: drawn in the page (js/layernorm.js), scene + message in the kernel
    norm_against_sigma_figure(...)         Remark 4.3: ||LN(u)|| against sigma(u) for several eps
    gained_circle_figure(gamma, beta, u)   Remark 4.3: a coordinatewise gamma turns the d = 3 circle into an ellipse
"""

from __future__ import annotations

import math

import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import validation
from ..analysis import layernorm
from ..printing import coarse
from .display import render_png
from .explorer import Explorer, Real, module

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

    geometry's functions compute on a rescaled copy of c*u, so u = (1e200, 0, 0) or (1e308, 1e308, 0)
    normalize exactly instead of overflowing sigma^2 to infinity.
    """
    values = [validation.real(f"u_{i}", value) for i, value in enumerate(_three_numbers(u), start=1)]
    c = validation.real("c", c)
    eps = validation.real("eps", eps, at_least=0)  # Definition 4.1 asks eps >= 0
    gamma, beta = validation.real("gamma", gamma), validation.real("beta", beta)
    scaled = c * torch.tensor(values, dtype=torch.float64)  # (3,)
    projection = layernorm.center(scaled)  # (3,), in 1-perp
    if not bool(torch.isfinite(torch.cat([scaled, projection])).all()):
        raise ValueError(f"c * u or its projection P(cu) does not fit in a float64 "
                         f"(|c| max|u_i| = {abs(c):g} * {max(map(abs, values)):g})")
    spread = float(layernorm.sigma(scaled))
    degenerate = spread <= CONSTANT_TOLERANCE * float(scaled.abs().max())  # a constant u: rounding noise, not a direction
    if degenerate:
        projection = torch.zeros(D, dtype=torch.float64)
        spread = 0.0
    normalized = torch.zeros(D, dtype=torch.float64) if degenerate else layernorm.layer_norm(scaled, eps=eps)  # gamma=1, beta=0
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
        "gamma": gamma,
        "beta": beta,
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


# The view: "tilt" is the angle between the line of sight and the plane 1-perp (0: side-on, the
# plane is an edge and 1 points up; 90: straight down the all-ones axis, the circle is round),
# "turn" rotates the viewer about the all-ones axis. Orthographic, so lengths in the plane are true.
VIEWS = {"oblique": (20.0, 30.0), "down the all-ones axis": (90.0, 30.0), "side-on to the plane": (0.0, 30.0)}
COLOURS = {"u": "black", "projection": "tab:orange", "normalized": "tab:green", "image": "tab:purple",
           "circle": "tab:blue", "axis": "gray"}


def view_basis(tilt: float, turn: float) -> torch.Tensor:
    """The screen's right and up directions in R^3 for a view (degrees, finite numbers): (2, 3), orthonormal."""
    tilt, turn = math.radians(validation.real("tilt", tilt)), math.radians(validation.real("turn", turn))
    across = math.cos(turn) * PLANE_BASIS[0] + math.sin(turn) * PLANE_BASIS[1]  # in 1-perp, towards the viewer
    right = -math.sin(turn) * PLANE_BASIS[0] + math.cos(turn) * PLANE_BASIS[1]
    up = -math.sin(tilt) * across + math.cos(tilt) * ONES / math.sqrt(D)
    return torch.stack([right, up])


def sphere_figure(scene: dict, tilt: float = VIEWS["oblique"][0], turn: float = VIEWS["oblique"][1]) -> Figure:
    """The plane 1-perp, the circle of radius sqrt(3), the all-ones axis and the scene's vectors,
    projected orthographically onto the screen of a viewer at (tilt, turn), drawn in 2-D."""
    screen = view_basis(tilt, turn)  # (2, 3)

    def flat(points: torch.Tensor):  # (..., 3) -> the screen's x and y arrays
        xy = points @ screen.T  # (..., 2)
        return xy[..., 0].numpy(), xy[..., 1].numpy()

    vectors = torch.stack([scene["u"], scene["projection"], scene["normalized"], scene["image"]])  # (4, 3)
    extent = max(2.5, 1.15 * float(torch.linalg.vector_norm(vectors, dim=1).max()))
    fig = Figure(figsize=(5.6, 5.9), dpi=100)
    ax = fig.add_axes((0.02, 0.22, 0.96, 0.74))
    ax.set_xlim(-extent, extent)
    ax.set_ylim(-extent, extent)
    ax.set_aspect("equal")
    ax.set_axis_off()
    angles = torch.linspace(0, 2 * math.pi, 200, dtype=torch.float64)
    ring = torch.cos(angles)[:, None] * PLANE_BASIS[0] + torch.sin(angles)[:, None] * PLANE_BASIS[1]  # (200, 3)
    ax.fill(*flat(0.95 * extent * ring), color=COLOURS["circle"], alpha=0.08, lw=0)  # a disc of the plane 1-perp
    circle = math.sqrt(D) * ring
    ax.plot(*flat(circle), color=COLOURS["circle"], lw=1.8)
    ax.plot(*flat(torch.stack([-ONES, ONES]) * extent / math.sqrt(D)), color=COLOURS["axis"], ls="--", lw=1)
    for i in range(D):  # short coordinate axes e_1, e_2, e_3 for orientation
        tip = torch.zeros(D, dtype=torch.float64)
        tip[i] = 0.6 * extent
        _arrow(ax, flat(tip), COLOURS["axis"], width=0.8)
        ax.annotate(rf"$e_{i + 1}$", flat(1.1 * tip), color=COLOURS["axis"], fontsize=11, ha="center", va="center")
    ax.plot(*flat(torch.stack([scene["u"], scene["projection"]])), color=COLOURS["projection"], ls=":", lw=1.5)
    ax.plot(*flat(torch.stack([scene["projection"], scene["normalized"]])), color=COLOURS["normalized"], ls="--", lw=1)
    _arrow(ax, flat(scene["u"]), COLOURS["u"], width=2.0)
    _arrow(ax, flat(scene["projection"]), COLOURS["projection"], width=2.5)
    ax.plot(*flat(scene["normalized"]), "o", color=COLOURS["normalized"], ms=9)
    gamma, beta = scene["gamma"], scene["beta"]
    if gamma != 1 or beta != 0:
        ax.plot(*flat(gamma * circle + beta * ONES), color=COLOURS["image"], ls="--", lw=1.2)
        ax.plot(*flat(scene["image"]), "o", color=COLOURS["image"], ms=9)
    ax.plot(0, 0, "o", color="black", ms=5)
    ax.annotate("0", (0, 0), xytext=(-10, -12), textcoords="offset points", fontsize=11)
    handles = [
        Line2D([], [], color=COLOURS["u"], lw=2, label=r"$cu$"),
        Line2D([], [], color=COLOURS["projection"], lw=2.5, label=r"$P(cu)$: projection onto $\mathbf{1}^\perp$"),
        Line2D([], [], color=COLOURS["normalized"], marker="o", ls="--", label=r"$\mathrm{LN}(cu)$, $\gamma = 1$, $\beta = 0$"),
        Line2D([], [], color=COLOURS["circle"], lw=1.8, label=r"circle in $\mathbf{1}^\perp$, radius $\sqrt{3}$"),
        Line2D([], [], color=COLOURS["axis"], ls="--", label=r"all-ones direction $\mathbf{1}$"),
    ]
    if gamma != 1 or beta != 0:
        handles.append(Line2D([], [], color=COLOURS["image"], marker="o", ls="--",
                              label=r"$\gamma\,\mathrm{LN}(cu) + \beta\mathbf{1}$"))
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=9, frameon=False)
    fig.text(0.5, 0.985, f"view: tilt {tilt:.0f} deg above the plane, turned {turn:.0f} deg about 1", ha="center",
             va="top", fontsize=9, color="dimgray")
    shrink = scene["normalized_norm"] / math.sqrt(D)  # printed too: a small eps moves the point by less than a pixel
    fig.text(0.5, 0.22, rf"$\|\mathrm{{LN}}(cu)\| = {scene['normalized_norm']:.4f} = {shrink:.4f}\,\sqrt{{3}}$", ha="center",
             va="bottom", fontsize=10, color=COLOURS["normalized"])
    return fig


def _arrow(ax, tip, colour, width) -> None:
    """An arrow from the origin to the screen point `tip`, with a head that stays visible."""
    ax.annotate("", xy=(float(tip[0]), float(tip[1])), xytext=(0.0, 0.0),
                arrowprops={"arrowstyle": "-|>", "color": colour, "lw": width, "mutation_scale": 16 + 2 * width,
                            "shrinkA": 0, "shrinkB": 0})


EPS_STEPS = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)  # roughly x3 per step: each one visibly moves LN(u)


def eps_refusal(eps: float) -> str | None:
    """Why the sphere cannot draw `eps`, or None if it is one of the slider's steps (js/layernorm.js's
    epsRefusal says the same words: numbers as Python's format "g" writes them, which common.js's
    formatG copies but for an exact tie at the sixth digit, 100000.5, which it rounds up)."""
    if eps in EPS_STEPS:
        return None
    return f"eps must be one of the slider's steps ({', '.join(f'{step:g}' for step in EPS_STEPS)}), got {eps:g}"


# The sliders of the front end (js/layernorm.js has the same ranges): name -> (label, low, high)
RANGES = {"u0": ("u_1", -3.0, 3.0), "u1": ("u_2", -3.0, 3.0), "u2": ("u_3", -3.0, 3.0), "scale": ("c", -3.0, 3.0),
          "gamma": ("gamma", -2.0, 2.0), "beta": ("beta", -2.0, 2.0), "tilt": ("tilt", -90.0, 90.0),
          "turn": ("turn", -180.0, 180.0)}


class LayerNormSphere(Explorer):
    """Proposition 4.2 in R^3: move u, scale it by c, change eps, gamma, beta and the view.

    Drawn in the page by js/layernorm.js, which computes LN(cu) itself (Definition 4.1) on every
    move, shows the coordinates of cu, P(cu) and LN(cu) under the picture and on hover, and
    sends the values to the kernel. The values are traits (set them from code, e.g.
    `sphere.u0 = 0.5`): u0, u1, u2 (coordinates of u), scale (c), eps (one of EPS_STEPS),
    gamma and beta (shared scalars: gain gamma*1 and shift beta*1), tilt and turn (the view,
    see view_basis). The constructor refuses values outside the sliders' ranges (RANGES). A
    value set later that is no finite number (NaN, 1e309, True) raises ValueError where it is
    set and never reaches the page; an eps that is not a step (refused by the page in the same
    words: eps_refusal) and values sphere_scene cannot draw are refused in .message.
    After each change: .scene (sphere_scene's dict, None while the input cannot be drawn) and
    .message; static_png() draws the current scene with matplotlib (sphere_figure).
    The default u = (1.2, 0.8, 0.4) has a small spread (sigma = 0.33), so eps = 0.003 already
    pulls LN(u) visibly inside the circle, and its mean 0.8 lifts it visibly off the plane.

    CSS classes in the page: gptlib-sphere (the whole), gptlib-sphere-u0 ... gptlib-sphere-turn
    and gptlib-sphere-eps (a slider and its text box each), gptlib-sphere-view (presets),
    gptlib-sphere-output (the canvas), gptlib-sphere-readout, gptlib-sphere-message.
    """

    _esm = module("layernorm")
    what = "LayerNorm of a vector u in R^3 drawn on its circle"
    u0, u1, u2 = Real(1.2, "u_1"), Real(0.8, "u_2"), Real(0.4, "u_3")
    scale = Real(1.0, "c")
    eps = Real(0.0, "eps")
    gamma = Real(1.0, "gamma")
    beta = Real(0.0, "beta")
    tilt = Real(VIEWS["oblique"][0], "tilt")
    turn = Real(VIEWS["oblique"][1], "turn")

    def __init__(self, u=(1.2, 0.8, 0.4), c: float = 1.0, eps: float = 0.0, gamma: float = 1.0, beta: float = 0.0):
        u = _three_numbers(u)
        values = dict(zip(("u0", "u1", "u2"), u)) | {"scale": c, "gamma": gamma, "beta": beta}
        for name, value in values.items():
            label, low, high = RANGES[name]
            values[name] = validation.real(label, value, at_least=low, at_most=high)
        eps = validation.real("eps", eps)
        if eps_refusal(eps):
            raise ValueError(eps_refusal(eps))
        self.scene: dict | None = None
        super().__init__(**values, eps=eps)
        self.observe(self.update, names=[*RANGES, "eps"])
        self.update()

    def update(self, _change=None) -> None:
        """Recompute the scene from the values and say what is special about it."""
        try:
            if eps_refusal(self.eps):  # set from code: the slider has only its steps
                raise ValueError(eps_refusal(self.eps))
            self.scene = sphere_scene((self.u0, self.u1, self.u2), self.scale, self.eps, self.gamma, self.beta)
        except ValueError as error:  # values set from code that the sliders cannot reach (1e300 * 3)
            self.scene = None
            self.refuse(str(error))
            return
        self.last_scene, self.last_view = self.scene, (self.tilt, self.turn)  # what the static copy shows
        self.show(self.scene["message"])

    def static_png(self) -> bytes:
        return render_png(sphere_figure(self.last_scene, *self.last_view))

    def alt_text(self) -> str:
        scene = self.last_scene
        point = ", ".join(f"{x:.2f}" for x in scene["normalized"].tolist())
        vector = ", ".join(f"{x:.2f}" for x in scene["u"].tolist())
        return (f"LayerNorm sphere for d = 3: the vector cu = ({vector}), its projection onto the plane "
                f"orthogonal to the all-ones direction, and LN(cu) = ({point}) on the circle of radius sqrt(3) "
                f"in that plane (length {scene['normalized_norm']:.3f}).")


def _three_numbers(u) -> tuple:
    """u as a tuple of exactly three coordinates, or a ValueError naming u; a tensor's as Python numbers."""
    try:
        values = tuple(u.tolist() if isinstance(u, torch.Tensor) and u.dim() == 1 else u)
    except TypeError:
        raise ValueError(f"u must be a sequence of {D} numbers, got {u!r}") from None
    if len(values) != D:
        raise ValueError(f"u must have exactly {D} coordinates for the sphere picture, got {len(values)}")
    return values


def norm_against_sigma_figure(d: int, sigmas: torch.Tensor, eps_values) -> Figure:
    """Remark 4.3: ||LN(u)|| against sigma(u) (log axis) for each eps, with the ideal sqrt(d) line."""
    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.add_subplot()
    ax.axhline(math.sqrt(d), color="gray", lw=0.8, zorder=1, label=f"sqrt(d) = {math.sqrt(d):.2f}")
    for i, eps in enumerate(eps_values):  # widest first: the eps = 0 curve lies on sqrt(d) and stays visible
        width = 1.5 + 1.5 * (len(eps_values) - 1 - i)
        ax.semilogx(sigmas, layernorm.output_norm_against_sigma(d, sigmas, eps), lw=width, alpha=0.85,
                    label=f"eps = {eps:g}", zorder=2 + i)
    ax.set_xlabel("sigma(u)")
    ax.set_ylabel("||LN(u)||  (gamma = 1, beta = 0)")
    ax.set_title(f"epsilon breaks scale invariance near zero variance (d = {d})")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    smallest = sigmas.min()
    at_smallest = ", ".join(f"{coarse(layernorm.output_norm_against_sigma(d, smallest.reshape(1), eps))} for eps = {eps:g}"
                            for eps in eps_values)
    fig.set_label(f"||LN(u)|| against sigma(u) from {smallest.item():.0e} to {sigmas.max().item():.0e} (log axis), d = {d}, "
                  f"one curve per eps, the line sqrt(d) = {math.sqrt(d):.2f}; at sigma(u) = {smallest.item():.0e} "
                  f"||LN(u)|| is {at_smallest}.")
    return fig


def gained_circle_figure(gamma: torch.Tensor, beta: torch.Tensor, u: torch.Tensor) -> Figure:
    """Remark 4.3 for d = 3: the circle of Proposition 4.2 and its image under y = gamma * v + beta, an
    ellipse (layernorm.gained_sphere), with the LayerNorm outputs gamma * LN(u) + beta of the rows of u (n, 3).
    Left: both seen straight down the all-ones axis; right: each in its own plane, along its own axes."""
    image = layernorm.gained_sphere(gamma, beta)
    circle = layernorm.gained_sphere(torch.ones(D, dtype=torch.float64))
    outputs = layernorm.layer_norm(u, gamma, beta)  # (n, 3), eps = 0
    angles = torch.linspace(0, 2 * math.pi, 200, dtype=torch.float64)
    unit = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)  # (200, 2)

    def curve(shape):  # (200, 3): the points of an image, in R^3
        return shape.beta + (unit * shape.semi_axes) @ shape.axes

    fig = Figure(figsize=(10, 4.6))
    down, flat = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    screen = view_basis(*VIEWS["down the all-ones axis"])  # (2, 3): the circle is round, the ellipse stays one
    for points, style in ((curve(circle), dict(color=COLOURS["circle"], lw=1.8, label="gamma = 1, beta = 0: circle in 1-perp")),
                          (curve(image), dict(color=COLOURS["image"], lw=1.8, ls="--", label="gamma * v + beta: ellipse"))):
        down.plot(*(points @ screen.T).T.numpy(), **style)
    down.plot(*(outputs @ screen.T).T.numpy(), "o", color=COLOURS["image"], ms=3, label="gamma * LN(u) + beta")
    down.set_title("seen down the all-ones axis", fontsize=10)
    for shape, colour, name in ((circle, COLOURS["circle"], "circle"), (image, COLOURS["image"], "ellipse")):
        a, b = shape.semi_axes.tolist()
        flat.plot(a * unit[:, 0].numpy(), b * unit[:, 1].numpy(), color=colour, lw=1.8,
                  ls="-" if name == "circle" else "--", label=f"{name}: semi-axes {a:.2f}, {b:.2f}")
    along = (outputs - image.beta) @ image.axes.T  # (n, 2): the outputs in the ellipse's own axes
    flat.plot(*along.T.numpy(), "o", color=COLOURS["image"], ms=3)
    flat.set_title("each in its own plane, along its own axes", fontsize=10)
    down.set_xlabel("coordinate along a unit vector u_1 of 1-perp", fontsize=9)
    down.set_ylabel("along u_2, orthogonal to u_1 in 1-perp", fontsize=9)
    flat.set_xlabel("coordinate along the curve's longer semi-axis", fontsize=9)
    flat.set_ylabel("along its shorter semi-axis", fontsize=9)
    for ax in (down, flat):
        ax.set_aspect("equal")
        ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, -0.42))
    fig.tight_layout()
    g, c = ", ".join(f"{x:g}" for x in gamma.tolist()), ", ".join(f"{x:g}" for x in beta.tolist())
    a, b = image.semi_axes.tolist()
    fig.set_label(f"Remark 4.3 for d = 3: the circle of radius sqrt(3) = {math.sqrt(D):.2f} in the plane orthogonal to the "
                  f"all-ones direction, and its image under gamma = ({g}), beta = ({c}): an ellipse centred at beta with "
                  f"semi-axes {a:.2f} and {b:.2f}, with {len(outputs)} LayerNorm outputs gamma * LN(u) + beta on it; "
                  "left seen down the all-ones axis, right each curve in its own plane.")
    return fig
