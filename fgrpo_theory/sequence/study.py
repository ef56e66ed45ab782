"""Sequence-rung experiments over task draws x seeds: arms, progress-matched GRPO, theory checks.

A sequence experiment draws D tasks from the declared task family (``task.seed`` = draw; the
draw also seeds the weights and the SFT data, so each draw has its own prompts and its own SFT
checkpoint) and trains S RL seeds on each. Within a draw every arm starts from the same SFT
checkpoint and seed ``s`` of every arm uses the same RL seed (:func:`rl_seed`), so arms are
paired by draw and seed, as :func:`fgrpo_theory.fair.two_level_interval` needs.

- :func:`run_draw`: one draw: SFT (cached), the step-0 metrics, then every arm and every
  rung of the reference's learning-rate ladder (:data:`LADDER`) for each seed; the last-step
  exact metrics of both splits, one row per (arm, seed, split). With ``checks`` the run also
  records, for every group it trains on, the exact ``mu`` and ``tau`` of the policy that sampled
  it, Lemma 3.1's Pr(B), whether event B happened, and the unsampled correct mass ``Q_u``
  (correct answers the group did not draw) and ``mu`` before and after the update (Prop. 3.2).
- :func:`map_draws`: :func:`run_draw` over draws, in worker processes if asked (the rows do not
  depend on the number of workers: each draw is deterministic).
- :func:`match_controls`: the progress-matched control of every arm, per draw: the reference
  (GRPO at the arm's N) at the learning-rate factor whose median final train pass@1 over the
  seeds equals the arm's, found by log-linear interpolation on the ladder; each seed's control
  metrics are interpolated between the two bracketing rungs of the same seed with the same
  weight. The table has the columns of :func:`fgrpo_theory.fair.twolevel.summarize_arms`
  (``population_seed`` is the task draw), which gives the two-level intervals.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._validate import check_integer, fail

if TYPE_CHECKING:  # the configs import torch; reading a stored table (match_controls) must not
    from .run import SequenceConfig

__all__ = [
    "SeqArm",
    "LADDER",
    "METRICS",
    "draw_config",
    "rl_seed",
    "train_run",
    "run_draw",
    "map_draws",
    "match_controls",
]

#: Learning-rate factors of the reference (GRPO) every draw and seed runs: the progress ladder.
LADDER = (0.25, 0.5, 1.0, 2.0)
#: Metrics kept per run (last step, both splits).
METRICS = (
    "pass_at_1", "pass_at_4", "pass_at_16", "pass_at_64", "pass_at_256", "pass_at_1024",
    "coverage_at_16", "coverage_at_256", "mu", "tau", "rare_nll", "rare_nll_rise", "entropy",
)  # fmt: skip


@dataclass(frozen=True)
class SeqArm:
    """One arm: a ``scheme`` spec of the registry, a ``lr_factor`` on the base learning rate and
    a group size ``N`` (0 = the base's); ``family`` and ``coef`` label it."""

    name: str
    scheme: str = "grpo"
    lr_factor: float = 1.0
    N: int = 0
    family: str = ""
    coef: str = ""

    def config(self, base: SequenceConfig) -> SequenceConfig:
        rl = replace(base.rl, scheme=self.scheme, lr=base.rl.lr * self.lr_factor,
                     N=self.N or base.rl.N)  # fmt: skip
        return replace(base, rl=rl)


def draw_config(base: SequenceConfig, draw: int) -> SequenceConfig:
    """``base`` on task draw ``draw``: the task, weight and SFT-data seeds set to ``draw``."""
    draw = check_integer("draw", draw, 0, 2**31 - 1)
    return replace(
        base,
        task=replace(base.task, seed=draw),
        model=replace(base.model, seed=draw),
        sft=replace(base.sft, seed=draw),
    )


def rl_seed(draw: int, seed_index: int) -> int:
    """The RL seed (prompt draws and rollouts) of seed ``seed_index`` on draw ``draw``; shared by
    every arm of the draw (pairing)."""
    return 1_000 * int(draw) + int(seed_index)


def _logp(model, prompts, ids):
    from .exact import answer_logprobs

    return answer_logprobs(model, prompts.tokens[ids], prompts.task.L)


def _probs(model, prompts, ids) -> np.ndarray:
    return _logp(model, prompts, ids).exp().numpy()


def train_run(
    cfg: SequenceConfig, prompts, state: dict, splits: dict, *, checks: bool = False
) -> tuple[dict, pd.DataFrame | None]:
    """RL from the SFT weights ``state`` under ``cfg`` (torch settings already applied), the
    same random streams as :func:`fgrpo_theory.sequence.run.run_sequence`; the last-step exact
    metrics per split and, with ``checks``, one row per trained group (module doc)."""
    import copy

    import torch

    from ..schemes import parse_scheme
    from ..tail_miss import tail_miss_probability
    from .exact import PASS_K, prompt_metrics, split_metrics
    from .model import build_model
    from .rl import make_optimizer, rl_step
    from .task import answer_index

    rl, task = cfg.rl, cfg.task
    model = build_model(cfg.model, task.vocab, task.prompt_len + task.L)
    model.load_state_dict(state)
    ref = None  # the reference policy of a kl term: the SFT model, frozen (as run_sequence)
    if parse_scheme(rl.scheme).regularizer("kl") is not None:
        ref = copy.deepcopy(model).requires_grad_(False)
    rng = np.random.default_rng([rl.seed, 3])
    gen = torch.Generator().manual_seed(rl.seed)
    opt = make_optimizer(model, rl)
    groups: list[pd.DataFrame] = []
    for step in range(1, rl.steps + 1):
        ids = np.sort(rng.choice(prompts.n_train, size=rl.B, replace=False))
        seen: dict = {}
        p0 = _probs(model, prompts, ids) if checks else None
        st = rl_step(model, opt, prompts, ids, rl, gen, ref_model=ref,
                     before_update=lambda m, r, a, seen=seen: seen.update(moves=m))  # fmt: skip
        if checks:
            p1 = _probs(model, prompts, ids)
            idx = answer_index(seen["moves"].numpy())
            sampled = np.zeros_like(prompts.correct[ids])
            np.put_along_axis(sampled, idx, True, axis=1)
            corr, rare = prompts.correct[ids], prompts.rare[ids]
            uns = corr & ~sampled
            mu0, tau0 = (p0 * corr).sum(1), (p0 * rare).sum(1)
            X = st["X"]
            active = (X > 0) & (X < rl.N)
            has = rare.any(1)
            groups.append(pd.DataFrame(dict(
                step=step, prompt=ids, X=X, rare_hits=st["rare_hits"], has_rare=has,
                mu=mu0, tau=tau0,
                p_lemma=np.where(has, np.asarray(tail_miss_probability(rl.N, mu0, tau0)), np.nan),
                event_b=active & has & (st["rare_hits"] == 0),
                mu_after=(p1 * corr).sum(1), tau_after=(p1 * rare).sum(1),
                q_u=(p0 * uns).sum(1), q_u_after=(p1 * uns).sum(1),
            )))  # fmt: skip
    out = {}
    for s, ids in splits.items():
        out[s] = split_metrics(prompt_metrics(_logp(model, prompts, ids), prompts, ids), PASS_K)
    return out, (pd.concat(groups, ignore_index=True) if checks else None)


def run_draw(
    base: SequenceConfig,
    draw: int,
    arms: Sequence[SeqArm],
    *,
    seeds: int = 2,
    ladder: Sequence[float] = LADDER,
    checks: bool = False,
    cache: bool = True,
    label: str = "",
    verbose: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Every arm and every ladder rung (GRPO at each arm's N and ``lr x factor``) on one draw,
    ``seeds`` RL seeds each (module doc). Rows: ``population_seed`` (the draw), ``seed_index``,
    ``arm``, ``family``, ``coef``, ``role`` ("start", "arm" or "ladder"), ``scheme``, ``N``,
    ``lr_factor``, ``split``, :data:`METRICS`; and, with ``checks``, the per-group rows of
    :func:`train_run` of the arms (with ``population_seed``, ``seed_index``, ``arm``), else None.
    No wall time is kept in the rows (a recomputed table is then identical row for row); with
    ``verbose`` each run's time is printed when it ends."""
    from .exact import PASS_K, prompt_metrics, split_metrics
    from .sft import load_or_train_sft, torch_settings
    from .task import make_prompts

    seeds = check_integer("seeds", seeds, 1, 10_000)
    cfg0 = draw_config(base, draw)
    prompts = make_prompts(cfg0.task)
    model, _ = load_or_train_sft(cfg0.task, cfg0.model, cfg0.sft, prompts=prompts,
                                 threads=cfg0.threads, cache=cache)  # fmt: skip
    state = {k: v.clone() for k, v in model.state_dict().items()}
    splits = {s: prompts.split(s)[: base.rl.eval_prompts] for s in ("train", "test")}
    splits = {s: ids for s, ids in splits.items() if len(ids)}
    rows: list[dict[str, Any]] = []
    groups: list[pd.DataFrame] = []
    common = dict(population_seed=int(draw))
    with torch_settings(cfg0.threads):
        start = {}
        for s, ids in splits.items():
            start[s] = split_metrics(prompt_metrics(_logp(model, prompts, ids), prompts, ids),
                                     PASS_K)  # fmt: skip
            rows.append(dict(common, seed_index=-1, arm="start", family="start", coef="",
                             role="start", scheme="", N=0, lr_factor=0.0, split=s,
                             **start[s]))  # fmt: skip
        runs: list[tuple[SeqArm, str]] = [(a, "arm") for a in arms]
        for n in dict.fromkeys(a.N or base.rl.N for a in arms):
            runs += [(SeqArm(f"grpo x{f:g} N={n}", "grpo", f, n, "grpo", f"x{f:g}"), "ladder")
                     for f in ladder]  # fmt: skip
        for si in range(seeds):
            done: dict = {}  # a rung equal to an arm (same config) reuses the arm's run
            for k, (a, role) in enumerate(runs):
                cfg = a.config(replace(cfg0, rl=replace(cfg0.rl, seed=rl_seed(draw, si))))
                if cfg in done:
                    res = done[cfg]
                else:
                    if verbose:
                        print(f"[{label}] draw {draw} seed {si}: {role} {a.name} "
                              f"({k + 1}/{len(runs)})", file=sys.stderr, flush=True)  # fmt: skip
                    t0 = time.perf_counter()
                    res, g = train_run(cfg, prompts, state, splits,
                                       checks=checks and role == "arm")  # fmt: skip
                    if verbose:
                        sec = time.perf_counter() - t0
                        print(f"[{label}] draw {draw} seed {si}: {a.name} done in {sec:.1f} s",
                              file=sys.stderr, flush=True)  # fmt: skip
                    done[cfg] = res
                    if g is not None:
                        groups.append(g.assign(population_seed=int(draw), seed_index=si,
                                               arm=a.name))  # fmt: skip
                for s, m in res.items():
                    m = dict(m, rare_nll_rise=m["rare_nll"] - start[s]["rare_nll"])
                    rows.append(dict(common, seed_index=si, arm=a.name, family=a.family or a.name,
                                     coef=a.coef, role=role, scheme=cfg.rl.scheme, N=cfg.rl.N,
                                     lr_factor=a.lr_factor, split=s, **m))  # fmt: skip
    return pd.DataFrame(rows), (pd.concat(groups, ignore_index=True) if groups else None)


def _call(args: tuple) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    base, draw, arms, kw = args
    return run_draw(base, draw, arms, **kw)


def map_draws(
    base: SequenceConfig,
    draws: Sequence[int],
    arms: Sequence[SeqArm],
    *,
    workers: int = 1,
    **kw: Any,
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """:func:`run_draw` on every draw (in ``workers`` processes if > 1); the concatenated run
    table in draw order and the concatenated per-group table (``checks``) or None."""
    workers = check_integer("workers", workers, 1, 256)
    draws = [check_integer("draws", d, 0, 2**31 - 1) for d in draws]
    if len(draws) < 1 or len(set(draws)) != len(draws):
        fail("draws", list(draws), "distinct task draws")
    tasks = [(base, d, tuple(arms), kw) for d in draws]
    if workers == 1 or len(tasks) == 1:
        out = [_call(t) for t in tasks]
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        ctx = mp.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx) as ex:
            out = list(ex.map(_call, tasks))
    runs = pd.concat([o[0] for o in out], ignore_index=True)
    gs = [o[1] for o in out if o[1] is not None]
    return runs, (pd.concat(gs, ignore_index=True) if gs else None)


def _interp_factor(factors: np.ndarray, prog: np.ndarray, target: float) -> tuple[float, int, bool]:
    """log-linear interpolation of the factor whose progress is ``target`` on a sorted ladder:
    (factor, index of the lower bracketing rung, matched = target inside the ladder's range)."""
    lo, hi = prog.min(), prog.max()
    hit = np.flatnonzero(prog == target)
    if len(hit):  # a rung at the target (a flat ladder: the one nearest lr x 1)
        j = int(hit[np.argmin(np.abs(np.log(factors[hit])))])
        return float(factors[j]), min(j, len(factors) - 2), True
    if not lo <= target <= hi:
        j = int(np.argmin(prog)) if target < lo else int(np.argmax(prog))
        return float(factors[j]), j, False
    for j in range(len(factors) - 1):
        a, b = prog[j], prog[j + 1]
        if min(a, b) <= target <= max(a, b):
            w = 0.5 if a == b else (target - a) / (b - a)
            lf = math.log(factors[j]) + w * (math.log(factors[j + 1]) - math.log(factors[j]))
            return math.exp(lf), j, True
    return float(factors[-1]), len(factors) - 2, False  # pragma: no cover - unreachable


def match_controls(runs: pd.DataFrame, metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """The arms' rows plus, for each arm and draw, its progress-matched control (module doc):
    ``role = "control"``, ``lr_factor`` the matched factor, ``target`` (the arm's median final
    train pass@1), ``achieved`` (the control's, over seeds), ``match_error``, ``matched`` (the
    target lies inside the ladder's range; otherwise the nearest rung is used) and ``monotone``
    (the ladder's median train pass@1 increases with the factor)."""
    need = {"population_seed", "seed_index", "arm", "role", "split", "N", "lr_factor"}
    if not need <= set(runs.columns):
        fail("runs", "a table without " + ", ".join(sorted(need - set(runs.columns))),
             "the table of run_draw")  # fmt: skip
    out = []
    arms = runs[runs.role == "arm"]
    for (draw, name), a in arms.groupby(["population_seed", "arm"], sort=False):
        n = int(a.N.iloc[0])
        lad = runs[(runs.role == "ladder") & (runs.population_seed == draw) & (runs.N == n)]
        fac = np.sort(lad.lr_factor.unique())
        if len(fac) < 2:
            fail("runs", f"a ladder of {len(fac)} rung(s) at N = {n}", "at least 2 ladder rungs")
        tr = lad[lad.split == "train"]
        prog = np.array([tr[tr.lr_factor == f].pass_at_1.median() for f in fac])
        target = float(a[a.split == "train"].pass_at_1.median())
        f, j, ok = _interp_factor(fac, prog, target)
        w = (  # the weight of rung j + 1: the factor's position between the two rungs
            (math.log(f) - math.log(fac[j])) / (math.log(fac[j + 1]) - math.log(fac[j]))
            if ok
            else 0.0
        )
        rows = []
        for (si, split), _ in a.groupby(["seed_index", "split"], sort=False):
            r0 = lad[(lad.seed_index == si) & (lad.split == split) & (lad.lr_factor == fac[j])]
            r1 = lad[(lad.seed_index == si) & (lad.split == split)
                     & (lad.lr_factor == fac[min(j + 1, len(fac) - 1)])]  # fmt: skip
            vals = {m: float((1 - w) * r0[m].iloc[0] + w * r1[m].iloc[0]) if ok
                    else float(r0[m].iloc[0]) for m in metrics}  # fmt: skip
            rows.append(dict(population_seed=draw, seed_index=si, arm=name,
                             family=a.family.iloc[0], coef=a.coef.iloc[0], role="control",
                             scheme="grpo", N=n, lr_factor=f, split=split, **vals))  # fmt: skip
        ctl = pd.DataFrame(rows)
        achieved = float(ctl[ctl.split == "train"].pass_at_1.median())
        info = dict(target=target, achieved=achieved, match_error=achieved - target,
                    matched=ok, monotone=bool(np.all(np.diff(prog) >= 0)))  # fmt: skip
        out += [a.assign(**dict(info, achieved=np.nan, match_error=np.nan)), ctl.assign(**info)]
    return pd.concat(out, ignore_index=True)
