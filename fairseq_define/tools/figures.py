"""Matplotlib figures of the results tool, drawn without pyplot's global state and written
atomically."""

import os

from ..errors import UserError
from ..output_files import atomic_write

# Figure geometry (pixels = inches x DPI; no tight bounding box, so the size is exact).
DPI = 100


def new_figure(width_inches: float, height_inches: float):
    """A matplotlib figure drawn by the Agg backend, without pyplot's global state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_inches, height_inches), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig, output: str, overwrite: bool = False) -> None:
    """Write ``fig`` to ``output`` (all or nothing); an existing file only with ``overwrite``."""
    directory = os.path.dirname(os.path.abspath(output))
    os.makedirs(directory, exist_ok=True)
    ext = os.path.splitext(output)[1].lstrip(".").lower()
    if ext not in fig.canvas.get_supported_filetypes():
        raise UserError(f"cannot write {output}: unknown image type '{ext}'; use a .png, .pdf or .svg file name")
    try:
        atomic_write(output, lambda f: fig.savefig(f, dpi=DPI, format=ext), overwrite=overwrite)
    except UserError:  # already one line (a UserError is a ValueError)
        raise
    except ValueError as e:
        raise UserError(f"cannot write {output}: {e}; use a .png, .pdf or .svg file name") from None
