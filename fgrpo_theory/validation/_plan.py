"""Checks of :mod:`fgrpo_theory.plan` against Monte Carlo (``fgrpo-theory validate``).

Prompts are drawn from the difficulty distribution (NumPy's Beta sampler, or uniformly from a
list of rates), then a group of N rollouts over three regions: the rare correct subset (mass
rho mu), the rest of the correct set, the incorrect set. Kept groups, the rollouts drawn per kept
group, tail misses among kept groups and the mean |advantage| of a scheme (from the scheme's
advantages of the sampled 0/1 rewards, :func:`fgrpo_theory.advantages.group_advantages`-based, not
its tables) are estimated and compared with the closed forms.
"""

from __future__ import annotations

import math

import numpy as np

from ._rows import CheckRow, _mc_prop_row, _mc_row, _rng


def _ratio(num: np.ndarray, den: np.ndarray) -> tuple[float, float]:
    """Ratio of means and its delta-method standard error."""
    n = num.size
    mn, md = float(num.mean()), float(den.mean())
    r = mn / md
    resid = num - r * den
    return r, float(resid.std(ddof=1) / (abs(md) * math.sqrt(n)))


def _mean_abs_adv(spec: str, rewards: np.ndarray) -> np.ndarray:
    """Mean |advantage| of each group under a scheme, from its advantages of the 0/1 rewards."""
    from ..schemes import parse_scheme

    scheme = parse_scheme(spec)
    adv = np.asarray(scheme.advantages(rewards, correct=rewards > 0.5), dtype=float)
    return np.abs(adv).mean(axis=1)


def _checks_plan(reps: int) -> list[CheckRow]:
    from ..plan import parse_difficulty, plan_table
    from ..sim.config import ds_keep_table

    rows: list[CheckRow] = []
    cases = [
        ("beta:2,5", 8, 0.05, "focal:gamma=1"),
        ("beta:0.5,0.5", 4, 0.2, "focal:gamma=0.5"),
        ("beta:1,3", 6, 0.1, "maxrl"),
    ]
    for i, (spec, N, rho, scheme) in enumerate(cases):
        d = parse_difficulty(spec)
        tab = plan_table(d, [N], rho=[rho], schemes=[scheme], B=4)
        rng = _rng(40, i)
        a, b = d.beta
        mu = rng.beta(a, b, size=reps)
        tau = rho * mu
        # region of each rollout: 0 rare correct, 1 other correct, 2 incorrect
        u = rng.random((reps, N))
        region = (u >= tau[:, None]).astype(np.int8) + (u >= mu[:, None])
        X = (region < 2).sum(axis=1)
        hit = (region == 0).any(axis=1)
        mixed = (X > 0) & (X < N)
        miss = mixed & ~hit
        par = f"{spec}, N={N}, rho={rho:g}"
        row = tab.iloc[0]
        rows.append(_mc_prop_row("plan p_mixed", par, row.p_mixed, mixed.mean(), reps))
        rows.append(_mc_prop_row("plan p_tail_miss", par, row.p_tail_miss, miss.mean(), reps))
        for rule in ("dapo", "verl", "openrlhf"):
            r = tab[tab.dynamic_sampling == rule].iloc[0]
            kept = ds_keep_table(rule, N).astype(bool)[X]
            rows.append(_mc_prop_row(f"plan p_keep ({rule})", par, r.p_keep, kept.mean(), reps))
            # rollouts per kept group: the draws until a kept group, N each (ratio of means)
            est, se = _ratio(np.full(reps, float(N)), kept.astype(float))
            rows.append(_mc_row(f"plan gens_per_kept_group ({rule})", par,
                                r.gens_per_kept_group, est, se))  # fmt: skip
            est, se = _ratio((miss & kept).astype(float), kept.astype(float))
            rows.append(_mc_row(f"plan p_tail_miss_kept ({rule})", par,
                                r.p_tail_miss_kept, est, se))  # fmt: skip
        rewards = (region < 2).astype(float)
        est, se = _ratio(_mean_abs_adv(scheme, rewards), _mean_abs_adv("grpo", rewards))
        rows.append(_mc_row(f"plan lr_multiplier ({scheme})", par, row.lr_multiplier, est, se))
    return rows
