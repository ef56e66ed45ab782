"""Defects a hostile review of the log diagnosis, the pass@k test and the CLI found (issue 10).

Oracles: the Beta moments B(a + k, b) / B(a, b) (scipy.special.betaln, independent of the
quadrature), hand-written logs and count files, and the exact words of the options typed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import betaln

from fgrpo_theory.cli import main
from fgrpo_theory.diagnose import diagnose, fit_beta_binomial, read_log
from fgrpo_theory.diagnose import fit as fit_mod
from fgrpo_theory.diagnose.fit import beta_atoms
from fgrpo_theory.significance import compare_passk

REPO = Path(__file__).resolve().parents[1]


def _one_line_error(capsys, argv, expected_start):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("Error: " + expected_start), err


# -- the Beta quadrature of a near point mass ------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b"), [(2.0, 5.0), (0.3, 0.7), (1e-3, 2.0), (7321.0, 7321.0), (1e5, 3e4)]
)
def test_beta_atoms_reproduce_beta_moments(a, b):
    """E[mu^k] and E[(1 - mu)^k] of the atoms equal the Beta's, also for a + b in the thousands
    (where scipy's roots_jacobi returned NaN and diagnose failed)."""
    mu, w = beta_atoms(a, b)
    assert np.isfinite(mu).all() and np.isfinite(w).all() and abs(w.sum() - 1) < 1e-14
    for k in (1, 2, 8, 64, 399):
        exact = np.exp(betaln(a + k, b) - betaln(a, b))
        exact_c = np.exp(betaln(a, b + k) - betaln(a, b))
        assert abs(np.sum(w * mu**k) - exact) <= 1e-9 * exact + 1e-15
        assert abs(np.sum(w * (1 - mu) ** k) - exact_c) <= 1e-9 * exact_c + 1e-15


def test_diagnose_a_homogeneous_log_without_nan_or_warnings():
    """Every prompt with the same success rate: the Beta fit runs to a near point mass."""
    rng = np.random.default_rng(7)
    groups = pd.DataFrame(
        {"prompt": [f"q{i}" for i in range(400)], "step": 0, "n": 8,
         "n_correct": rng.binomial(8, 0.3, 400)}
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = diagnose(groups, rho=[0.05], gamma=[1.0], bootstrap=20)
    vals = rep["value"].dropna().to_numpy(dtype=float)
    assert np.isfinite(vals).all()
    a = rep.loc[rep.quantity == "beta_a", "value"].iloc[0]
    b = rep.loc[rep.quantity == "beta_b", "value"].iloc[0]
    assert abs(a / (a + b) - 0.3) < 0.02 and a + b > 50  # concentrated near mu = 0.3
    pred = rep.loc[rep.quantity == "active_fraction_predicted", "value"].iloc[0]
    assert abs(pred - (1 - 0.3**8 - 0.7**8)) < 0.01


# -- bounded work: per distinct (n, x) pair -------------------------------------------------
def test_work_is_per_distinct_pair_and_bounded(monkeypatch):
    n = np.full(200_000, 8)
    x = np.random.default_rng(3).binomial(8, 0.4, n.size)
    nn, xx, cnt, inv = fit_mod.group_pairs(n, x)
    assert nn.size <= 9 and cnt.sum() == n.size
    assert np.array_equal(nn[inv], n) and np.array_equal(xx[inv], x)
    monkeypatch.setattr(fit_mod, "MAX_PAIRS", 5)
    with pytest.raises(ValueError, match=r"^LOG must be at most 5; got '9 distinct"):
        fit_mod.group_pairs(n, x)


def test_diagnose_memory_does_not_grow_with_groups_x_grid():
    """100,000 groups: the old groups x 201 matrix alone was 160 MB; now memory is per pair."""
    import tracemalloc

    rng = np.random.default_rng(11)
    G = 100_000
    g = pd.DataFrame({"prompt": [f"q{i % 5000}" for i in range(G)], "step": 0, "n": 8,
                      "n_correct": rng.binomial(8, rng.beta(2, 5, G))})  # fmt: skip
    tracemalloc.start()
    diagnose(g, rho=0.05, gamma=1.0, bootstrap=2)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 100e6, peak


def test_diagnose_does_not_depend_on_blas_threads(tmp_path):
    """Same bytes with 1 and 4 BLAS threads (sums are explicit, never BLAS's)."""
    rng = np.random.default_rng(5)
    mu = rng.beta(2, 5, 300)
    log = pd.DataFrame(
        {"prompt": np.repeat([f"p{i}" for i in range(300)], 4), "step": np.tile(range(4), 300),
         "n": 8, "n_correct": rng.binomial(8, np.repeat(mu, 4))}
    )  # fmt: skip
    path = tmp_path / "log.csv"
    log.to_csv(path, index=False)
    outs = []
    for t in ("1", "4"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=t, OMP_NUM_THREADS=t, MKL_NUM_THREADS=t,
                   PYTHONPATH=str(REPO))  # fmt: skip
        r = subprocess.run(
            [sys.executable, "-c", "import sys; from fgrpo_theory.cli import main; "
             "sys.exit(main(sys.argv[1:]))", "diagnose", str(path), "--bootstrap", "10",
             "--format", "csv"],
            capture_output=True, text=True, env=env, timeout=300, check=True,
        )  # fmt: skip
        outs.append(r.stdout)
    assert outs[0] == outs[1] and len(outs[0]) > 500


# -- library arguments -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("n", "x", "message"),
    [
        ([8, 8, 8], [1, -2, 3], r"^x must be >= 0; got -2$"),
        ([8, 8, 8], [1, 9, 3], r"^x must be <= n \(group 1 has n = 8\); got 9$"),
        ([8, 0, 8], [1, 0, 3], r"^n must be >= 1; got 0$"),
        ([8, 8, 8], [1, np.nan, 3], r"^x must be a finite number"),
        ([8, 8], [1, 2, 3], r"^x must be one count per group size"),
    ],
)
def test_fit_beta_binomial_refuses_bad_counts(n, x, message):
    with pytest.raises(ValueError, match=message):
        fit_beta_binomial(n, x)


def test_fit_beta_binomial_takes_lists():
    f = fit_beta_binomial([8, 8, 8, 8], [1, 4, 6, 2])
    assert f.a > 0 and f.b > 0


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        (
            [1, 2],
            r"^groups must be a DataFrame with columns prompt, step, n, n_correct; got 'list'",
        ),
        (
            pd.DataFrame({"prompt": ["a"], "n": [8]}),
            r"^groups must be .*\(missing step, n_correct\)",
        ),
    ],
)
def test_diagnose_refuses_what_is_not_a_group_table(groups, message):
    with pytest.raises(ValueError, match=message):
        diagnose(groups)


