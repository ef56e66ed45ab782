"""Before training: what a group size N (and batch B) will cost and miss on a set of prompts.

From a distribution of per-prompt success probabilities mu (the prompts' difficulty), for binary
rewards and groups of N i.i.d. rollouts, X | mu ~ Binomial(N, mu) correct:

- ``p_mixed`` = E[Pr(0 < X < N)] = 1 - E[mu^N] - E[(1 - mu)^N] (P-7 averaged over prompts; for a
  Beta(a, b) exactly 1 - B(a + N, b)/B(a, b) - B(a, b + N)/B(a, b), theory.md section 13);
- ``zero_adv_fraction``: the expected share of the groups of an update whose advantages are all
  0 (X = 0 or X = N; every convention gives a flat group A = 0): 1 - p_mixed without dynamic
  sampling, 0 under a filter that drops flat groups;
- ``p_keep`` = sum_X keep[X] Pr(X), keep[X] the trainer's dynamic-sampling rule
  (:func:`fgrpo_theory.sim.config.ds_keep_table`: DAPO, verl's ``filter_groups``, OpenRLHF's
  range (0, 1); all keep the mixed groups when N >= 2), Pr(X) beta-binomial for a Beta;
- ``gens_per_kept_group`` = N / p_keep: a trainer that draws fresh prompts until it has a kept
  group draws a geometric number of groups, mean 1 / p_keep; ``gens_per_step`` = B N / p_keep
  for B kept groups per step (the trainers generate in batches and may overshoot: this is the
  expectation of the work that is needed, a lower bound on the work done);
- ``p_tail_miss`` = E[Pr(B)] (Lemma 3.1 with tau = rho mu averaged over prompts): the share of
  drawn groups that are active yet never sample a rare correct subset holding a share rho of the
  prompt's correct mass; ``p_tail_miss_kept`` = E[Pr(B and kept)] / p_keep, the share of the
  updates that miss it (B implies a mixed group, so under each filter it is E[Pr(B)] / p_keep:
  theory.md section 12's Pr(B | A_N) for dynamic sampling, E[Pr(B)] without);
- ``lr_multiplier`` of a scheme: E[|A|_scheme] / E[|A|_reference], |A|(X) = (X |a_c(X)| +
  (N - X) |a_w(X)|) / N the mean absolute advantage of a group with X correct, from the scheme's
  tables (for focal weighting on GRPO, :func:`~fgrpo_theory.advantages.effective_lr_multiplier`;
  theory.md sections 11, 13): the factor a vanilla control's learning rate takes for matched
  step sizes. Flat groups have |A| = 0, so it does not depend on the dynamic-sampling rule.

The expectations over prompts are exact sums: beta-binomial probabilities for a Beta, a
Gauss-Jacobi rule exact for polynomials of degree N for E[Pr(B)] (a polynomial of degree N in
mu), plain weighted sums for a list of per-prompt rates. ``fgrpo-theory validate`` checks each
quantity against Monte Carlo.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import betaln, gammaln

from ._validate import check_scalar, fail

__all__ = [
    "Difficulty",
    "parse_difficulty",
    "x_distribution",
    "scheme_tables",
    "plan_table",
    "PLAN_COLUMNS",
    "DS_RULES",
    "MAX_PLAN_N",
]

#: Dynamic-sampling rules of the table (``off`` = keep every group).
DS_RULES = ("off", "dapo", "verl", "openrlhf")
#: Largest group size (the Gauss-Jacobi rule of a Beta is exact up to degree 2 * 2000 - 1).
MAX_PLAN_N = 3999
#: Largest number of table rows.
MAX_PLAN_ROWS = 1_000_000
PLAN_COLUMNS = (
    "N",
    "B",
    "dynamic_sampling",
    "p_mixed",
    "zero_adv_fraction",
    "p_keep",
    "gens_per_kept_group",
    "gens_per_step",
    "rho",
    "p_tail_miss",
    "p_tail_miss_kept",
    "scheme",
    "lr_multiplier",
)


@dataclass(frozen=True)
class Difficulty:
    """A distribution of per-prompt success probabilities.

    ``beta = (a, b)`` for a Beta (exact beta-binomial sums), else atoms ``mu`` with ``weights``
    (summing to 1). ``label`` names it in output rows.
    """

    label: str
    beta: tuple[float, float] | None = None
    mu: np.ndarray | None = None
    weights: np.ndarray | None = None

    def atoms(self, N: int) -> tuple[np.ndarray, np.ndarray]:
        """Atoms and weights exact for polynomials in mu of degree <= N."""
        if self.beta is not None:
            from .diagnose.fit import beta_atoms

            return beta_atoms(*self.beta, nodes=max(200, N // 2 + 1))
        assert self.mu is not None and self.weights is not None
        return self.mu, self.weights


def _beta(text: str, spec: str) -> Difficulty:
    parts = text.split(",")
    if len(parts) != 2:
        fail("--difficulty", spec, "beta:A,B with two numbers A, B > 0")
    try:
        a, b = (float(p) for p in parts)
    except ValueError:
        fail("--difficulty", spec, "beta:A,B with two numbers A, B > 0")
    if not (np.isfinite(a) and np.isfinite(b) and a > 0 and b > 0):
        fail("--difficulty", spec, "beta:A,B with finite A, B > 0")
    return Difficulty(f"beta({a:g},{b:g})", beta=(a, b))


def _rates(path: str, spec: str) -> Difficulty:
    from .diagnose.io import numeric_column, read_table

    df = read_table(path, name="--difficulty")
    col = next((c for c in ("pass_rate", "mu") if c in df.columns), None)
    if col is not None:
        mu = numeric_column(df, col, integer=False)
        bad = (mu < 0) | (mu > 1)
        if bad.any():
            i = int(np.argmax(bad))
            fail(col, mu[i], f"in [0, 1] (row {i + 1} of {path})")
    elif "n" in df.columns and "c" in df.columns:
        n = numeric_column(df, "n", integer=True)
        c = numeric_column(df, "c", integer=True)
        if (n == 0).any() or (c > n).any():
            i = int(np.argmax((n == 0) | (c > n)))
            fail("c", int(c[i]), f"<= n = {int(n[i])} with n >= 1 (row {i + 1} of {path})")
        mu = c / n
    else:
        cols = ", ".join(str(c) for c in df.columns[:20])
        fail("--difficulty", spec, f"a CSV with a pass_rate (or mu) column or n,c columns ({cols})")
    if mu.size == 0:
        fail("--difficulty", spec, "a file with at least one prompt")
    return Difficulty(f"rates({Path(path).name})", mu=mu, weights=np.full(mu.size, 1.0 / mu.size))


def parse_difficulty(spec: str, *, threshold: float | None = None) -> Difficulty:
    """A difficulty distribution from its spec.

    - ``beta:A,B``: mu ~ Beta(A, B); ``uniform`` is ``beta:1,1``;
    - ``rates:FILE`` (or a path ending in .csv, .parquet, .jsonl): per-prompt pass rates from a
      pre-flight evaluation, a column ``pass_rate`` (or ``mu``) in [0, 1], or columns ``n, c``
      (rollouts and correct ones per prompt, rate c / n); each prompt an atom of equal weight;
    - ``log:FILE``: a training log as ``diagnose`` reads it (per group, or per rollout with
      ``threshold``), fitted by beta-binomial maximum likelihood (theory.md section 13).
    """
    if not isinstance(spec, str) or not spec.strip():
        fail("--difficulty", spec, "beta:A,B, uniform, rates:FILE or log:FILE")
    s = spec.strip()
    kind, sep, rest = s.partition(":")
    if s == "uniform":
        return Difficulty("beta(1,1)", beta=(1.0, 1.0))
    if sep and kind == "beta":
        return _beta(rest, spec)
    if sep and kind == "rates":
        return _rates(rest, spec)
    if sep and kind == "log":
        from .diagnose.fit import fit_beta_binomial
        from .diagnose.io import read_log

        groups = read_log(rest, threshold=threshold)
        fit = fit_beta_binomial(
            groups["n"].to_numpy(), groups["n_correct"].to_numpy(), groups["prompt"].to_numpy()
        )
        return Difficulty(f"fit({Path(rest).name}: beta({fit.a:.4g},{fit.b:.4g}))", (fit.a, fit.b))
    if Path(s).suffix.lower() in (".csv", ".parquet", ".pq", ".jsonl", ".json", ".ndjson"):
        return _rates(s, spec)
    fail("--difficulty", spec, "beta:A,B, uniform, rates:FILE or log:FILE")


def x_distribution(d: Difficulty, N: int) -> np.ndarray:
    """Pr(X = x) for x = 0..N over prompts (beta-binomial for a Beta; an atom mixture else)."""
    x = np.arange(N + 1, dtype=float)
    logc = gammaln(N + 1.0) - gammaln(x + 1.0) - gammaln(N - x + 1.0)
    if d.beta is not None:
        a, b = d.beta
        return np.exp(logc + betaln(x + a, N - x + b) - betaln(a, b))
    from scipy.stats import binom

    mu, w = d.atoms(N)
    # explicit weighted sum over atoms (binom.pmf is exact at mu = 0 and 1)
    return (w[:, None] * binom.pmf(np.arange(N + 1), N, mu[:, None])).sum(axis=0)


def scheme_tables(spec: str, N: int) -> tuple[np.ndarray, np.ndarray]:
    """``(a_c, a_w)``: advantages of a correct and an incorrect rollout for X = 0..N (0/1 rewards).

    ``spec`` is a scheme spec (the registry of :mod:`fgrpo_theory.schemes`).
    """
    from .schemes import parse_scheme

    a_c, a_w = parse_scheme(spec).tables(N, r_correct=1.0, r_incorrect=0.0)
    return np.asarray(a_c, dtype=float), np.asarray(a_w, dtype=float)


def _mean_abs(pmf: np.ndarray, a_c: np.ndarray, a_w: np.ndarray, N: int) -> float:
    x = np.arange(N + 1, dtype=float)
    ac = np.where(x > 0, np.abs(a_c), 0.0)
    aw = np.where(x < N, np.abs(a_w), 0.0)
    return float(np.sum(pmf * (x * ac + (N - x) * aw)) / N)


def plan_table(
    difficulty: Difficulty | str,
    N: Any,
    *,
    B: int | None = None,
    budget: int | None = None,
    rho: Any = (0.05,),
    schemes: Any = ("focal:gamma=1",),
    reference: str = "grpo",
    dynamic_sampling: Any = DS_RULES,
) -> pd.DataFrame:
    """The planning table: one row per (N, dynamic_sampling, rho, scheme), :data:`PLAN_COLUMNS`.

    The quantities of the module docstring (theory.md section 13, with section 12: Lemma 3.1 over
    prompts, Pr(B | A_N) under dynamic sampling, the population learning-rate multiplier).

    Parameters
    ----------
    difficulty : Difficulty or str
        The prompts' success-probability distribution (:func:`parse_difficulty`).
    N : int or sequence of int
        Group sizes, 2 <= N <= :data:`MAX_PLAN_N`.
    B : int, optional
        Kept groups per step (the same for every N); gives ``gens_per_step``.
    budget : int, optional
        Rollouts per step B x N held fixed: B = budget / N (N must divide it). Not with ``B``.
        Without ``B`` and ``budget`` the columns ``B`` and ``gens_per_step`` are left out.
    rho : float or sequence
        Relative masses of the rare correct subset, in (0, 1).
    schemes : str or sequence of str
        Scheme specs whose learning-rate multiplier is reported (relative to ``reference``).
    reference : str
        The scheme the multipliers are relative to (default the paper's GRPO).
    dynamic_sampling : str or sequence
        Rules among :data:`DS_RULES`.
    """
    from .sim.config import ds_keep_table
    from .tail_miss import tail_miss_probability

    d = parse_difficulty(difficulty) if isinstance(difficulty, str) else difficulty
    if not isinstance(d, Difficulty):
        fail("difficulty", d, "a Difficulty or a spec string such as beta:2,5")
    Ns = np.atleast_1d(np.asarray(N))
    if Ns.size == 0 or Ns.dtype.kind not in "iu":
        fail("N", N, f"integers in [2, {MAX_PLAN_N}]")
    if ((Ns < 2) | (Ns > MAX_PLAN_N)).any():
        fail("N", int(Ns[(Ns < 2) | (Ns > MAX_PLAN_N)][0]), f"in [2, {MAX_PLAN_N}]")
    if B is not None and budget is not None:
        fail("B", B, "given without budget (budget fixes B = budget / N)")
    if B is not None:
        B = int(check_scalar("B", B, lo=1))
    if budget is not None:
        budget = int(check_scalar("budget", budget, lo=2))
        for n in Ns:
            if budget % int(n):
                fail("N", int(n), f"a divisor of budget = {budget} (B = budget / N)")
    rhos = [float(check_scalar("rho", r, lo=0, hi=1, lo_open=True, hi_open=True))
            for r in np.atleast_1d(rho)]  # fmt: skip
    from .schemes import parse_scheme

    specs = [parse_scheme(s).spec for s in ([schemes] if isinstance(schemes, str) else schemes)]
    rules = [dynamic_sampling] if isinstance(dynamic_sampling, str) else list(dynamic_sampling)
    for r in rules:
        if r not in DS_RULES:
            fail("dynamic_sampling", r, "one of " + ", ".join(DS_RULES))
    if not specs or not rules or not rhos:
        fail("schemes", specs, "non-empty lists of schemes, rules and rho")
    n_rows = Ns.size * len(rules) * len(rhos) * len(specs)
    if n_rows > MAX_PLAN_ROWS:
        fail("N", f"{n_rows} rows", f"a table of at most {MAX_PLAN_ROWS} rows")
    rows = []
    for n in (int(v) for v in Ns):
        pmf = x_distribution(d, n)
        p_mixed = float(1.0 - pmf[0] - pmf[n])
        mu, w = d.atoms(n)
        inner = (mu > 0) & (mu < 1)  # a prompt always or never solved has no mixed group
        mu_i, w_i = mu[inner], w[inner]
        miss = {
            r: float(np.sum(w_i * tail_miss_probability(n, mu_i, r * mu_i))) if mu_i.size else 0.0
            for r in rhos
        }
        ref = _mean_abs(pmf, *scheme_tables(reference, n), n)
        if ref <= 0:
            fail("difficulty", d.label, f"a distribution with mixed groups at N = {n}")
        mult = {s: _mean_abs(pmf, *scheme_tables(s, n), n) / ref for s in specs}
        b = B if B is not None else (budget // n if budget is not None else None)
        for rule in rules:
            keep = ds_keep_table(rule, n).astype(bool)
            p_keep = float(1.0 - np.sum(pmf[~keep]))  # 1 - Pr(dropped): = p_mixed when mixed kept
            flat_kept = float(pmf[0] * keep[0] + pmf[n] * keep[n])
            gens = n / p_keep if p_keep > 0 else np.inf
            for r in rhos:
                for s in specs:
                    row = dict(
                        N=n,
                        B=b,
                        dynamic_sampling=rule,
                        p_mixed=p_mixed,
                        zero_adv_fraction=flat_kept / p_keep if p_keep > 0 else np.inf,
                        p_keep=p_keep,
                        gens_per_kept_group=gens,
                        gens_per_step=b * gens if b is not None else None,
                        rho=r,
                        p_tail_miss=miss[r],
                        p_tail_miss_kept=miss[r] / p_keep if p_keep > 0 else np.inf,
                        scheme=s,
                        lr_multiplier=mult[s],
                    )
                    rows.append(row)
    df = pd.DataFrame(rows, columns=list(PLAN_COLUMNS))
    if B is None and budget is None:
        df = df.drop(columns=["B", "gens_per_step"])
    else:
        df["B"] = df["B"].astype(np.int64)
    df.attrs["difficulty"] = d.label
    return df
