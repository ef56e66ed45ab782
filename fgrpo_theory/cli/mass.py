"""CLI command ``mass``: mass redistribution inside the correct set (Proposition 3.2, P-17)."""

from __future__ import annotations

import math
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .._validate import check_int_array, check_scalar, fail
from ._app import app
from ._common import FORMAT_OPTION, OUTPUT_OPTION, OutputFormat, emit, parse_float_list

if TYPE_CHECKING:
    import numpy as np


#: Group-level quantities whose expectation the command reports.
EXPECTED = (
    "dq_pos_first_order",
    "dq_pos_sampled_correct",
    "dq_pos_sampled_incorrect",
    "dq_pos_unsampled",
    "dq_pos_exact",
    "dq_unsampled_correct_first_order",
    "direct_drift",
    "coupling",
    "dq_unsampled_correct_exact",
    "S_R",
    "U2",
)


class Rule(StrEnum):
    """Update rule of the ``mass`` command (see :mod:`fgrpo_theory.mass`)."""

    theory = "theory"
    paper_sim = "paper-sim"
    logprob = "logprob"


class Method(StrEnum):
    """How expectations over the group draw are computed."""

    auto = "auto"
    enumerate = "enumerate"
    monte_carlo = "monte-carlo"


def _parse_group(text: str, n_actions: int) -> Any:
    """Parse ``"0x3,17,42x2"`` (ACTION or ACTIONxCOUNT, 0-based indices) into a Group."""
    from ..mass import make_group

    actions, counts = [], []
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        fail("--group", text, "a non-empty comma-separated list of ACTION or ACTIONxCOUNT items")
    for item in items:
        head, sep, tail = item.lower().partition("x")
        try:
            action, count = int(head), int(tail) if sep else 1
        except ValueError:
            fail("--group", item, "ACTION or ACTIONxCOUNT with integers ACTION >= 0, COUNT >= 1")
        if action < 0 or action >= n_actions:
            fail("--group", item, f"an item whose action is in [0, {n_actions - 1}]")
        if count < 1:
            fail("--group", item, "ACTIONxCOUNT with COUNT >= 1")
        actions.append(action)
        counts.append(count)
    return make_group(actions, counts, n_actions=n_actions, name="--group")


def _load_policy(
    correct: str | None,
    incorrect: str | None,
    logits: Path | None,
    correct_mask: Path | None,
    n_correct: int | None,
) -> tuple[np.ndarray, np.ndarray, str]:
    from ..policy import (
        PAPER_CORRECT_SPEC,
        PAPER_INCORRECT_SPEC,
        load_policy,
        policy_from_specs,
    )

    if logits is not None:
        for name, value in (("--correct", correct), ("--incorrect", incorrect)):
            if value is not None:
                fail(name, value, "left out when --logits gives the policy")
        z, c = load_policy(logits, correct_mask, n_correct)
        return z, c, str(logits)
    for name, value in (("--correct-mask", correct_mask), ("--n-correct", n_correct)):
        if value is not None:
            fail(name, str(value), "used only together with --logits")
    correct = PAPER_CORRECT_SPEC if correct is None else correct
    incorrect = PAPER_INCORRECT_SPEC if incorrect is None else incorrect
    z, c = policy_from_specs(correct, incorrect, names=("--correct", "--incorrect"))
    return z, c, f"correct {correct}; incorrect {incorrect or '(none)'}"


