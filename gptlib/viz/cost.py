"""Figures for Section 6: FLOPs and time per token against T, and where the 6N rule breaks."""

from __future__ import annotations

from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from ..analysis.cost import TokenTimes


def cost_vs_T_figure(T_values, rows_per_token: dict[str, list[float]], times: TokenTimes, crossover: int) -> Figure:
    """Left: forward FLOPs per token of each Section 6 component against T. Right: measured time per token, the
    median over rounds with a band from the fastest to the slowest round (`cost.seconds_per_token`)."""
    fig = Figure(figsize=(10, 3.6))
    flops_ax, time_ax = fig.subplots(1, 2)
    for component, values in rows_per_token.items():
        flops_ax.plot(T_values, values, "o-", ms=3, label=component)
    flops_ax.axvline(crossover, color="grey", ls=":", label=f"T = 2d + d_ff = {crossover}")
    flops_ax.set_xscale("log", base=2)
    flops_ax.set_yscale("log")
    flops_ax.set_xlabel("sequence length T")
    flops_ax.set_ylabel("forward FLOPs per token")
    flops_ax.legend(fontsize=7)
    time_ax.fill_between(times.T, [1e6 * s for s in times.fastest], [1e6 * s for s in times.slowest], color="#55a868",
                         alpha=0.25, label="fastest to slowest round")
    time_ax.plot(times.T, [1e6 * s for s in times.median], "o-", color="#55a868", label="median")
    time_ax.legend(fontsize=7)
    time_ax.set_xscale("log", base=2)
    time_ax.set_xlabel("sequence length T")
    time_ax.set_ylabel("µs per token (forward, 1 thread)")
    time_ax.set_ylim(bottom=0)
    fig.tight_layout()
    largest = max(rows_per_token, key=lambda component: rows_per_token[component][-1])
    fig.set_label(f"Left: forward FLOPs per token of {', '.join(rows_per_token)} against T from {T_values[0]} to "
                  f"{T_values[-1]} (log scales), the crossover T = 2d + d_ff = {crossover} dotted; at T = {T_values[-1]} "
                  f"the largest is {largest}. Right: measured microseconds per token against T (one thread), the median "
                  f"over rounds with a band from the fastest to the slowest round.")
    return fig


CONTOURS = (0.05, 0.2, 1.0)  # the 6N rule's error at 5%, 20% and 100%


def six_n_rule_error_figure(T_values, d_values, errors) -> Figure:
    """Heatmap of (measured training FLOPs) / (6 N tokens) - 1 over (d, T), d growing upwards and T to the right,
    on a log colour scale with contours at 5%, 20% and 100%, so that small errors can be told apart too.
    errors: rows d, columns T, every error > 0 (the rule leaves attention's products out)."""
    flat = [e for row in errors for e in row]
    if min(flat) <= 0:
        raise ValueError(f"errors must be positive for the log colour scale, got a smallest of {min(flat)}")
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    percent = [[100 * e for e in row] for row in errors]
    image = ax.pcolormesh(range(len(T_values)), range(len(d_values)), percent, cmap="magma_r", shading="nearest",
                          norm=LogNorm(vmin=100 * min(flat), vmax=100 * max(flat)))
    lines = ax.contour(range(len(T_values)), range(len(d_values)), errors, levels=list(CONTOURS), colors="cyan")
    ax.clabel(lines, fmt=lambda e: f"{100 * e:.0f}%", fontsize=7)
    ax.set_xticks(range(len(T_values)), [str(T) for T in T_values], fontsize=7)
    ax.set_yticks(range(len(d_values)), [str(d) for d in d_values], fontsize=7)
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("width d")
    ax.set_title("6N rule's error (%, log colour scale); cyan: 5%, 20%, 100%", fontsize=9)
    fig.colorbar(image, ax=ax, label="underestimate (%, log scale)")
    fig.tight_layout()
    within = "; ".join(f"d = {d} up to T = {max(T for T, e in zip(T_values, row) if e < CONTOURS[0])}"
                       for d, row in zip(d_values, errors) if row[0] < CONTOURS[0])
    fig.set_label(f"Heatmap of the 6N rule's underestimate of the training FLOPs over width d in {list(d_values)} "
                  f"(growing upwards) and T in {list(T_values)} (growing to the right), log colour scale: from "
                  f"{100 * min(flat):.1f}% to {100 * max(flat):.0f}%; within 5% in "
                  f"{sum(e < CONTOURS[0] for e in flat)} of {len(flat)} cells ({within or 'none'}), above 20% in "
                  f"{sum(e > CONTOURS[1] for e in flat)}, above 100% in {sum(e > CONTOURS[2] for e in flat)}.")
    return fig
