"""CLI ``figures`` and ``validate``."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from fgrpo_theory.cli._experiments import experiments_package

experiments_package()
from fgrpo_theory_experiments import registry  # noqa: E402

#: Every discovered figure (no hand list).
NAMES = registry.names()
#: The cheapest figures (closed forms: the CLI tests draw them for real).
CHEAP = [e.name for e in registry.experiments() if e.cost_seconds <= 2.0]


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("name", NAMES)
def test_figures_list_shows_every_discovered_figure(cli, name):
    r = cli("figures", "list", "--format", "table")
    assert r.code == 0
    assert name in r.out


def test_figures_list_formats(cli):
    r = cli("figures", "list", "--format", "csv")
    assert r.code == 0, r.err
    df = pd.read_csv(io.StringIO(r.out))
    assert list(df.columns) == ["name", "in_paper", "cost_seconds", "title"]
    assert list(df["name"]) == NAMES
    r = cli("figures", "list", "--format", "json")
    assert r.code == 0, r.err
    assert [row["name"] for row in json.loads(r.out)] == NAMES


@pytest.mark.parametrize("name", CHEAP)
def test_figures_cheap_ones_render(cli, tmp_path, name):
    out = tmp_path / "figs"
    r = cli("figures", name, "--out", out, "--figure-format", "png", "--dpi", "200")
    assert r.code == 0, r.err
    assert [p.name for p in out.iterdir()] == [f"{name}.png"]


def test_figures_named_png_only(cli, tmp_path):
    out = tmp_path / "figs"
    r = cli(
        "figures",
        "fig1a_tail_miss",
        "fig4_focal_magnitudes",
        "--out",
        out,
        "--figure-format",
        "png",
        "--dpi",
        "200",
    )
    assert r.code == 0, r.err
    assert sorted(p.name for p in out.iterdir()) == [
        "fig1a_tail_miss.png",
        "fig4_focal_magnitudes.png",
    ]
    assert "[1/2] fig1a_tail_miss: computed" in r.err
    assert "[2/2] fig4_focal_magnitudes: computed" in r.err
    r2 = cli("figures", "fig1a_tail_miss", "--out", out, "--figure-format", "png", "--dpi", "200")
    assert "fig1a_tail_miss: cached" in r2.err


def test_figures_fast_default_out_is_the_cache_never_the_cwd(cli, tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    r = cli("figures", "fig1a_tail_miss", "--fast", "--figure-format", "pdf")
    assert r.code == 0, r.err
    assert (tmp_path / "cache" / "fast-preview" / "fig1a_tail_miss.pdf").is_file()
    assert list(cwd.iterdir()) == []


def test_cache_dir_follows_xdg_and_the_override(tmp_path, monkeypatch):
    from fgrpo_theory_experiments.cache import cache_dir

    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("FGRPO_THEORY_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "fgrpo-theory"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "fgrpo-theory"


def test_a_user_experiments_folder_does_not_shadow_the_package(tmp_path):
    """A folder named experiments/ in the working directory (common in ML repositories) must not
    hide the figures (issue 9 item 6)."""
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "__init__.py").write_text("raise ImportError('user folder')\n")
    env = {**os.environ, "FGRPO_THEORY_CACHE_DIR": str(tmp_path / "cache")}
    code = (
        "from fgrpo_theory.cli import main; "
        "raise SystemExit(main(['figures', 'list', '--format', 'csv']))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "fig1a_tail_miss" in r.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["figures", "fig9"], "Error: figure name must be one of fig1a_tail_miss"),
        (["figures"], "Error: NAMES must be 'list', 'all' or figure names; got 'nothing'"),
        (["figures", "all", "fig1a_tail_miss"], "Error: NAMES must be used alone; got 'all'"),
        (
            ["figures", "fig1a_tail_miss", "--figure-format", "gif"],
            "Error: --figure-format must be one of pdf, png, svg; got 'gif'",
        ),
        (
            ["figures", "fig1a_tail_miss", "--dpi", "72"],
            "Error: --dpi must be in [200, 2400]; got 72",
        ),
    ],
)
def test_figures_errors(cli, args, message):
    r = cli(*args)
    assert r.code == 2
    assert r.err.strip().splitlines()[-1] == message or message in r.err
    assert "Traceback" not in r.err


def test_validate_quick_csv(cli):
    r = cli("validate", "--quick", "--format", "csv")
    assert r.code == 0, r.err
    lines = r.out.strip().splitlines()
    assert lines[0] == (
        "group,quantity,parameters,method,closed_form,estimate,stderr,z,tolerance,passed"
    )
    assert len(lines) > 100 and all(line.endswith("True") for line in lines[1:])
    assert "checks passed" in r.err


def test_validate_exit_code_1_on_failure(cli, monkeypatch):
    from fgrpo_theory import validation

    bad = pd.DataFrame(
        [
            dict(
                group="g",
                quantity="q",
                parameters="p",
                method="monte_carlo",
                closed_form=0.5,
                estimate=0.6,
                stderr=0.01,
                z=10.0,
                tolerance=4.0,
                passed=False,
            )
        ]
    )
    monkeypatch.setattr(validation, "run_validation", lambda quick=False: bad)
    r = cli("validate", "--quick", "--format", "json")
    assert r.code == 1
    assert "0/1 checks passed" in r.err


def test_help_shows_the_cache_placeholder(cli, monkeypatch):
    # markdown help used to swallow "<cache>" as an HTML tag, printing "/fast-preview/"
    monkeypatch.setenv("COLUMNS", "200")  # one line per option, whatever the terminal
    r = cli("figures", "--help")
    assert r.code == 0
    assert "<cache>/fast-preview/" in r.out
