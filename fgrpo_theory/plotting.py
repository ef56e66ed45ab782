"""Shared figure style, reproducible saving and the tail-miss plot.

One style for every figure of the toolkit: the Okabe-Ito colorblind-safe palette, fonts readable
at single-column width (about 3.4 in), thin frames. Figures are built as
:class:`matplotlib.figure.Figure` objects without pyplot's global state and rendered with the
Agg/PDF canvases that ``Figure.savefig`` picks by file format, so nothing here needs a display
and importing this module never switches matplotlib's backend. :func:`save_figure` writes files
whose bytes depend only on the figure: rerunning a script rewrites identical PDFs and PNGs (no
timestamps, fixed producer strings, fixed SVG hash salt).

This module imports matplotlib; ``import fgrpo_theory`` does not import it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any


def _private_config_without_home() -> None:
    """Point ``MPLCONFIGDIR`` at a private temporary folder (mode 0700, removed at exit) when the
    home folder is missing or not writable and ``MPLCONFIGDIR`` is unset: matplotlib would
    otherwise create the missing home (its ``~/.config`` and ``~/.cache`` folders) or warn.
    Nothing is done once matplotlib is imported (its folders are chosen then)."""
    if "matplotlib" in sys.modules or os.environ.get("MPLCONFIGDIR"):
        return
    try:
        home = Path.home()
    except (RuntimeError, KeyError, OSError):
        home = None
    if home is not None and home.is_dir() and os.access(home, os.W_OK | os.X_OK):
        return
    import atexit
    import shutil
    import tempfile

    try:
        folder = tempfile.mkdtemp(prefix="fgrpo-theory-mpl-")
    except OSError:  # no usable temporary folder either: matplotlib copes (with a warning)
        return
    os.environ["MPLCONFIGDIR"] = folder
    atexit.register(shutil.rmtree, folder, ignore_errors=True)


_private_config_without_home()

import matplotlib  # noqa: E402  (after the config folder is chosen)
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ._io import write_atomic  # noqa: E402
from ._validate import fail  # noqa: E402

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = [
    "OKABE_ITO",
    "PALETTE",
    "LINESTYLES",
    "SINGLE_COLUMN",
    "DOUBLE_COLUMN",
    "PAPER_RC",
    "PRODUCER",
    "paper_style",
    "new_figure",
    "color_cycle",
    "save_figure",
    "plot_tail_miss",
    "mark_fast_preview",
]

#: The Okabe-Ito palette (Okabe & Ito 2008), safe for the common color-vision deficiencies.
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}

#: Line-color order: strongest contrast on white first, yellow last.
PALETTE: tuple[str, ...] = (
    OKABE_ITO["blue"],
    OKABE_ITO["vermillion"],
    OKABE_ITO["bluish_green"],
    OKABE_ITO["orange"],
    OKABE_ITO["reddish_purple"],
    OKABE_ITO["sky_blue"],
    OKABE_ITO["black"],
    OKABE_ITO["yellow"],
)

#: Line styles to pair with colors when a second grouping is needed (e.g. gamma = 0 / 1).
LINESTYLES: tuple[Any, ...] = ("-", "--", ":", "-.")

#: Figure widths in inches.
SINGLE_COLUMN = 3.4
DOUBLE_COLUMN = 7.0

#: Producer string written into every file instead of timestamps and version strings.
PRODUCER = "fgrpo-theory"

#: rcParams of the paper style (applied with :func:`paper_style`).
PAPER_RC: dict[str, Any] = {
    "figure.figsize": (SINGLE_COLUMN, 2.5),
    "figure.dpi": 100,
    "savefig.dpi": 300,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.03,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 8,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 6.5,
    "legend.title_fontsize": 7,
    "legend.frameon": False,
    "legend.handlelength": 1.8,
    "legend.borderaxespad": 0.3,
    "axes.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.linewidth": 0.4,
    "grid.alpha": 0.35,
    "axes.prop_cycle": matplotlib.cycler(color=list(PALETTE)),
    "lines.linewidth": 1.3,
    "lines.markersize": 3.5,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "xtick.major.size": 2.5,
    "ytick.major.size": 2.5,
    "xtick.minor.size": 1.5,
    "ytick.minor.size": 1.5,
    "mathtext.fontset": "dejavusans",
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.fonttype": "none",
    "svg.hashsalt": "fgrpo-theory",
    "path.simplify": True,
    "text.usetex": False,
}

_METADATA: dict[str, dict[str, Any]] = {
    "pdf": {"CreationDate": None, "ModDate": None, "Producer": PRODUCER, "Creator": PRODUCER},
    "png": {"Software": PRODUCER},
    "svg": {"Date": None, "Creator": PRODUCER},
}


@contextlib.contextmanager
def paper_style(overrides: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Apply the paper style (:data:`PAPER_RC`, plus ``overrides``) inside a ``with`` block.

    Figures must be both created *and* saved inside the block so fonts and sizes apply to both.

    Examples
    --------
    >>> with paper_style():
    ...     fig = new_figure()
    ...     ax = fig.subplots()
    """
    rc = dict(PAPER_RC)
    if overrides:
        rc.update(overrides)
    with matplotlib.rc_context(rc):
        yield rc