@app.command("mass")
def mass_cmd(
    correct: str | None = typer.Option(
        None,
        "--correct",
        help="Logits of the correct actions as LOGITxCOUNT items "
        "[default: the paper's 5.0x1,3.0x9999].",
    ),
    incorrect: str | None = typer.Option(
        None,
        "--incorrect",
        help="Logits of the incorrect actions, same syntax; '' for none "
        "[default: the paper's 0.0x118000].",
    ),
    logits: Path | None = typer.Option(
        None, "--logits", help="Policy logits from a .npy or .csv file (instead of --correct)."
    ),
    correct_mask: Path | None = typer.Option(
        None, "--correct-mask", help="With --logits: .npy/.csv file of one 0/1 per action."
    ),
    n_correct: int | None = typer.Option(
        None, "--n-correct", help="With --logits: the first N_CORRECT actions are correct."
    ),
    n: int | None = typer.Option(
        None, "--N", help="Group size N >= 1 [default: 8, or the size of --group]."
    ),
    eta: float = typer.Option(1e-2, "--eta", help="Step size eta > 0."),
    rewards: str = typer.Option("1,-1", "--rewards", help="Rewards R_c,R_w with R_c > R_w."),
    rule: Rule = typer.Option(
        Rule.theory, "--rule", help="Update rule: theory (P-5), paper-sim or logprob."
    ),
    gamma: float = typer.Option(0.0, "--gamma", help="Focal exponent gamma >= 0 (P-12)."),
    convention: str | None = typer.Option(
        None,
        "--convention",
        help="Advantage convention for paper-sim (default paper-sim) and logprob (default grpo): "
        "grpo, grpo-bessel, trl, verl, openrlhf, dr-grpo, rloo, paper-sim.",
    ),
    group: str | None = typer.Option(
        None,
        "--group",
        help="The group to decompose, as 0-based ACTION or ACTIONxCOUNT items (e.g. 0x3,17) "
        "[default: sampled with --seed].",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the sampled group and of Monte Carlo."),
    samples: int = typer.Option(
        10_000, "--samples", help="Monte Carlo groups for the expectations (>= 2)."
    ),
    method: Method = typer.Option(
        Method.auto,
        "--method",
        help="Expectations by enumeration of all group outcomes, Monte Carlo, or auto "
        "(enumerate up to 20,000 outcomes).",
    ),
    fmt: OutputFormat = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Decompose the change of the correct mass after one update (P-17, Proposition 3.2 / P-10).

    For ONE group of N draws (sampled with --seed, or given by --group) the command prints the
    section 5 statistics, the first-order change of the total correct mass Q_pos split into its
    three terms (sampled correct, sampled incorrect, unsampled coupling) and of the unsampled
    correct mass Q_u split into direct drift and normalization coupling, next to the EXACT changes
    after the softmax is recomputed. Then it prints their expected values over the group draw, by
    exact enumeration of all outcomes (small K and N) or Monte Carlo with a standard error. The
    closed forms P-17/P-10 describe the theory rule (linear surrogate on distinct sampled actions,
    P-5); for paper-sim (mean-centred per-sample linear surrogate, the paper's simulation) and
    logprob (policy gradient with an advantage convention) the first-order terms are P-19 applied
    to the rule's logit step. For logprob the expected drift of section 6 (h, E[dQ_pos],
    the threshold below which a correct action loses mass) is added.

    The default policy is the paper's simulation start: 128,000 actions, one correct anchor at
    logit 5.0, 9,999 correct at 3.0, 118,000 incorrect at 0.0.

    Example: fgrpo-theory mass --correct 2.0x1,1.0x3 --incorrect 0.0x4 --N 4 --eta 0.5
    --rule logprob --format csv
    """
    import numpy as np
    import pandas as pd

    from .. import mass as M

    N = None if n is None else int(check_int_array("--N", n, lo=1))
    eta_v = check_scalar("--eta", eta, lo=0.0, lo_open=True)
    gamma_v = check_scalar("--gamma", gamma, lo=0.0)
    r = parse_float_list(rewards, "--rewards")
    if r.size != 2 or not r[0] > r[1]:
        fail("--rewards", rewards, "two numbers R_c,R_w with R_c > R_w")
    rc, rw = float(r[0]), float(r[1])
    samples_v = int(check_int_array("--samples", samples, lo=2))
    seed_v = int(check_int_array("--seed", seed, lo=0))
    if rule is Rule.theory and convention is not None:
        fail("--convention", convention, "left out for --rule theory (it uses raw rewards)")
    z, c, policy_text = _load_policy(correct, incorrect, logits, correct_mask, n_correct)

    seeds = np.random.SeedSequence(seed_v).spawn(2)

    if group is not None:
        grp = _parse_group(group, z.size)
        if N is not None and N != grp.N:
            fail("--N", N, f"equal to the size of --group ({grp.N}) or left out")
        N = grp.N
    else:
        N = 8 if N is None else N
        grp = M.sample_group(z, N, seed=np.random.default_rng(seeds[0]))
    if method is Method.enumerate:
        log_count = math.lgamma(N + z.size) - math.lgamma(N + 1) - math.lgamma(z.size)
        if log_count > math.log(M.MAX_ENUMERATION):
            fail(
                "--method",
                "enumerate",
                f"used with at most {M.MAX_ENUMERATION} group outcomes (K = {z.size}, N = {N} "
                f"gives about 10^{log_count / math.log(10):.1f}); use auto or monte-carlo",
            )
    kw = dict(rule=str(rule), r_correct=rc, r_incorrect=rw, gamma=gamma_v, convention=convention)
    res = M.one_step(z, c, grp, eta_v, **kw)
    exp = M.expected_change(
        z,
        c,
        N,
        eta_v,
        EXPECTED,
        method=str(method),
        samples=samples_v,
        seed=np.random.default_rng(seeds[1]),
        **kw,
    )
    rows: list[dict[str, Any]] = []

    def add(scope: str, quantity: str, value: float, how: str, count: int, se: float = 0.0) -> None:
        rows.append(
            {
                "scope": scope,
                "quantity": quantity,
                "value": float(value),
                "stderr": float(se),
                "method": how,
                "n": int(count),
            }
        )

    add("policy", "K", z.size, "input", 0)
    add("policy", "n_correct", int(c.sum()), "input", 0)
    add("policy", "mu", res.stats.Q_pos, "input", 0)
    stats = res.stats.as_dict()
    for key in ("N", "X", "n_distinct"):
        add("group", key, stats[key], "statistic", 1)
    add("group", "g", res.g, "statistic", 1)
    for key in ("P_pos", "P_neg", "Q_u", "A2", "B2", "U_pos2", "U_neg2", "U2", "S_R"):
        add("group", key, stats[key], "statistic", 1)
    theory = rule is Rule.theory
    values = res.as_dict()
    changes = [
        ("dq_pos_sampled_correct", "P-17"),
        ("dq_pos_sampled_incorrect", "P-17"),
        ("dq_pos_unsampled", "P-17"),
        ("dq_pos_first_order", "P-17"),
        ("dq_pos_exact", "exact"),
        ("direct_drift", "P-10"),
        ("coupling", "P-10"),
        ("dq_unsampled_correct_first_order", "P-10"),
        ("dq_unsampled_correct_exact", "exact"),
    ]
    for key, how in changes:
        add("group", key, values[key], how if theory or how == "exact" else "P-19", 1)
    count = exp.n_outcomes if exp.method == "enumeration" else exp.n_samples
    for key in EXPECTED:
        add("expected", key, exp.mean[key], exp.method, count, exp.stderr[key])
    add("expected", "U2", M.expected_unsampled_square_mass(z, N), "closed form", 0)
    if rule is Rule.logprob and not c.all():
        drift = M.expected_logprob_drift(
            z, c, N, eta_v, gamma_v, convention or "grpo", r_correct=rc, r_incorrect=rw
        )
        add("expected", "h", drift.h, "section 6", 0)
        add("expected", "dq_pos_first_order", drift.expected_dmu, "section 6", 0)
        if drift.threshold_prob is not None:
            add("expected", "loss_threshold_p", drift.threshold_prob, "section 6", 0)
        add("expected", "n_correct_losing", drift.n_correct_losing, "section 6", 0)
    df = pd.DataFrame(rows)
    conv = "" if res.convention is None else f", {res.convention}"
    title = (
        f"mass: {policy_text}; rule {res.rule}{conv}, N={N}, eta={eta_v:g}, gamma={gamma_v:g}, "
        f"R_c={rc:g}, R_w={rw:g}"
    )
    emit(df, fmt, output, title=title)
