"""Validation metrics against training updates, one line per run (the paper's Figure 6)."""

import os
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import UserError
from .figures import new_figure, save_figure
from .train_log import validation_curve

CURVES_INCHES = (6.4, 4.8)

_METRIC_LABELS = {"ppl": "validation perplexity", "loss": "validation loss (base 2)", "bleu": "validation BLEU"}


def parse_run(text: str) -> Tuple[str, str]:
    """LABEL=TRAIN_LOG; a bare path that exists is labelled by its directory."""
    if os.path.isfile(text) or "=" not in text:
        return os.path.basename(os.path.dirname(os.path.abspath(text))), text
    label, _, path = text.partition("=")
    if not label:
        raise UserError(f"{text!r}: give LABEL=TRAIN_LOG, e.g. define=work/lstm_ptb/define/train.log")
    return label, path


def plot_curves(runs: Sequence[Tuple[str, str]], output: str, metric: str = "valid_ppl",
                title: Optional[str] = None, overwrite: bool = False) -> Dict[str, List[Tuple[int, float]]]:
    """Plot ``metric`` against updates, one line per (label, train log): the paper's Figure 6
    (validation perplexity over training). Returns the plotted points per label."""
    if not runs:
        raise UserError("no runs; give at least one LABEL=TRAIN_LOG")
    curves = {}
    for label, path in runs:
        if label in curves:
            raise UserError(f"label {label!r} given twice; give each run its own label")
        curves[label] = validation_curve(path, metric)
    plot_points(curves, output, metric, title, overwrite)
    return curves


def plot_points(curves: Dict[str, Sequence[Tuple[int, float]]], output: str, metric: str = "valid_ppl",
                title: Optional[str] = None, overwrite: bool = False) -> None:
    """The figure of plot_curves from points already read (label -> [(update, value)])."""
    fig = new_figure(*CURVES_INCHES)
    ax = fig.add_subplot(1, 1, 1)
    for label, points in curves.items():
        x, y = zip(*points)
        ax.plot(x, y, marker="o" if len(points) <= 30 else None, markersize=3, label=label)
    ax.set_xlabel("training updates")
    if metric.endswith("ppl"):
        ax.set_yscale("log")  # early perplexities are orders of magnitude above the late ones
    ax.set_ylabel(_METRIC_LABELS.get(metric.rsplit("_", 1)[-1], metric))
    ax.set_title(title or f"{metric} over training (cf. paper Figure 6)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.subplots_adjust(left=0.14, right=0.96, top=0.9, bottom=0.12)
    save_figure(fig, output, overwrite)
