"""``kvpure cache --plot FILE.png``: the hit-rate curve against KV cache size as a PNG.

matplotlib is optional (``pip install 'kvpure[plot]'``) and imported only
here, when a plot is asked for, with the Agg backend (no display needed).
The figure is 8 x 5 inches at 100 dpi: a PNG of 800 x 500 pixels. The x axis
is the pool's usable blocks (the null block left out), the y axis the hit
rate in vLLM's prefix-cache units; a dashed line marks the unbounded cache.

Nothing is written but the PNG: matplotlib builds its font cache in its config
folder (``~/.config/matplotlib`` or ``~/.cache/matplotlib``) when it is first
imported; unless ``MPLCONFIGDIR`` names one, kvpure points it at a temporary
folder removed when the process ends.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvpure.cache.workload import WorkloadReport
from kvpure.errors import InvalidFieldError
from kvpure.text.errors import MissingExtraError
from kvpure.user_files import check_writable_target, open_regular_for_writing

__all__ = ["PLOT_DPI", "PLOT_SIZE_INCHES", "check_plot_target", "write_hit_rate_plot"]

PLOT_SIZE_INCHES = (8.0, 5.0)
PLOT_DPI = 100


def _private_config_dir() -> None:
    """Point matplotlib at a temporary config folder (removed at exit) unless the user
    named one, before it is imported: its font cache is then written nowhere else."""
    if "matplotlib" in sys.modules or os.environ.get("MPLCONFIGDIR"):
        return
    folder = tempfile.mkdtemp(prefix="kvpure-matplotlib-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["MPLCONFIGDIR"] = folder


def _pyplot() -> Any:
    _private_config_dir()
    try:
        import matplotlib
    except ImportError:
        raise MissingExtraError(feature="--plot", package="matplotlib", extra="plot") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_plot_target(path: str) -> None:
    """Refuse a plot that cannot be written before any replay runs (name, folder, matplotlib)."""
    if not path.lower().endswith(".png"):
        raise InvalidFieldError(field="--plot", value=path, reason="must name a .png file")
    if not Path(path).parent.is_dir():
        raise InvalidFieldError(field="--plot", value=path, reason="its folder does not exist")
    check_writable_target(path, "--plot")
    _pyplot()


def write_hit_rate_plot(
    rows: Sequence[tuple[str, WorkloadReport]], path: str, *, title: str = ""
) -> None:
    """Draw ``rows`` (a memory figure and its report, in sweep order) into the PNG ``path``."""
    check_plot_target(path)
    if not rows:
        raise InvalidFieldError(
            field="--plot", value=path, reason="has no served memory figure to draw"
        )
    target = Path(path)
    plt = _pyplot()
    points = sorted(rows, key=lambda row: row[1].actual.num_blocks)
    blocks = [r.actual.num_blocks - 1 for _, r in points]
    rates = [100.0 * r.actual.hit_rate for _, r in points]
    upper = 100.0 * points[0][1].unbounded.hit_rate
    figure, axes = plt.subplots(figsize=PLOT_SIZE_INCHES, dpi=PLOT_DPI)
    try:
        axes.plot(blocks, rates, marker="o", label="hit rate")
        axes.axhline(upper, linestyle="--", color="grey", label=f"unbounded cache ({upper:.1f}%)")
        for (label, _), x, y in zip(points, blocks, rates, strict=True):
            axes.annotate(label, (x, y), textcoords="offset points", xytext=(4, -12), fontsize=8)
        axes.set_xlabel("KV cache size (blocks)")
        axes.set_ylabel("prefix-cache hit rate (%)")
        axes.set_ylim(0, 100)
        axes.set_xlim(left=0)
        axes.grid(True, alpha=0.3)
        axes.legend(loc="lower right")
        axes.set_title(title or "prefix-cache hit rate against KV cache size")
        with open_regular_for_writing(target, "--plot") as out:
            figure.savefig(out, format="png", dpi=PLOT_DPI)
    finally:
        plt.close(figure)
