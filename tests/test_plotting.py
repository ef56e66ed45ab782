"""The shared figure style, byte-reproducible saving and the tail-miss plot."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory.plotting import (
    OKABE_ITO,
    PALETTE,
    new_figure,
    paper_style,
    plot_tail_miss,
    save_figure,
)


def _lemma31(n, mu, tau):
    # Hand-written Lemma 3.1 (independent of fgrpo_theory.tail_miss): fine in float64 here.
    n = np.asarray(n, dtype=float)
    return (1 - tau) ** n - (mu - tau) ** n - (1 - mu) ** n


def _frame(mu, rhos, n_max):
    rows = []
    for rho in rhos:
        tau = rho * mu
        for n in range(1, n_max + 1):
            rows.append(dict(N=n, mu=mu, tau=tau, rho=rho, p_tail_miss=_lemma31(n, mu, tau)))
    return pd.DataFrame(rows)


def _figure():
    with paper_style():
        fig = new_figure()
        ax = fig.subplots()
        plot_tail_miss(ax, _frame(0.3, (0.05, 0.2), 64))
    return fig


def test_okabe_ito_palette_values():
    # The published Okabe-Ito colours (Okabe & Ito 2008), typed by hand.
    assert OKABE_ITO["orange"] == "#E69F00"
    assert OKABE_ITO["sky_blue"] == "#56B4E9"
    assert OKABE_ITO["bluish_green"] == "#009E73"
    assert OKABE_ITO["blue"] == "#0072B2"
    assert OKABE_ITO["vermillion"] == "#D55E00"
    assert OKABE_ITO["reddish_purple"] == "#CC79A7"
    assert set(PALETTE) == set(OKABE_ITO.values())
    assert PALETTE[-1] == OKABE_ITO["yellow"]  # weakest contrast on white comes last


def test_paper_style_is_scoped():
    import matplotlib

    before = matplotlib.rcParams["font.size"]
    with paper_style({"font.size": 11.0}):
        assert matplotlib.rcParams["font.size"] == 11.0
        assert matplotlib.rcParams["pdf.fonttype"] == 42
    assert matplotlib.rcParams["font.size"] == before


def test_save_figure_byte_identical_and_metadata_free(tmp_path):
    fig = _figure()
    with paper_style():
        a = save_figure(fig, tmp_path / "a" / "fig")
        b = save_figure(fig, tmp_path / "b" / "fig", formats="pdf,png")
    assert [p.suffix for p in a] == [".pdf", ".png"]
    for pa, pb in zip(a, b, strict=True):
        assert pa.stat().st_size > 1000
        assert pa.read_bytes() == pb.read_bytes()
    pdf = a[0].read_bytes()
    assert b"CreationDate" not in pdf and b"ModDate" not in pdf
    assert b"fgrpo-theory" in pdf and b"Matplotlib v" not in pdf
    png = a[1].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and b"fgrpo-theory" in png


@pytest.mark.slow
def test_save_figure_identical_across_processes(tmp_path):
    code = (
        "import sys; sys.path.insert(0, {tests!r}); import test_plotting as t; "
        "from fgrpo_theory.plotting import paper_style, save_figure\n"
        "with paper_style(): save_figure(t._figure(), {stem!r})"
    )
    tests_dir = str(__import__("pathlib").Path(__file__).parent)
    for name in ("x", "y"):
        stem = str(tmp_path / name / "fig")
        subprocess.run([sys.executable, "-c", code.format(tests=tests_dir, stem=stem)], check=True)
    for ext in ("pdf", "png"):
        assert (tmp_path / "x" / f"fig.{ext}").read_bytes() == (
            tmp_path / "y" / f"fig.{ext}"
        ).read_bytes()


def test_save_figure_leaves_identical_file_untouched(tmp_path):
    fig = _figure()
    with paper_style():
        (p,) = save_figure(fig, tmp_path / "fig", formats=("png",))
        mtime = p.stat().st_mtime_ns
        save_figure(fig, tmp_path / "fig.png", formats=("png",))
    assert p.stat().st_mtime_ns == mtime


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"formats": ("jpg",)}, "formats must be one of pdf, png, svg; got 'jpg'"),
        ({"formats": ()}, "formats must be a non-empty list"),
        ({"dpi": 100}, "dpi must be an integer >= 200; got 100"),
    ],
)
def test_save_figure_errors(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        save_figure(new_figure(), tmp_path / "f", **kwargs)


def test_plot_tail_miss_stars_at_brute_force_argmax():
    mu, rhos = 0.3, (0.05, 0.1, 0.2)
    df = _frame(mu, rhos, 128)
    with paper_style():
        fig = new_figure()
        ax = fig.subplots()
        peaks = plot_tail_miss(ax, df)
    stars = [ln for ln in ax.lines if ln.get_marker() == "*"]
    assert len(stars) == 3
    n = np.arange(1, 129)
    for rho, star, peak in zip(rhos, stars, peaks, strict=True):
        p = _lemma31(n, mu, rho * mu)
        i = int(np.argmax(p))
        assert star.get_xdata()[0] == n[i] == peak["n_star"]
        assert star.get_ydata()[0] == pytest.approx(p[i], rel=1e-12)
    assert [p["n_star"] for p in peaks] == [9, 8, 6]  # Fig. 1a: rarer subsets peak later
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        r"$\rho$ = 0.05",
        r"$\rho$ = 0.1",
        r"$\rho$ = 0.2",
    ]


def test_plot_tail_miss_star_skipped_outside_range():
    df = _frame(0.5, (0.001,), 4)  # peak near N = 11, beyond N = 4
    with paper_style():
        ax = new_figure().subplots()
        peaks = plot_tail_miss(ax, df)
    assert not [ln for ln in ax.lines if ln.get_marker() == "*"]
    assert peaks[0]["n_star"] > 4


def test_plot_tail_miss_errors():
    ax = new_figure().subplots()
    with pytest.raises(ValueError, match="df must be present as columns"):
        plot_tail_miss(ax, pd.DataFrame({"N": [1], "mu": [0.3]}))
    with pytest.raises(ValueError, match="label must be one of"):
        plot_tail_miss(ax, _frame(0.3, (0.1,), 4), label="tau")


def test_import_does_not_load_matplotlib():
    code = "import sys, fgrpo_theory, fgrpo_theory.cli; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_import_does_not_switch_matplotlib_backend(tmp_path):
    code = (
        "import matplotlib; import fgrpo_theory.plotting as p; "
        "fig = p.new_figure(); fig.subplots().plot([0, 1]); "
        f"p.save_figure(fig, {str(tmp_path / 'f')!r}, ('png', 'pdf')); "
        "print(matplotlib.rcParams['backend'])"
    )
    env = {**os.environ, "MPLBACKEND": "template"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "template"
    assert (tmp_path / "f.png").stat().st_size > 0 and (tmp_path / "f.pdf").stat().st_size > 0
