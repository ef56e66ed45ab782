"""Every experiment in fast mode: its table against closed forms and hand-computed values.

Tables are computed once per module (fast mode, cache in a temporary folder) and checked against
oracles that do not share code with the library: hand-written Lemma 3.1, brute-force argmax,
numbers typed from the paper and theory.md, explicit probability vectors.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory.cli._experiments import experiments_package

experiments_package()
from fgrpo_theory_experiments import registry  # noqa: E402

#: Every discovered figure (the tests below are parametrised over it; no hand list).
NAMES = registry.names()


@pytest.fixture(scope="module", autouse=True)
def _tmp_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


_TABLES: dict[str, pd.DataFrame] = {}


def table(name: str) -> pd.DataFrame:
    """Fast-mode table of an experiment (computed once per test module)."""
    from fgrpo_theory_experiments.cache import cached

    if name not in _TABLES:
        mod = registry.get(name).load()
        _TABLES[name] = cached(
            name, mod.PARAMS, lambda: mod.compute(mod.PARAMS, fast=True), fast=True
        )[0]
    return _TABLES[name]


def lemma31(n, mu, tau):
    n = np.asarray(n, dtype=float)
    return (1 - tau) ** n - (mu - tau) ** n - (1 - mu) ** n


def brute_argmax(mu, tau, n_max=100_000):
    n = np.arange(1, n_max + 1)
    p = lemma31(n, mu, tau)
    i = int(np.argmax(p))
    return int(n[i]), float(p[i])


# ------------------------------------------------------------------------------------ registry


def test_registry_discovers_the_package_modules():
    names = registry.names()
    assert len(names) == len(set(names)) > 0
    here = Path(experiments_package().__file__).parent
    public = {f.stem for f in here.glob("*.py") if not f.stem.startswith("_")}
    assert set(names) == public - {"registry", "cache", "stored"}
    costs = [(e.cost_seconds, e.name) for e in registry.experiments()]
    assert costs == sorted(costs)  # cheap first, ties by name


@pytest.mark.parametrize("name", NAMES)
def test_module_follows_the_contract(name):
    e = registry.get(name)
    mod = e.load()
    assert isinstance(mod.TITLE, str) and mod.TITLE.strip() and "\n" not in mod.TITLE
    assert isinstance(mod.IN_PAPER, bool)
    assert isinstance(mod.COST_SECONDS, int | float) and mod.COST_SECONDS > 0
    assert callable(mod.compute) and callable(mod.plot)
    assert mod.PARAMS is not None
    assert set(inspect.signature(mod.compute).parameters) >= {"params", "fast"}
    assert (e.title, e.in_paper, e.cost_seconds) == (mod.TITLE, mod.IN_PAPER, mod.COST_SECONDS)


def test_registry_refuses_a_partial_contract(tmp_path):
    (tmp_path / "half.py").write_text("TITLE = 'half'\nIN_PAPER = False\n")
    with pytest.raises(ValueError, match="must define COST_SECONDS, PARAMS, compute, plot"):
        registry.discover([tmp_path])


@pytest.mark.parametrize("cost", ["float('nan')", "float('inf')", "-1.0", "'60'", "True"])
def test_registry_refuses_a_bad_cost(tmp_path, cost):
    """(a NaN cost would hang the planner of ``figures --workers``: never "free" to start)"""
    (tmp_path / "badcost.py").write_text(
        f"TITLE = 'x'\nIN_PAPER = False\nCOST_SECONDS = {cost}\nPARAMS = None\n"
        "def compute(params, fast=False): pass\ndef plot(df, params): pass\n"
    )
    with pytest.raises(ValueError, match=r"^COST_SECONDS of figure module .*badcost\.py must be a "
                       r"number of seconds in \[0, 1e9\); got "):  # fmt: skip
        registry.discover([tmp_path])


def test_registry_unknown_name():
    with pytest.raises(ValueError, match="figure name must be one of fig1a_tail_miss"):
        registry.get("fig9")


# ------------------------------------------------------------------------------- tail miss


def test_fig1a_table_is_lemma31():
    df = table("fig1a_tail_miss")
    assert sorted(df["rho"].unique()) == [0.05, 0.1, 0.2]
    assert df["N"].min() == 1 and df["N"].max() == 128
    np.testing.assert_allclose(
        df["p_tail_miss"], lemma31(df["N"], df["mu"], df["tau"]), rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(df["p_active"], 1 - 0.3 ** df["N"] - 0.7 ** df["N"], rtol=1e-12)


def test_fig3_stars_sit_at_peak_group_size():
    from fgrpo_theory.plotting import paper_style
    from fgrpo_theory.tail_miss import peak_group_size

    mod = registry.get("fig3_tail_miss_panels").load()
    df = table("fig3_tail_miss_panels")
    with paper_style():
        fig = mod.plot(df, mod.PARAMS)
    stars = [
        (ln.get_xdata()[0], ln.get_ydata()[0])
        for ax in fig.axes
        for ln in ax.lines
        if ln.get_marker() == "*"
    ]
    assert len(stars) == 12
    expected = []
    for mu in (0.8, 0.5, 0.2):
        for rho in (0.01, 0.05, 0.1, 0.2):
            n_star, p_star = brute_argmax(mu, rho * mu, 512)
            res = peak_group_size(mu, rho * mu)
            assert res.n_star == n_star
            expected.append((n_star, p_star))
    for (x, y), (n_star, p_star) in zip(stars, expected, strict=True):
        assert x == n_star
        assert y == pytest.approx(p_star, rel=1e-12)


def test_fig5_plateau_then_fall():
    df = table("fig5_tail_miss_long").sort_values("N")
    assert df["N"].min() == 1 and df["N"].max() == 2**17
    np.testing.assert_allclose(df["p_tail_miss"], lemma31(df["N"], 0.64, 6.3e-5), rtol=1e-9)
    p = df.set_index("N")["p_tail_miss"]
    assert p[2**10] > 0.9  # plateau near 1
    # beyond 2^15 it falls: (1 - 6.3e-5)^(2^17) = exp(-8.26) ~ 2.6e-4
    assert p[2**15] < 0.2 and p[2**17] < 1e-3


def test_map_peak_group_size_against_brute_force():
    df = table("map_peak_group_size")
    assert (df["n_star"] >= 2).all() and ((df["p_peak"] > 0) & (df["p_peak"] < 1)).all()
    sample = df.iloc[:: max(1, len(df) // 12)]
    for r in sample.itertuples():
        n_star, p_star = brute_argmax(r.mu, r.tau, 20_000)
        assert r.n_star == n_star
        assert r.p_peak == pytest.approx(p_star, rel=1e-10)


def test_val_lemma31_monte_carlo_agrees():
    df = table("val_lemma31_monte_carlo")
    np.testing.assert_allclose(
        df["closed_form"], lemma31(df["N"], df["mu"], df["tau"]), rtol=1e-12, atol=1e-15
    )
    assert (df["reps"] == 2000).all()
    assert np.abs(df["z"]).max() < 4.5  # 144 points, fixed seeds
    # the binomial standard error is consistent with the estimate
    np.testing.assert_allclose(
        df["stderr"], np.sqrt(df["estimate"] * (1 - df["estimate"]) / df["reps"]), rtol=1e-12
    )


# ------------------------------------------------------------------------ advantages, published


def test_fig4_magnitudes_by_hand():
    df = table("fig4_focal_magnitudes")
    mu, g = df["mu"], df["gamma"]
    np.testing.assert_allclose(
        df["weighted_abs_adv_pos"], (1 - mu) ** g * np.sqrt((1 - mu) / mu), rtol=1e-12
    )
    np.testing.assert_allclose(
        df["weighted_abs_adv_neg"], (1 - mu) ** g * np.sqrt(mu / (1 - mu)), rtol=1e-12
    )
    assert sorted(g.unique()) == [0.0, 0.5, 1.0]


def test_fig1bc_published_rows():
    df = table("fig1bc_pass_at_k").set_index(["benchmark", "method", "group_size"])
    # Typed from the paper's Table 1 and Table 10 (Qwen2.5-7B)
    assert tuple(df.loc[("AIME25", "F-GRPO", 8), ["pass_at_1", "pass_at_256"]]) == (10.1, 52.6)
    assert tuple(df.loc[("AIME25", "GRPO", 8), ["pass_at_1", "pass_at_256"]]) == (6.7, 40.8)
    assert tuple(df.loc[("AIME25", "GRPO", 2), ["pass_at_1", "pass_at_256"]]) == (8.3, 56.0)
    assert tuple(df.loc[("IFEval", "F-GRPO", 8), ["pass_at_1", "pass_at_256"]]) == (34.0, 75.7)
    assert len(df) == 8


def test_group_size_sweep_published_values():
    df = table("group_size_sweep_published")
    nll = df[df["quantity"] == "rare_nll"].set_index(["method", "N"])["value"]
    # theory.md section 9
    assert nll[("GRPO", 2)] == 0.19 and nll[("GRPO", 4)] == 0.44 and nll[("GRPO", 8)] == 0.68
    assert nll[("GRPO", 16)] == 0.66 and nll[("GRPO", 32)] == 0.52 and nll[("F-GRPO", 8)] == 0.46
    p256 = df[(df["quantity"] == "pass_at_256") & (df["benchmark"] == "Math avg")]
    p256 = p256.set_index(["method", "N"])["value"]
    assert p256[("GRPO", 8)] == 64.1 and p256[("F-GRPO", 8)] == 70.3
    tm = df[df["quantity"] == "p_tail_miss"]
    np.testing.assert_allclose(tm["value"], lemma31(tm["N"], 0.3, 0.3 * tm["rho"]), rtol=1e-12)


# ---------------------------------------------------------------------------------- mass


def test_val_prop32_first_order_vs_exact():
    df = table("val_prop32_first_order")
    d = df[df["panel"] == "eta"]
    for q in ("Q_pos", "Q_u"):
        fo = d[(d["quantity"] == q) & (d["method"] == "first_order")].sort_values("eta")
        ex = d[(d["quantity"] == q) & (d["method"] == "exact")].sort_values("eta")
        gap = np.abs(fo["value"].to_numpy() - ex["value"].to_numpy())
        eta = fo["eta"].to_numpy()
        slope = np.log(gap[1] / gap[0]) / np.log(eta[1] / eta[0])  # smallest two etas
        assert slope == pytest.approx(2.0, abs=0.05)
    e = df[df["panel"] == "expectation"]
    for q in ("dq_pos_first_order", "dq_pos_exact", "dq_unsampled_correct_exact"):
        en = e[(e["quantity"] == q) & (e["method"] == "enumeration")].set_index("N")
        mc = e[(e["quantity"] == q) & (e["method"] == "monte_carlo")].set_index("N")
        common = en.index.intersection(mc.index)
        z = (mc.loc[common, "value"] - en.loc[common, "value"]) / mc.loc[common, "se"]
        assert np.abs(z).max() < 4.5
    # Prop. 3.2 on this high-success policy: Q_pos grows, unsampled correct mass shrinks
    en = e[e["method"] == "enumeration"].set_index(["quantity", "N"])["value"]
    assert en[("dq_pos_exact", 4)] > 0 and en[("dq_unsampled_correct_exact", 4)] < 0


def test_drift_threshold_by_hand():
    df = table("drift_threshold")
    mod = registry.get("drift_threshold").load()
    m = df[df["panel"] == "map"].iloc[[0, len(df[df["panel"] == "map"]) // 2, -1]]
    for r in m.itertuples():
        z, corr = mod.two_level_policy(r.mu, r.anchor_share, 9_999, 118_000)
        p = np.exp(z - z.max())
        p /= p.sum()
        mu = p[corr].sum()
        assert mu == pytest.approx(r.mu, rel=1e-12)
        assert p[0] / mu == pytest.approx(r.anchor_share, rel=1e-9)
        thr = (p[corr] ** 2).sum() / mu - (p[~corr] ** 2).sum() / (1 - mu)  # section 6
        assert r.threshold == pytest.approx(thr, rel=1e-9)
    g = df[df["panel"] == "graded"]
    # E[dp_j] / (eta h p_j) = share - T: a straight line in the share
    np.testing.assert_allclose(g["value"], g["share"] - g["threshold"], rtol=1e-9, atol=1e-15)
    h = df[(df["panel"] == "h") & (df["gamma"] == 0.0) & (df["N"] == 2)]
    for r in h.itertuples():
        # N = 2, gamma = 0: h = P(X = 1) sqrt(1) / 2 = mu (1 - mu)
        assert r.value == pytest.approx(r.mu * (1 - r.mu), rel=1e-9)


# ---------------------------------------------------------------------------- simulation


def test_regimes_rule():
    from fgrpo_theory_experiments._sim import regimes

    n = np.array([2, 8, 32, 128, 512, 2048])
    assert regimes(n, np.array([1.0, 0.9, 0.4, 0.1, 0.6, 0.95])) == [
        ("I", 2 / 1.5, 16.0),
        ("II", 16.0, 256.0),  # sqrt(8 * 32), sqrt(128 * 512)
        ("III", 256.0, 2048 * 1.5),
    ]
    assert regimes(n, np.ones(6)) == []
    assert [b[0] for b in regimes(n, np.array([0.1, 0.2, 0.9, 0.9, 0.9, 0.9]))] == ["II", "III"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fig2_simulation", "fig2_linear_adamw"])
def test_fig2_fast(name):
    df = table(name)
    q0 = df[(df["metric"] == "q_pos") & (df["step"] == 0)]["mean"]
    e = math.exp
    mu0 = (e(5) + 9999 * e(3)) / (e(5) + 9999 * e(3) + 118000)  # appendix J start
    np.testing.assert_allclose(q0, mu0, rtol=1e-9)
    m0 = df[(df["metric"] == "m_ret") & (df["step"] == 0)]["mean"]
    np.testing.assert_allclose(m0, 1.0)
    assert sorted(df["gamma"].unique()) == [0.0, 1.0]
    assert sorted(df["N"].unique()) == [2, 32, 256, 2048, 8192, 131072]
    assert df["step"].max() == 100 and (df["seeds"] == 1).all()
    assert ((df["mean"] >= 0) & (df["mean"] <= 1 + 1e-12)).all()


@pytest.mark.slow
def test_fig2_sgd_vs_adam_fast():
    df = table("fig2_sgd_vs_adam")
    last = df[(df["step"] == df["step"].max()) & (df["metric"] == "q_pos")]
    sgd_small = last[(last["optimizer"] == "sgd") & (last["lr"] == 1e-2)]
    # lr 1e-2 SGD on log-prob gradients of order p ~ 1e-4: the policy barely moves
    e = math.exp
    mu0 = (e(5) + 9999 * e(3)) / (e(5) + 9999 * e(3) + 118000)
    assert np.abs(sgd_small["mean"] - mu0).max() < 2e-3
    assert set(df["optimizer"]) == {"adam", "sgd"}
    assert sorted(df[df["optimizer"] == "sgd"]["lr"].unique()) == [0.01, 1.0, 10.0]


# ------------------------------------------------------------------- files and reproducibility


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_experiment_draws_in_fast_mode(tmp_path, name):
    """Each figure is produced (PNG and PDF, non-empty) from its fast-mode table."""
    e = registry.get(name)
    if e.cost_seconds > 30 and name not in _TABLES:  # (the simulation figures: 45 s and more)
        pytest.skip("simulation figure: covered by the slow tests above when they run")
    res = registry.run(name, tmp_path, ("pdf", "png"), fast=True, dpi=200)
    assert [p.suffix for p in res.paths] == [".pdf", ".png"]
    for p in res.paths:
        assert p.stat().st_size > 5000, p


def test_rerun_gives_identical_bytes(tmp_path):
    a = registry.run("fig1a_tail_miss", tmp_path / "a", fast=True, dpi=200)
    b = registry.run("fig1a_tail_miss", tmp_path / "b", fast=True, dpi=200, force=True)
    c = registry.run("fig1a_tail_miss", tmp_path / "c", fast=True, dpi=200)
    assert c.cache_hit and not b.cache_hit
    for pa, pb, pc in zip(a.paths, b.paths, c.paths, strict=True):
        assert pa.read_bytes() == pb.read_bytes() == pc.read_bytes()


def test_fast_figures_are_marked(tmp_path):
    from fgrpo_theory.plotting import paper_style

    mod = registry.get("fig4_focal_magnitudes").load()
    with paper_style():
        fig = mod.plot(table("fig4_focal_magnitudes"), mod.PARAMS)
    assert not any("FAST PREVIEW" in t.get_text() for t in fig.texts)
    registry.run("fig4_focal_magnitudes", tmp_path, ("png",), fast=True, dpi=200)


def test_cache_key():
    from fgrpo_theory_experiments.cache import cache_path, params_key

    mod = registry.get("fig1a_tail_miss").load()
    k = params_key("fig1a_tail_miss", mod.PARAMS, False)
    assert k == params_key("fig1a_tail_miss", mod.PARAMS, False)
    assert k != params_key("fig1a_tail_miss", mod.PARAMS, True)
    other = mod.Params(rho=(0.05, 0.1))
    assert k != params_key("fig1a_tail_miss", other, False)
    assert cache_path("fig1a_tail_miss", mod.PARAMS, True).name.startswith("fig1a_tail_miss-fast-")
    assert k != params_key("fig1a_tail_miss", mod.PARAMS, False, code="abc")


def test_code_digest_follows_the_import_graph(tmp_path):
    from fgrpo_theory_experiments.cache import import_closure, source_digest

    fig2 = {p.name for p in import_closure(registry.get("fig2_simulation").path)}
    assert {"fig2_simulation.py", "_fig2.py", "_sim.py", "_common.py"} <= fig2
    assert {"runner.py", "kernels.py", "config.py", "sweep.py"} <= fig2  # the simulator
    assert "plotting.py" not in fig2 and "figures.py" not in fig2
    fig3 = {p.name for p in import_closure(registry.get("fig3_tail_miss_panels").path)}
    assert {"fig3_tail_miss_panels.py", "_tables.py", "tail_miss.py"} <= fig3
    assert "kernels.py" not in fig3 and "fig1a_tail_miss.py" not in fig3
    # ``import fgrpo_theory`` to read ``__version__`` or ``__file__`` does not bring the lazily
    # loaded catalogue (every module): the Fig. 2 tables do not depend on the sequence rung or
    # the trainer integrations, the sequence tables do depend on the sequence rung
    paths = {p.as_posix() for p in import_closure(registry.get("fig2_simulation").path)}
    assert not any("/sequence/" in p or "/integrations/" in p for p in paths)
    seq = {p.as_posix() for p in import_closure(registry.get("sequence_theory").path)}
    assert any(p.endswith("sequence/rl.py") for p in seq)
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    d1 = source_digest([a, b])
    assert d1 == source_digest([b, a])
    a.write_text("x = 2\n")
    assert source_digest([a, b]) != d1


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A private copy of the experiments package, importable as ``exps_copy`` (edits to its
    files touch nothing in the repository)."""
    src = Path(experiments_package().__file__).parent
    dst = tmp_path / "exps_copy"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("data", "__pycache__"))
    spec = importlib.util.spec_from_file_location(
        "exps_copy", dst / "__init__.py", submodule_search_locations=[str(dst)]
    )
    pkg = importlib.util.module_from_spec(spec)
    sys.modules["exps_copy"] = pkg
    spec.loader.exec_module(pkg)
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))
    yield importlib.import_module("exps_copy.registry")
    for k in [k for k in sys.modules if k == "exps_copy" or k.startswith("exps_copy.")]:
        del sys.modules[k]


