"""The build track's training figure: held-out loss of a learner's GPT beside gptlib's, same settings.

A pure function: it takes gptlib.train.own_model.TrainingRun records and returns a matplotlib Figure
(show it with gptlib.viz.display.show_figure).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from ..train.own_model import TrainingRun


def loss_curves_figure(runs: list[TrainingRun], target: float | None = None) -> Figure:
    """Held-out loss (nats/char) of each run against training steps (left) and wall-clock seconds (right);
    `target`, if given, as a dotted horizontal line."""
    fig = Figure(figsize=(10, 3.6))
    by_step, by_time = fig.subplots(1, 2, sharey=True)
    for run in runs:
        by_step.plot(run.steps, run.val_losses, "o-", ms=3, label=run.name)
        by_time.plot(run.seconds, run.val_losses, "o-", ms=3, label=run.name)
    for ax, xlabel in ((by_step, "training step"), (by_time, "wall-clock seconds (evaluations included)")):
        if target is not None:
            ax.axhline(target, color="grey", ls=":", label=f"{target} nats/char")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("held-out loss (nats/char)")  # both panels: sharey hides the right one's ticks, not its label
    by_step.legend(fontsize=8)
    fig.tight_layout()
    goal = "" if target is None else f", the target {target} nats/char dotted"
    fig.set_label(f"Held-out loss (nats/char) against training steps (left) and wall-clock seconds (right){goal}; "
                  + "; ".join(f"{run.name}: from {run.val_losses[0]:.2f} at step {run.steps[0]} to "
                              f"{run.val_losses[-1]:.2f} at step {run.steps[-1]}" for run in runs) + ".")
    return fig