# -- reading logs ----------------------------------------------------------------------------
def test_columns_onto_an_existing_name_is_refused(tmp_path, capsys):
    p = tmp_path / "log.csv"
    p.write_text("prompt,step,n,group,n_correct\nq,0,8,4,2\nr,0,8,4,1\n")
    _one_line_error(
        capsys, ["diagnose", str(p), "--columns", "n=group"],
        "--columns must be a new name that is not already a column of the file",
    )  # fmt: skip
    g = read_log(p, columns={"n_orig": "n", "n": "group"})  # mapping the old one away works
    assert g["n"].tolist() == [4, 4]


def test_blank_prompt_is_refused_and_a_prompt_called_NA_is_kept(tmp_path, capsys):
    p = tmp_path / "blank.csv"
    p.write_text("prompt,step,n,n_correct\nq,0,8,2\n,0,8,1\nr,0,8,3\n")
    _one_line_error(capsys, ["diagnose", str(p)], "prompt must be an id in every row (row 2")
    p.write_text("prompt,step,n,n_correct\nNA,0,8,2\nnull,0,8,1\nq,0,8,5\n")
    assert sorted(read_log(p)["prompt"]) == ["NA", "null", "q"]


def test_threshold_errors_name_the_threshold(tmp_path, capsys):
    per_group = tmp_path / "g.csv"
    per_group.write_text("prompt,step,n,n_correct\nq,0,8,2\nr,0,8,1\n")
    _one_line_error(
        capsys, ["diagnose", str(per_group), "--threshold", "0.5"],
        "--threshold must be given only for a per-rollout log",
    )  # fmt: skip
    per_rollout = tmp_path / "r.csv"
    per_rollout.write_text("prompt,step,reward\np,0,1\np,0,0\nq,0,1\nq,0,0\n")
    _one_line_error(
        capsys, ["diagnose", str(per_rollout), "--threshold", "nan"],
        "--threshold must be a finite number; got nan",
    )  # fmt: skip


def test_plot_reports_the_path_it_wrote(tmp_path, capsys):
    rng = np.random.default_rng(1)
    p = tmp_path / "log.csv"
    pd.DataFrame({"prompt": [f"q{i}" for i in range(50)], "step": 0, "n": 8,
                  "n_correct": rng.binomial(8, 0.4, 50)}).to_csv(p, index=False)  # fmt: skip
    plot = tmp_path / "up.PNG"
    assert main(["diagnose", str(p), "--bootstrap", "0", "--plot", str(plot), "--format",
                 "csv"]) == 0  # fmt: skip
    err = capsys.readouterr().err
    written = [f for f in tmp_path.iterdir() if f.stem == "up"]
    assert len(written) == 1 and f"wrote plot to {written[0]}" in err, (written, err)


