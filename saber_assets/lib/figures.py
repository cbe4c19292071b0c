"""Matplotlib figures as inline PNG (base64): for Dagster metadata and the HTML report."""

from __future__ import annotations

import base64
import io
from types import ModuleType


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (no display in a run worker's thread).

    Imported when a figure is drawn, not with the module that draws it: matplotlib (and the
    pyparsing it loads) is 0.22 s of the 2.9 s of CPU in which every process loads the definitions
    (each Dagster run worker, the UI's code server, every `saber` command), and most of them
    draw nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_base64(fig, dpi: int = 80) -> str:
    """The figure as base64 PNG; closes it (figures pile up in long-lived processes)."""
    plt = pyplot()

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()
