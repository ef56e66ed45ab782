"""CLI ``figures`` and ``validate``."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments import registry


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_CACHE_DIR", str(tmp_path / "cache"))


def test_figures_list(cli):
    r = cli("figures", "list")
    assert r.code == 0
    for name in registry.names():
        assert name in r.out


def test_figures_named_png_only(cli, tmp_path):
    out = tmp_path / "figs"
    r = cli(
        "figures",
        "fig1a_tail_miss",
        "fig4_focal_magnitudes",
        "--out",
        out,
        "--format",
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
    r2 = cli("figures", "fig1a_tail_miss", "--out", out, "--format", "png", "--dpi", "200")
    assert "fig1a_tail_miss: cached" in r2.err


def test_figures_fast_default_out_is_gitignored_preview(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("figures", "fig1a_tail_miss", "--fast", "--format", "pdf")
    assert r.code == 0, r.err
    assert (tmp_path / "experiments" / "data" / "fast-preview" / "fig1a_tail_miss.pdf").is_file()
    assert not (tmp_path / "figures").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["figures", "fig9"], "Error: figure name must be one of fig1a_tail_miss"),
        (["figures"], "Error: NAMES must be 'list', 'all' or figure names; got 'nothing'"),
        (["figures", "all", "fig1a_tail_miss"], "Error: NAMES must be used alone; got 'all'"),
        (
            ["figures", "fig1a_tail_miss", "--format", "gif"],
            "Error: --format must be one of pdf, png, svg; got 'gif'",
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
