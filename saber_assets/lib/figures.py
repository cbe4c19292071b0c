"""Matplotlib figures as inline PNG (base64): for Dagster metadata and the HTML report."""

from __future__ import annotations

import base64
import io


def png_base64(fig, dpi: int = 80) -> str:
    """The figure as base64 PNG; closes it (figures pile up in long-lived processes)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()
