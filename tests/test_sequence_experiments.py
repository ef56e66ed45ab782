"""The sequence-rung experiments end to end in their reduced configuration (what CI runs).

Each ``experiments/sequence_*.py`` computes its fast table (the ``smoke`` model, 2 task draws),
draws its figure, and the tables are checked against oracles that do not share code with the
library: Lemma 3.1 written out here, hand counts of events, medians by NumPy, and the identity
that GRPO progress-matched against its own ladder is GRPO itself (rung lr x 1 is the same run).
The figures are byte-identical when recomputed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from fgrpo_theory.cli._experiments import experiments_package  # noqa: E402

experiments_package()
from fgrpo_theory_experiments import registry  # noqa: E402

NAMES = [n for n in registry.names() if n.startswith("sequence_")]
_TABLES: dict[str, pd.DataFrame] = {}


@pytest.fixture(scope="module", autouse=True)
def _tmp_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


def table(name: str) -> pd.DataFrame:
    from fgrpo_theory_experiments.cache import cached

    if name not in _TABLES:
        mod = registry.get(name).load()
        _TABLES[name] = cached(
            name, mod.PARAMS, lambda: mod.compute(mod.PARAMS, fast=True), fast=True
        )[0]
    return _TABLES[name]


def test_the_four_experiments_are_registered_and_stored():
    assert set(NAMES) >= {"sequence_group_size", "sequence_single_focal", "sequence_arena",
                          "sequence_theory"}  # fmt: skip
    for n in NAMES:
        assert getattr(registry.get(n).load(), "STORED", False)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_fast_figure_end_to_end(tmp_path, name):
    table(name)
    res = registry.run(name, tmp_path, ("pdf", "png"), fast=True, dpi=200)
    assert [p.suffix for p in res.paths] == [".pdf", ".png"]
    assert all(p.stat().st_size > 5000 for p in res.paths)


@pytest.mark.slow
def test_fast_figure_is_byte_identical_on_recompute(tmp_path):
    a = registry.run("sequence_theory", tmp_path / "a", ("png", "pdf"), fast=True, dpi=200)
    b = registry.run("sequence_theory", tmp_path / "b", ("png", "pdf"), fast=True, dpi=200,
                     force=True)  # fmt: skip
    assert not b.cache_hit
    for p, q in zip(a.paths, b.paths, strict=True):
        assert p.read_bytes() == q.read_bytes()


@pytest.mark.slow
def test_theory_table_against_lemma_written_out():
    df = table("sequence_theory")
    mod = registry.get("sequence_theory").load()
    N = int(df["N"].iloc[0])
    mu, tau = df["mu"].to_numpy(), df["tau"].to_numpy()
    lemma = (1 - tau) ** N - (mu - tau) ** N - (1 - mu) ** N
    np.testing.assert_allclose(df["p_lemma"], lemma, rtol=1e-9, atol=1e-12)
    assert ((df["tau"] <= df["mu"] + 1e-12) & (df["q_u"] <= df["mu"] + 1e-12)).all()
    lt = mod.lemma_table(df)
    pooled = lt[lt.level == "pooled"].iloc[0]
    g = df[df["has_rare"]]
    active = (g["X"] > 0) & (g["X"] < N)
    assert pooled.observed == ((active & (g["rare_hits"] == 0)).sum()) / len(g)
    assert pooled.predicted == pytest.approx(lemma[df["has_rare"].to_numpy()].mean())
    assert pooled.se == pytest.approx(np.sqrt((lemma * (1 - lemma))[df["has_rare"]].sum()) / len(g))
    pr = mod.prop32_table(df)
    a = df[(df["X"] > 0) & (df["X"] < N) & (df["q_u"] > 0)]
    row = pr[pr["bin"] == "all"].iloc[0]
    both = (a["q_u_after"] < a["q_u"]) & (a["mu_after"] > a["mu"])
    assert row.groups == len(a) and row.share_qu_down_mu_up == both.mean()
    assert row.lo <= row.share_qu_down_mu_up <= row.hi


@pytest.mark.slow
def test_group_size_levels_are_medians_of_the_runs():
    df = table("sequence_group_size")
    mod = registry.get("sequence_group_size").load()
    runs = df[df.role == "arm"]
    s = mod.summary(df)
    for (n, split), e in runs.groupby(["N", "split"]):
        r = s[(s.N == n) & (s.split == split) & (s.metric == "pass_at_1")].iloc[0]
        assert r["median"] == pytest.approx(np.median(e["pass_at_1"]))
        assert r.lo <= r["median"] <= r.hi
    k = runs[["pass_at_1", "pass_at_16", "pass_at_256"]].to_numpy()
    assert (np.diff(k, axis=1) >= -1e-12).all()  # pass@k grows with k


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sequence_arena", "sequence_single_focal"])
def test_grpo_matched_against_its_own_ladder_is_itself(name):
    df = table(name)
    mod = registry.get(name).load()
    from fgrpo_theory.sequence.study import match_controls

    m = match_controls(df)
    for arm in {a for a in m.arm if a.startswith("grpo")}:
        e = m[m.arm == arm].sort_values(["role", "population_seed", "seed_index", "split"])
        a, c = e[e.role == "arm"], e[e.role == "control"]
        np.testing.assert_allclose(a["pass_at_1"].to_numpy(), c["pass_at_1"].to_numpy(),
                                   rtol=0, atol=1e-12)  # fmt: skip
        assert (c["lr_factor"] == 1.0).all() and c["matched"].all()
    sm = mod.summary(df)
    assert {"median", "lo", "hi", "draw_diffs"} <= set(sm.columns)
