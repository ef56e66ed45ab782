"""Stored result tables of long experiments (experiments/stored.py).

Two parts: every experiment that declares ``STORED = True`` has a stored table that matches the
code on this commit (a kernel edit without the recomputed table fails here), and the mechanism
itself on a figure module added by the test: refuse when nothing matches, compute and store on
``--recompute``, plot from the stored table without computing, refuse again after a code edit or
a damaged file.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from fgrpo_theory.cli._experiments import experiments_package

experiments_package()
from fgrpo_theory_experiments import registry, stored  # noqa: E402
from fgrpo_theory_experiments.cache import module_sources  # noqa: E402

STORED_NAMES = [e.name for e in registry.experiments() if getattr(e.load(), "STORED", False)]


@pytest.mark.parametrize("name", STORED_NAMES)
def test_every_stored_table_matches_this_commit(name, tmp_path, monkeypatch):
    """The committed table was computed by the code and parameters on this commit, its rows
    verify, and the figure draws from it with no computation."""
    exp = registry.get(name)
    mod = exp.load()
    st = stored.status(name, mod.PARAMS, module_sources(exp.path))
    assert st.ok, f"{name}: {st.reason}; run 'fgrpo-theory figures {name} --recompute'"
    assert stored.load(name, mod.PARAMS, module_sources(exp.path)) is not None

    def boom(*a, **k):
        raise AssertionError("a stored figure must not compute")

    monkeypatch.setattr(mod, "compute", boom)
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))
    res = registry.run(name, tmp_path / "out", ("png",), dpi=200)
    assert res.source == "stored" and res.rows > 0


FIGURE = '''"""A stored test figure."""
from dataclasses import dataclass

import numpy as np
import pandas as pd

TITLE = "Stored squares (a figure added by a test)"
IN_PAPER = False
COST_SECONDS = 120.0
STORED = True
CALLS = []


@dataclass(frozen=True)
class Params:
    n: int = 9


PARAMS = Params()


def compute(params=PARAMS, fast=False):
    CALLS.append(fast)
    x = np.arange(params.n if not fast else 3, dtype=float)
    return pd.DataFrame({"x": x, "y": x**2})


def plot(df, params=PARAMS):
    from fgrpo_theory.plotting import new_figure

    fig = new_figure()
    ax = fig.subplots()
    ax.plot(df["x"], df["y"], marker="o")
    ax.set_xlabel("x")
    ax.set_ylabel("x squared")
    return fig
'''


@pytest.fixture
def stored_figure(tmp_path, monkeypatch):
    folder = tmp_path / "figs"
    folder.mkdir()
    (folder / "stored_square.py").write_text(FIGURE)
    monkeypatch.setenv("FGRPO_THEORY_FIGURES_PATH", str(folder))
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(stored, "STORED_DIR", tmp_path / "stored")
    return folder / "stored_square.py"


def test_stored_lifecycle(stored_figure, tmp_path, cli, monkeypatch):
    out = tmp_path / "out"
    # nothing stored, nothing cached: one line naming the command, exit 2, nothing computed
    r = cli("figures", "stored_square", "--out", out, "--figure-format", "png", "--dpi", "200")
    assert r.code == 2
    assert "no stored table stored_square.parquet" in r.err
    assert "fgrpo-theory figures stored_square --recompute" in r.err
    assert "about 2 min" in r.err and "Traceback" not in r.err
    mod = registry.get("stored_square").load()
    assert mod.CALLS == []

    r = cli("figures", "stored_square", "--recompute", "--out", out, "--dpi", "200")
    assert r.code == 0, r.err
    assert "stored_square: computed" in r.err
    assert mod.CALLS == [False]
    path = stored.stored_path("stored_square")
    assert path.is_file()
    first = (out / "stored_square.png").read_bytes()

    # the stored table serves a fresh cache folder without computing, same figure bytes
    (out / "stored_square.png").unlink()
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache2"))
    r = cli("figures", "stored_square", "--out", out, "--figure-format", "png", "--dpi", "200")
    assert r.code == 0, r.err
    assert "stored_square: stored" in r.err
    assert mod.CALLS == [False]
    assert (out / "stored_square.png").read_bytes() == first

    # fast previews never use the stored table (they compute their reduced table)
    res = registry.run("stored_square", out, ("png",), fast=True, dpi=200)
    assert res.source == "computed" and mod.CALLS == [False, True]


def test_a_code_edit_makes_the_stored_table_stale(stored_figure, tmp_path):
    registry.run("stored_square", tmp_path / "o", ("png",), recompute=True, dpi=200)
    assert registry.run("stored_square", tmp_path / "o", ("png",), dpi=200).source == "stored"
    stored_figure.write_text(stored_figure.read_text().replace("x**2", "x * x"))
    import sys

    sys.modules.pop("fgrpo_theory_figures_extra.stored_square", None)
    # the user's own cache still holds the old code's table under another key: not used
    with pytest.raises(ValueError, match="computed by other code .*--recompute"):
        registry.run("stored_square", tmp_path / "o", ("png",), dpi=200)
    # a recompute stores the new code's table (a checkout), which then serves without computing
    res = registry.run("stored_square", tmp_path / "o", ("png",), recompute=True, dpi=200)
    assert res.source == "computed"
    assert registry.run("stored_square", tmp_path / "o", ("png",), dpi=200).source == "stored"


def test_other_parameters_or_damaged_rows_are_refused(stored_figure, tmp_path, monkeypatch):
    registry.run("stored_square", tmp_path / "o", ("png",), recompute=True, dpi=200)
    path = stored.stored_path("stored_square")
    mod = registry.get("stored_square").load()
    code = module_sources(registry.get("stored_square").path)
    assert stored.status("stored_square", mod.Params(n=10), code).reason.endswith(
        "other parameters"
    )
    # rows rewritten under the same footer metadata: the rows digest catches it
    table = pq.read_table(path)
    df = table.to_pandas()
    df.loc[0, "y"] = 99.0
    import pyarrow as pa

    forged = pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(
        table.schema.metadata
    )
    pq.write_table(forged, path)
    assert stored.status("stored_square", mod.PARAMS, code).ok  # the footer alone still matches
    assert stored.load("stored_square", mod.PARAMS, code) is None
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "empty-cache"))
    with pytest.raises(ValueError, match="--recompute"):
        registry.run("stored_square", tmp_path / "o", ("png",), dpi=200)


def test_an_installed_package_is_never_written(stored_figure, tmp_path, monkeypatch):
    monkeypatch.setattr(stored, "STORED_DIR", tmp_path / "site-packages" / "x" / "stored")
    assert not stored.writable()
    res = registry.run("stored_square", tmp_path / "o", ("png",), recompute=True, dpi=200)
    assert res.source == "computed"
    assert not (tmp_path / "site-packages").exists()
    # the table now sits in the user's cache and serves later runs
    assert registry.run("stored_square", tmp_path / "o", ("png",), dpi=200).source == "cache"


def test_the_code_digest_does_not_depend_on_where_the_project_lives(tmp_path, monkeypatch):
    """A checkout (experiments/ sorts before fgrpo_theory/) and site-packages
    (fgrpo_theory_experiments/ sorts after fgrpo_theory/) give the same digest for the same files:
    the stored tables committed from a checkout verify in an installed wheel."""
    from fgrpo_theory_experiments import cache

    digests = []
    for layout in ({"fgrpo_theory": "fgrpo_theory", "fgrpo_theory_experiments": "experiments"},
                   {"fgrpo_theory": "fgrpo_theory",
                    "fgrpo_theory_experiments": "fgrpo_theory_experiments"}):  # fmt: skip
        root = tmp_path / str(len(digests))
        files = []
        for name, folder in layout.items():
            (root / folder).mkdir(parents=True)
            f = root / folder / "mod.py"
            f.write_text(f"# {name}\n")
            files.append(f)
        monkeypatch.setattr(cache, "_ROOTS", {n: root / d for n, d in layout.items()})
        digests.append(cache.source_digest(files))
    assert digests[0] == digests[1]


def test_a_figure_needing_torch_without_it_is_one_line(tmp_path, monkeypatch, cli):
    """Drawing a sequence figure where PyTorch is absent: one line naming the install, exit 2."""
    folder = tmp_path / "figs"
    folder.mkdir()
    (folder / "needs_torch.py").write_text(
        FIGURE.replace("STORED = True", "STORED = False").replace(
            "    CALLS.append(fast)",
            "    raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')",
        )
    )
    monkeypatch.setenv("FGRPO_THEORY_FIGURES_PATH", str(folder))
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))
    r = cli("figures", "needs_torch", "--out", tmp_path / "o", "--figure-format", "png")
    assert r.code == 2 and "Traceback" not in r.err
    assert "figure needs_torch needs PyTorch: pip install torch==2.13.0" in r.err


def test_stored_figures_draw_without_torch(tmp_path):
    """Every stored figure draws from its table where PyTorch is not installed (the sequence
    figures' tables were computed with it; reading and plotting them needs NumPy and pandas)."""
    import os
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None\n"  # 'import torch' now fails
        "from fgrpo_theory.cli._experiments import experiments_package; experiments_package()\n"
        "from fgrpo_theory_experiments import registry\n"
        f"for name in {STORED_NAMES!r}:\n"
        f"    res = registry.run(name, {str(tmp_path / 'out')!r}, ('png',), dpi=200)\n"
        "    assert res.source == 'stored', (name, res.source)\n"
        "assert 'torch' not in sys.modules or sys.modules['torch'] is None\n"
        "print('drawn', len(" + repr(STORED_NAMES) + "))\n"
    )
    env = dict(os.environ, FGRPO_THEORY_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"drawn {len(STORED_NAMES)}" in r.stdout