def new_figure(width: float = SINGLE_COLUMN, height: float = 2.5, **kwargs: Any) -> Figure:
    """Return a new :class:`~matplotlib.figure.Figure` (no pyplot state, constrained layout).

    Parameters
    ----------
    width, height : float
        Size in inches; the default width is a single column (3.4 in).
    **kwargs
        Passed to :class:`~matplotlib.figure.Figure`.
    """
    if not (np.isfinite(width) and width > 0):
        fail("width", width, "a positive number of inches")
    if not (np.isfinite(height) and height > 0):
        fail("height", height, "a positive number of inches")
    kwargs.setdefault("layout", "constrained")
    return Figure(figsize=(width, height), **kwargs)


def color_cycle(n: int) -> list[str]:
    """Return ``n`` colors of :data:`PALETTE`, cycling if ``n`` exceeds its length."""
    if n < 0:
        fail("n", n, ">= 0")
    return [PALETTE[i % len(PALETTE)] for i in range(n)]


def _render(fig: Figure, fmt: str, dpi: int) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
    return buf.getvalue()


def _same_bytes(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a regular file (not a symlink) holding exactly ``data``: opened
    without following a symlink and without blocking (a FIFO put there meanwhile is not read)."""
    import os
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False
        with open(os.dup(fd), "rb") as fh:
            return fh.read(len(data) + 1) == data
    except OSError:
        return False
    finally:
        os.close(fd)


def save_figure(
    fig: Figure,
    stem: str | Path,
    formats: str | Sequence[str] = ("pdf", "png"),
    dpi: int = 300,
) -> list[Path]:
    """Write ``fig`` to ``<stem>.<fmt>`` for each format, byte-identical on every rerun.

    Timestamps are removed and producer strings fixed (PDF ``CreationDate``/``ModDate`` = None,
    ``Producer``/``Creator`` = "fgrpo-theory"; PNG ``Software`` = "fgrpo-theory"; SVG without date
    and with the hash salt of :data:`PAPER_RC`). A file whose bytes would not change is left
    untouched (its modification time too). Missing parent folders are created.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure to save.
    stem : str or Path
        Output path without suffix, e.g. ``figures/fig1a_tail_miss``.
    formats : str or sequence of str
        Any of ``"pdf"``, ``"png"``, ``"svg"``; a string may be comma-separated (``"pdf,png"``).
    dpi : int
        Resolution of raster output, at least 200.

    Returns
    -------
    list of Path
        The written (or already identical) files, in the order of ``formats``.
    """
    if isinstance(formats, str):
        formats = [f.strip() for f in formats.split(",")]
    formats = list(formats)
    if not formats:
        fail("formats", "[]", "a non-empty list of pdf, png, svg")
    for f in formats:
        if f not in _METADATA:
            fail("formats", f, "one of pdf, png, svg")
    if not isinstance(dpi, int | np.integer) or dpi < 200:
        fail("dpi", dpi, "an integer >= 200")
    stem = Path(stem)
    if stem.suffix in {".pdf", ".png", ".svg"}:
        stem = stem.with_suffix("")
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    with matplotlib.rc_context({"svg.hashsalt": PAPER_RC["svg.hashsalt"]}):
        for fmt in dict.fromkeys(formats):
            data = _render(fig, fmt, int(dpi))
            path = stem.with_name(stem.name + "." + fmt)
            if not _same_bytes(path, data):
                # a fresh O_EXCL temporary under a random name, renamed over the file (a symlink
                # planted there is replaced, never written through); removed on any failure
                write_atomic(path, data, name="stem")
            paths.append(path)
    return paths


def mark_fast_preview(fig: Figure, text: str = "FAST PREVIEW (reduced settings)") -> None:
    """Stamp a visible banner on ``fig`` so fast-mode output is never mistaken for the real one."""
    fig.text(
        0.5,
        0.5,
        text,
        ha="center",
        va="center",
        rotation=20,
        fontsize=14,
        color=OKABE_ITO["vermillion"],
        alpha=0.35,
        weight="bold",
        zorder=100,
    )


def _peak(mu: float, tau: float) -> tuple[float, float]:
    """Peak (N*, Pr(B) at N*) from :func:`fgrpo_theory.tail_miss.peak_group_size`."""
    from .tail_miss import peak_group_size

    res = peak_group_size(mu, tau)
    return float(res.n_star), float(res.p_peak)


def _fmt_num(x: float) -> str:
    return f"{x:.3g}"


def plot_tail_miss(
    ax: Axes,
    df: pd.DataFrame,
    *,
    star: bool = True,
    colors: Iterable[str] | None = None,
    label: str = "auto",
    logx: bool = True,
    legend: bool = True,
    **line_kwargs: Any,
) -> list[dict[str, float]]:
    """Draw the tail-miss probability Pr(B) against N, one curve per (mu, tau), peaks starred.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Axes to draw on.
    df : pandas.DataFrame
        Output of the ``miss-prob`` command or of :func:`fgrpo_theory.tail_miss` evaluated on a
        grid: columns ``N, mu, tau, rho, p_tail_miss`` (others, such as ``p_active``, ignored).
    star : bool
        Mark each curve's maximum over integer N with a star, taken from
        :func:`fgrpo_theory.tail_miss.peak_group_size` (the exact integer argmax, Lemma 3.1).
        The star is drawn only when N* lies inside the plotted N range.
    colors : iterable of str, optional
        Curve colors (default: :data:`PALETTE`).
    label : {"auto", "rho", "mu", "both", "none"}
        Legend label of each curve; "auto" shows rho alone when all curves share one mu, mu alone
        when they share one rho, both otherwise.
    logx : bool
        Use a base-2 logarithmic N axis.
    legend : bool
        Draw a legend.
    **line_kwargs
        Passed to :meth:`~matplotlib.axes.Axes.plot`.

    Returns
    -------
    list of dict
        One entry per curve: ``mu, tau, rho, n_star, p_peak`` (NaN-free; ``n_star`` is the star's
        position, or the closed-form peak even when not drawn).
    """
    required = {"N", "mu", "tau", "rho", "p_tail_miss"}
    missing = sorted(required - set(df.columns))
    if missing:
        fail("df", ",".join(missing), "present as columns (missing)")
    if len(df) == 0:
        fail("df", "empty", "a non-empty DataFrame")
    if label not in {"auto", "rho", "mu", "both", "none"}:
        fail("label", label, "one of auto, rho, mu, both, none")
    groups = sorted(df.groupby(["mu", "tau"], sort=True), key=lambda g: (g[0][0], g[0][1]))
    n_mu = df["mu"].nunique()
    n_rho = df["rho"].round(12).nunique()
    if label == "auto":
        label = "rho" if n_mu == 1 else ("mu" if n_rho == 1 else "both")
    palette = list(colors) if colors is not None else list(PALETTE)
    peaks = []
    n_min, n_max = float(df["N"].min()), float(df["N"].max())
    for k, ((mu, tau), g) in enumerate(groups):
        g = g.sort_values("N")
        n = g["N"].to_numpy(dtype=float)
        p = g["p_tail_miss"].to_numpy(dtype=float)
        rho = float(g["rho"].iloc[0])
        color = palette[k % len(palette)]
        text = {
            "rho": rf"$\rho$ = {_fmt_num(rho)}",
            "mu": rf"$\mu$ = {_fmt_num(mu)}",
            "both": rf"$\mu$ = {_fmt_num(mu)}, $\rho$ = {_fmt_num(rho)}",
            "none": None,
        }[label]
        ax.plot(n, p, color=color, label=text, **line_kwargs)
        n_star, p_peak = _peak(float(mu), float(tau))
        if star and n_min <= n_star <= n_max:
            ax.plot(
                [n_star],
                [p_peak],
                marker="*",
                markersize=9,
                color=color,
                markeredgecolor="black",
                markeredgewidth=0.4,
                linestyle="none",
                zorder=5,
            )
        peaks.append(
            {"mu": float(mu), "tau": float(tau), "rho": rho, "n_star": n_star, "p_peak": p_peak}
        )
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel("group size N (rollouts per prompt)")
    ax.set_ylabel("tail-miss probability Pr(B)")
    ax.set_ylim(bottom=0)
    if legend and label != "none":
        ax.legend(loc="best")
    return peaks