def test_editing_a_shared_table_invalidates_every_figure_using_it(package_copy, tmp_path):
    """Issue 9 item 5: Fig. 3 takes its table from a function defined in another module; editing
    that module must make ``figures fig3_tail_miss_panels`` recompute, not report "cached"."""
    reg = package_copy
    name = "fig3_tail_miss_panels"
    assert not reg.run(name, tmp_path / "o", ("png",), dpi=200).cache_hit
    assert reg.run(name, tmp_path / "o", ("png",), dpi=200).cache_hit
    unrelated = Path(reg.get("fig4_focal_magnitudes").path)
    unrelated.write_text(unrelated.read_text() + "\n# an unrelated edit\n")
    assert reg.run(name, tmp_path / "o", ("png",), dpi=200).cache_hit
    fig3 = reg.get(name).load()
    shared = Path(inspect.getsourcefile(fig3.tail_miss_table))
    assert shared.parent == Path(fig3.__file__).parent
    shared.write_text(shared.read_text() + "\n# an edit of the shared table\n")
    assert not reg.run(name, tmp_path / "o", ("png",), dpi=200).cache_hit


def test_a_figure_module_in_a_temporary_folder_renders(tmp_path, monkeypatch, cli):
    """Adding a figure is adding one module: found through $FGRPO_THEORY_FIGURES_PATH, listed,
    drawn, cached, with no other file touched."""
    folder = tmp_path / "my_figures"
    folder.mkdir()
    (folder / "my_square.py").write_text(
        '''"""A test figure: y = x^2."""
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fgrpo_theory_experiments._common import footnote

TITLE = "Squares (a figure added by a test)"
IN_PAPER = False
COST_SECONDS = 0.5


@dataclass(frozen=True)
class Params:
    n: int = 9


PARAMS = Params()


def compute(params=PARAMS, fast=False):
    x = np.arange(params.n if not fast else 3, dtype=float)
    return pd.DataFrame({"x": x, "y": x**2})


def plot(df, params=PARAMS):
    from fgrpo_theory.plotting import new_figure

    fig = new_figure()
    fig.subplots().plot(df["x"], df["y"], marker="o")
    footnote(fig, "y = x^2")
    return fig
'''
    )
    (folder / "_helper.py").write_text("raise RuntimeError('helpers are never imported')\n")
    monkeypatch.setenv("FGRPO_THEORY_FIGURES_PATH", str(folder))
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))
    assert registry.names()[0] == "my_square"  # the cheapest
    r = cli("figures", "list", "--format", "csv")
    assert r.code == 0, r.err
    assert "my_square,False,0.5,Squares (a figure added by a test)" in r.out.splitlines()
    out = tmp_path / "out"
    r = cli("figures", "my_square", "--out", out, "--figure-format", "png,pdf", "--dpi", "200")
    assert r.code == 0, r.err
    assert "my_square: computed" in r.err
    assert sorted(p.name for p in out.iterdir()) == ["my_square.pdf", "my_square.png"]
    r = cli("figures", "my_square", "--out", out, "--figure-format", "png", "--dpi", "200")
    assert "my_square: cached" in r.err
    (folder / "my_square.py").write_text((folder / "my_square.py").read_text() + "# edit\n")
    r = cli("figures", "my_square", "--out", out, "--figure-format", "png", "--dpi", "200")
    assert "my_square: computed" in r.err


def test_fig2_companion_caption_names_the_logging_interval():
    """The caption's "every n-th step" in English ordinals (it said "every 1th step" for n = 1)."""
    from fgrpo_theory_experiments.fair_fig2_companion import Params, _every

    said = {n: _every(Params(trace_every=n)) for n in (1, 2, 3, 4, 5, 11, 12, 13, 21, 22, 103)}
    assert said == {
        1: "every step", 2: "every 2nd step", 3: "every 3rd step", 4: "every 4th step",
        5: "every 5th step", 11: "every 11th step", 12: "every 12th step",
        13: "every 13th step", 21: "every 21st step", 22: "every 22nd step",
        103: "every 103rd step",
    }  # fmt: skip
