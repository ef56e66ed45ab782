"""``diagnose``: reading logs, the beta-binomial and grid fits, and the report (issue 13 part 1).

Oracles: synthetic logs drawn at fixed seeds from known Beta distributions (the truth is known),
the closed form Pr(active) = 1 - B(a+N, b)/B(a, b) - B(a, b+N)/B(a, b) against Monte Carlo, direct
enumeration of the beta-binomial likelihood, and hand-written bad inputs.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import betaln, comb

from fgrpo_theory.cli import main
from fgrpo_theory.diagnose import (
    beta_active_fraction,
    diagnose,
    fit_beta_binomial,
    fit_npmle,
    read_log,
    to_groups,
)


def synthetic_log(a=2.0, b=5.0, prompts=960, steps=8, N=8, seed=2026) -> pd.DataFrame:
    """Each prompt has mu ~ Beta(a, b) and one group of N rollouts per step."""
    rng = np.random.default_rng(seed)
    mu = rng.beta(a, b, prompts)
    return pd.DataFrame(
        {
            "prompt": np.repeat([f"q{i:04d}" for i in range(prompts)], steps),
            "step": np.tile(np.arange(steps), prompts),
            "n": N,
            "n_correct": rng.binomial(N, np.repeat(mu, steps)),
        }
    )


def _row(rep: pd.DataFrame, q: str, param: str = "") -> pd.Series:
    sel = rep[(rep.quantity == q) & (rep.parameter == param) & (rep.window == "all")]
    assert len(sel) == 1, q
    return sel.iloc[0]


def test_done_when_beta_2_5_recovered_within_intervals():
    log = synthetic_log()
    rep = diagnose(log, rho=[0.05], gamma=[1.0], bootstrap=200, seed=1)
    for q, truth in (("beta_a", 2.0), ("beta_b", 5.0)):
        r = _row(rep, q)
        assert r.ci_low <= truth <= r.ci_high, (q, r.value, r.ci_low, r.ci_high)
    obs = _row(rep, "active_fraction_observed").value
    pred = _row(rep, "active_fraction_predicted").value
    assert abs(obs - pred) < 0.01
    # the plug-in estimate X/N overstates the spread: its active fraction is visibly off
    x = log.n_correct / log.n
    m, v = x.mean(), x.var()
    s = m * (1 - m) / v - 1
    plug = beta_active_fraction(m * s, (1 - m) * s, 8)
    assert abs(plug - obs) > 0.02


def test_active_fraction_closed_form_against_monte_carlo():
    rng = np.random.default_rng(5)
    mu = rng.beta(0.7, 1.9, 400_000)
    x = rng.binomial(16, mu)
    mc = np.mean((x > 0) & (x < 16))
    se = np.sqrt(mc * (1 - mc) / mu.size)
    assert abs(beta_active_fraction(0.7, 1.9, 16) - mc) < 4 * se


def test_beta_fit_maximises_the_enumerated_likelihood():
    log = synthetic_log(a=0.6, b=1.4, prompts=300, steps=2, N=6, seed=3)
    n, x = log.n.to_numpy(), log.n_correct.to_numpy()
    fit = fit_beta_binomial(n, x)

    def ll(a, b):  # direct sum over groups
        return float(np.sum(np.log(comb(n, x)) + betaln(x + a, n - x + b) - betaln(a, b)))

    assert abs(fit.loglik - ll(fit.a, fit.b)) < 1e-8
    for da, db in ((0.02, 0), (-0.02, 0), (0, 0.02), (0, -0.02)):
        assert ll(fit.a + da, fit.b + db) < fit.loglik


def test_npmle_finds_a_two_point_mixture():
    # mu in {0.1, 0.8} with weights 0.7 / 0.3: no Beta has this shape
    rng = np.random.default_rng(11)
    mu = np.where(rng.random(3000) < 0.7, 0.1, 0.8)
    x = rng.binomial(16, mu)
    n = np.full_like(x, 16)
    prompts = np.arange(x.size)
    mix = fit_npmle(n, x, prompts)
    beta = fit_beta_binomial(n, x, prompts)
    assert mix.loglik > beta.loglik + 50
    low = mix.weights[mix.mu < 0.45].sum()
    assert abs(low - 0.7) < 0.03
    assert abs(np.sum(mix.weights * mix.mu) - (0.7 * 0.1 + 0.3 * 0.8)) < 0.01
    rep = diagnose(
        pd.DataFrame({"prompt": prompts, "step": 0, "n": n, "n_correct": x}),
        rho=[0.1],
        gamma=[1.0],
        bootstrap=0,
    )
    assert _row(rep, "preferred_fit").note.startswith("npmle")


def test_mixed_group_sizes_keep_their_own_n():
    rng = np.random.default_rng(8)
    mu = rng.beta(2, 3, 2000)
    n = rng.choice([4, 8, 16], size=mu.size)
    x = rng.binomial(n, mu)
    log = pd.DataFrame({"prompt": np.arange(mu.size), "step": 0, "n": n, "n_correct": x})
    rep = diagnose(log, rho=[0.1], gamma=[0.5], bootstrap=0)
    exp = np.mean(beta_active_fraction(_row(rep, "beta_a").value, _row(rep, "beta_b").value, n))
    assert _row(rep, "active_fraction_predicted").value == pytest.approx(exp, rel=1e-12)
    assert abs(_row(rep, "active_fraction_observed").value - exp) < 0.02


def test_report_quantities_match_library_functions():
    from fgrpo_theory.advantages import effective_lr_multiplier
    from fgrpo_theory.tail_miss import active_probability, tail_miss_probability

    log = synthetic_log(prompts=200, steps=2, seed=4)
    rep = diagnose(log, rho=[0.05], gamma=[1.0], lr=2e-6, bootstrap=0)
    a, b = _row(rep, "beta_a").value, _row(rep, "beta_b").value
    # independent quadrature of the fitted Beta on a fine midpoint grid
    from scipy.stats import beta as beta_dist

    mu = (np.arange(200_000) + 0.5) / 200_000
    w = beta_dist.pdf(mu, a, b)
    w /= w.sum()
    pb = np.sum(w * tail_miss_probability(8, mu, 0.05 * mu))
    pa = np.sum(w * active_probability(8, mu))
    assert _row(rep, "p_tail_miss", "rho=0.05").value == pytest.approx(pb, rel=1e-5)
    assert _row(rep, "p_tail_miss_given_active", "rho=0.05").value == pytest.approx(
        pb / pa, rel=1e-5
    )
    m = effective_lr_multiplier(mu[::100], 8, 1.0, weights=w[::100])
    assert _row(rep, "lr_multiplier_focal", "gamma=1").value == pytest.approx(m, rel=1e-4)
    assert _row(rep, "control_lr", "gamma=1").value == pytest.approx(2e-6 * m, rel=1e-4)


def test_by_step_windows():
    log = synthetic_log(prompts=150, steps=6, seed=9)
    rep = diagnose(log, rho=[0.1], gamma=[1.0], by_step=3, bootstrap=0)
    assert set(rep.window) == {"all", "0-2", "3-5"}


# ---------------------------------------------------------------------------------------------
# Reading logs.


def test_per_rollout_layout_with_rewards_and_threshold():
    rows = [("p1", 0, 1.0), ("p1", 0, -1.0), ("p1", 0, -1.0), ("p2", 0, 1.0), ("p2", 0, 1.0)]
    df = pd.DataFrame(rows, columns=["prompt", "step", "reward"])
    g = to_groups(df)
    assert g.to_dict("list") == {
        "prompt": ["p1", "p2"],
        "step": [0, 0],
        "n": [3, 2],
        "n_correct": [1, 2],
    }
    df2 = df.assign(reward=df.reward.map({1.0: 0.9, -1.0: 0.2}))
    assert to_groups(df2, threshold=0.5).n_correct.tolist() == [1, 2]
    assert to_groups(df2, rewards=(0.9, 0.2)).n_correct.tolist() == [1, 2]
    with pytest.raises(ValueError, match=r"^reward must be R_c = 1 or R_w = -1 \(row 1"):
        to_groups(df2)


def test_formats_and_column_mapping(tmp_path):
    log = synthetic_log(prompts=20, steps=2, seed=1).rename(columns={"n_correct": "solved"})
    log.to_csv(tmp_path / "l.csv", index=False)
    log.to_parquet(tmp_path / "l.parquet")
    log.to_json(tmp_path / "l.jsonl", orient="records", lines=True)
    ref = read_log(tmp_path / "l.csv", columns={"n_correct": "solved"})
    for name in ("l.parquet", "l.jsonl"):
        got = read_log(tmp_path / name, columns={"n_correct": "solved"})
        pd.testing.assert_frame_equal(got, ref)
    assert ref.n_correct.sum() == log.solved.sum()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "prompt,step,n\np,0,8\n",
            r"^LOG must be a per-group log .*\(missing; columns there: "
            r"prompt, step, n; .*; got 'n_correct'$",
        ),
        ("prompt,step,n,n_correct\np,0,8,9\n", r"^n_correct must be <= n = 8 \(row 1 .*; got 9$"),
        (
            "prompt,step,n,n_correct\np,0,8,2\nq,0,-8,1\n",
            r"^n must be >= 0 \(row 2 .*; got '?-8'?$",
        ),
        (
            "prompt,step,n,n_correct\np,0,8,2\nq,0,8,x\n",
            r"^n_correct must be a finite number \(row 2 .*; got 'x'$",
        ),
        ("prompt,step,n,n_correct\n", r"^LOG must be a log with at least one data row"),
        (
            "prompt,step,n,n_correct\np,0,8,2\np,1,8,3\n",
            r"^LOG must be at least 2 prompts: the "
            r"spread of mu cannot be fitted; got 'a single prompt'$",
        ),
    ],
    ids=["missing", "x>n", "negative", "non-numeric", "empty", "single-prompt"],
)
def test_bad_logs_one_line(tmp_path, capsys, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        diagnose(read_log(path), bootstrap=0)
    assert main(["diagnose", str(path), "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("Error: ") and "Traceback" not in err


def test_empty_file(tmp_path):
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(ValueError, match="^LOG must be a non-empty file"):
        read_log(tmp_path / "e.csv")


def test_cli_stdin_json_and_plot(tmp_path, monkeypatch, capsys):
    log = synthetic_log(prompts=60, steps=2, seed=12)
    monkeypatch.setattr("sys.stdin", io.StringIO(log.to_csv(index=False)))
    plot = tmp_path / "d.png"
    code = main(
        [
            "diagnose",
            "-",
            "--bootstrap",
            "5",
            "--rho",
            "0.1",
            "--gamma",
            "1",
            "--lr",
            "1e-6",
            "--format",
            "json",
            "--plot",
            str(plot),
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    names = {r["quantity"] for r in out}
    assert {"active_fraction_observed", "active_fraction_predicted", "control_lr"} <= names
    assert plot.stat().st_size > 10_000


def test_diagnose_from_unknown_source_and_missing_verl_dump(cli, tmp_path):
    r = cli("diagnose", str(tmp_path), "--from", "wandb")
    assert r.code == 2 and "--from must be one of table, verl, trl" in r.err
    r = cli("diagnose", str(tmp_path), "--from", "verl")
    assert r.code == 2 and "rollout_data_dir" in r.err and "\n" not in r.err.strip()