# -- the pass@k test -------------------------------------------------------------------------
def test_significant_is_the_reported_p_value_below_alpha():
    """At 100 iterations the interval and the +1-corrected p-value disagreed for some seeds."""
    rng = np.random.default_rng(1)
    n = np.full(40, 64)
    ca, cb = rng.binomial(64, 0.3, 40), rng.binomial(64, 0.33, 40)
    for s in range(60):
        r = compare_passk(n, ca, n, cb, [1], m=16, iterations=100, alpha=0.05, seed=s)
        assert r["significant"][0] == (r["p_value"][0] <= 0.05)


def test_compare_passk_refuses_tables_that_would_not_fit():
    n = np.array([10**12, 10**12])
    with pytest.raises(ValueError, match=r"^m must be such that \(distinct \(n, c\) pairs"):
        compare_passk(n, [1, 2], n, [3, 4], [1], m=10**9, iterations=100)


def test_compare_passk_files_blank_problem_and_c_above_n(tmp_path, capsys):
    good = tmp_path / "a.csv"
    good.write_text("problem,n,c\np1,64,1\np2,64,3\n")
    blank = tmp_path / "blank.csv"
    blank.write_text("problem,n,c\n,64,1\np2,64,3\n")
    _one_line_error(
        capsys, ["compare-passk", str(blank), str(good), "--m", "2", "--k", "1"],
        "problem must be an id in every row (row 1",
    )  # fmt: skip
    above = tmp_path / "gt.csv"
    above.write_text("problem,n,c\np1,64,70\np2,64,3\n")
    _one_line_error(
        capsys, ["compare-passk", str(above), str(good), "--m", "2", "--k", "1"],
        "A must be a file with c <= n; got 'c = 70 > n = 64 for problem p1'",
    )  # fmt: skip


# -- the CLI names the option the user typed ---------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["diagnose", "LOG", "--compute", "1"], "--compute must be >= 2; got 1"),
        (["diagnose", "LOG", "--by-step", "0"], "--by-step must be >= 1; got 0"),
        (["diagnose", "LOG", "--bootstrap", "-1"], "--bootstrap must be >= 0; got -1"),
        (["diagnose", "LOG", "--lr", "-1"], "--lr must be > 0"),
        (["simulate", "--lr", "-1", "--steps", "2"], "--lr must be > 0"),
        (["simulate", "--max-resamples", "0", "--steps", "2"], "--max-resamples must be >= 1"),
        (
            ["compare-passk", "A", "A", "--m", "2", "--k", "1", "--iterations", "5"],
            "--iterations must be >= 100; got 5",
        ),
        (
            ["compare-passk", "A", "A", "--m", "2", "--k", "1", "--alpha", "2"],
            "--alpha must be in (0, 1); got 2.0",
        ),
        (["population", "--preset", "quick", "--steps", "0"], "--steps must be >= 1; got 0"),
    ],
)
def test_errors_name_the_option_typed(tmp_path, capsys, argv, expected):
    log = tmp_path / "log.csv"
    log.write_text("prompt,step,n,n_correct\nq,0,8,2\nr,0,8,5\ns,0,8,1\n")
    counts = tmp_path / "a.csv"
    counts.write_text("problem,n,c\np1,64,1\np2,64,3\n")
    argv = [str(log) if a == "LOG" else str(counts) if a == "A" else a for a in argv]
    _one_line_error(capsys, argv, expected)


# -- fair-comparison arguments ---------------------------------------------------------------
def test_fair_functions_refuse_wrong_types_in_one_line():
    from fgrpo_theory import fair

    with pytest.raises(ValueError, match=r"^config must be a SimConfig; got 'x'$"):
        fair.run_comparison("x")
    with pytest.raises(ValueError, match=r"^metrics must be the DataFrame that run_comparison"):
        fair.paired_differences("x")
    with pytest.raises(ValueError, match=r"^a must be a 1-D array of per-seed values; got 'ab'$"):
        fair.paired_bootstrap_interval("ab", [1.0, 2.0])
    with pytest.raises(ValueError, match=r"^b must be a 1-D array of per-seed numbers"):
        fair.paired_bootstrap_interval([1.0, 2.0], [object(), 1.0])
