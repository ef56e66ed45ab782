"""Run a population config: validate, call the kernel, build the tidy DataFrame.

One row per logged step x run x split x bucket (bucket ``"all"`` plus the mu_0 difficulty
buckets). Metrics are exact functions of the policy (theory.md section 13), no sampling noise:
``pass_at_k`` = mean_p [1 - (1 - mu_p)^k], ``coverage_at_k`` = mean over prompts with rare
strategies of 1 - (1 - tau_p)^k, ``rare_nll`` = mean of -log p over the fixed rare correct
(prompt, strategy) pairs and ``rare_nll_rise`` its rise from step 0, ``entropy`` (nats, mean over
prompts); for train rows also ``active_frac`` (groups with mixed rewards since the previous
logged step) and ``tail_miss_rate`` (active groups that drew none of the prompt's rare
strategies, among active groups of prompts that have some: Lemma 3.1's event B).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .._validate import fail
from .config import PopulationConfig, population_config_hash
from .generate import Population, generate_population

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "simulate_population",
    "advantage_tables",
    "algorithm_record",
    "bucket_labels",
    "CONFIG_COLUMNS",
    "final_metrics",
]

CONFIG_COLUMNS = (
    "name", "P", "P_test", "K", "B", "N", "steps", "algo", "inner_updates", "rule", "advantage",
    "gamma", "optimizer", "lr_shared", "lr_prompt", "adam_state", "dynamic_sampling", "ds_fill",
    "seed",
)  # fmt: skip


#: largest number of per-prompt metric values held in memory (float64)
MAX_OUT = 200_000_000
#: lazy / sparse Adam and theta updates in the kernel (same results bit for bit; the tests
#: switch it off to compare with the eager per-step updates)
_SPARSE = True


def advantage_tables(cfg: PopulationConfig) -> tuple[np.ndarray, np.ndarray, bool]:
    """Per-X advantages of a correct / incorrect rollout, focal weight included (P-12, P-13)."""
    from ..sim.backend import _zero_sum

    rc, rw = cfg.rewards
    sch = cfg.training_scheme()
    if sch.needs_logprobs:  # per-group advantages in the kernel; unlikeliness is zero-sum
        z = np.zeros(cfg.N + 1)
        return z, z.copy(), sch.base.name != "ds"
    a_c, a_w = sch.tables(cfg.N, rc, rw)
    return a_c, a_w, _zero_sum(a_c, a_w, cfg.N)


def algorithm_record(cfg: PopulationConfig, zero_sum: bool, dynamic: bool = True):
    """The simulator's kernel record :class:`fgrpo_theory.sim.records.Algorithm` of ``cfg``
    (group size, surrogate, algorithm, inner updates, clip bounds with the algorithm's defaults,
    dual clip, dynamic sampling; ``dynamic = False`` switches dynamic sampling off)."""
    import math

    from ..sim import kcore as kc
    from ..sim.records import Algorithm

    clip_lo, clip_hi = cfg.clip_bounds()
    return Algorithm(
        N=int(cfg.N),
        rule=kc.RULE_LINEAR if cfg.rule == "linear" else kc.RULE_LOGPROB,
        algo=kc.ALGO_CISPO if cfg.algo == "cispo" else kc.ALGO_PPO,
        inner=int(cfg.inner_updates),
        clip_lo=float(clip_lo),
        clip_hi=float(clip_hi),
        dyn=bool(dynamic and cfg.dynamic_sampling != "off"),
        max_res=int(cfg.max_resamples),
        sampler=kc.SAMPLER_IID,  # unused: population groups are drawn i.i.d.
        zero_sum=bool(zero_sum),
        keep=cfg.ds_keep(),
        dual_c=math.inf if cfg.dual_clip is None else float(cfg.dual_clip),
    )


def bucket_labels(edges: tuple[float, ...]) -> list[str]:
    e = [0.0, *edges, 1.0]
    return [f"[{e[i]:g},{e[i + 1]:g}{']' if i == len(e) - 2 else ')'}" for i in range(len(e) - 1)]


def _run_keys(cfg: PopulationConfig) -> np.ndarray:
    from ..sim.keys import run_keys

    return run_keys(cfg.seed, cfg.seeds)


def simulate_population(
    config: PopulationConfig,
    *,
    population: Population | None = None,
    threads: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    per_prompt: bool = False,
) -> pd.DataFrame:
    """Train every run (seed) of ``config``; the tidy DataFrame of its logged metrics.

    Parameters
    ----------
    config : PopulationConfig
    population : Population, optional
        Use these arrays instead of generating them from the config (tests, custom models).
    threads : int, optional
        Threads for the loop over runs, at most ``NUMBA_NUM_THREADS`` (default:
        :func:`~fgrpo_theory.sim.threads.default_threads`: Numba's setting, at most the
        process's cgroup CPU limit while that setting is Numba's own default); results are
        bit-identical for any value.
    progress : callable, optional
        ``progress(runs_done, runs_total)`` after each batch of runs.
    per_prompt : bool
        Return the raw per-prompt table instead (columns run, step, prompt, split, mu, tau,
        entropy, nll_rare_sum, groups, active, tail_miss, resamples).
    """
    if not isinstance(config, PopulationConfig):
        fail("config", config, "a PopulationConfig")
    cfg = config
    pop = generate_population(cfg) if population is None else population
    out_p, out_c, log_steps = _run(cfg, pop, threads, progress)
    if per_prompt:
        return _per_prompt_frame(out_p, out_c, log_steps, pop.n_train)
    return _tidy(cfg, pop, out_p, out_c, log_steps)


def _run(cfg: PopulationConfig, pop: Population, threads, progress):
    """Validate, call the kernel; ``(out_p, out_c, log_steps)``."""
    import numba

    from . import kernel as kn

    n_train = pop.n_train
    if cfg.B > n_train:
        fail("B", cfg.B, f"<= the number of train prompts ({n_train})")
    a_c, a_w, zero_sum = advantage_tables(cfg)
    P_all, K = pop.phi0.shape
    R = cfg.seeds
    # logged steps counted before any schedule is built: 0, every log_every, and the last
    n_log = cfg.steps // cfg.log_every + 1 + (cfg.steps % cfg.log_every != 0)
    if R * n_log * P_all * 4 > MAX_OUT:
        fail(
            "log_every",
            cfg.log_every,
            f"such that seeds x logged steps x prompts x 4 <= {MAX_OUT} ({R} x {n_log} x "
            f"{P_all} x 4 now: raise log_every or lower seeds)",
        )
    log_steps = cfg.log_schedule()
    assert len(log_steps) == n_log
    keys = _run_keys(cfg)
    out_p = np.zeros((R, n_log, P_all, kn.N_PMET))
    out_c = np.zeros((R, n_log, n_train, kn.N_CNT), dtype=np.int64)
    has_rare = pop.rare.any(axis=1)
    fill = cfg.ds_fill == "next-prompt" and cfg.dynamic_sampling != "off"
    if fill and n_train <= cfg.B:
        fail("ds_fill", cfg.ds_fill, f"'redraw' when B = the {n_train} train prompts (none left)")
    alg = algorithm_record(cfg, zero_sum, dynamic=not fill)
    opt = {"sgd": kn.OPT_SGD, "adam": kn.OPT_ADAM, "adamw": kn.OPT_ADAMW}[cfg.optimizer]
    from ..policy import log_probabilities
    from ..sim.records import scheme_terms

    # reference of a KL term: each train prompt's initial softmax
    sr = scheme_terms(
        cfg.training_scheme(), cfg.N, lambda: log_probabilities(pop.theta0 + pop.phi0[:n_train])
    )
    sparse = _SPARSE and (sr is None or (sr.ent_coef == 0.0 and sr.kl_coef == 0.0))
    theta0, phi0 = pop.theta0, pop.phi0
    if cfg.precision == "float32":
        theta0, phi0 = _float32_logits(cfg, pop, a_c, a_w)
    from ..sim.threads import compile_for, on_threads, run_threads

    nt = run_threads(threads)
    old = numba.get_num_threads()
    numba.set_num_threads(nt)
    try:
        tab = kn.adam_table_of(
            opt, cfg.lr_prompt, cfg.weight_decay, cfg.beta1, cfg.beta2, cfg.adam_eps,
            cfg.adam_state == "per-prompt", cfg.steps * alg.inner,
        )  # fmt: skip

        def one_run(r: int) -> tuple:
            """The arguments of ``kernel.pop_run`` for run ``r``."""
            return (
                theta0, phi0, pop.correct, pop.rare, has_rare, n_train, cfg.B, cfg.steps,
                log_steps, a_c, a_w, keys[r], alg, sr, fill, opt, cfg.lr_shared, cfg.lr_prompt,
                cfg.weight_decay, cfg.beta1, cfg.beta2, cfg.adam_eps,
                cfg.adam_state == "per-prompt", sparse, tab, out_p[r], out_c[r],
            )  # fmt: skip

        def block(lo: int, hi: int) -> None:
            for r in range(lo, hi):
                kn.pop_run(*one_run(r))

        # runs on Python threads, one block each (pop_run releases the GIL), as the simulator
        # does: no parallel kernel, whose parfor lowering and second optimization of everything
        # pop_run calls were about a third of a cold start's compilation; compiled (or loaded)
        # here first, not by the threads at once
        compile_for(kn.pop_run, one_run(0))
        batch = R if progress is None else max(1, min(R, nt))
        for lo in range(0, R, batch):
            hi = min(R, lo + batch)
            on_threads(lambda a, b, lo=lo: block(lo + a, lo + b), hi - lo)
            if progress is not None:
                progress(hi, R)
    finally:
        numba.set_num_threads(old)
    if not np.isfinite(out_p[..., kn.P_MU]).all() or not np.isfinite(out_p[..., kn.P_NLL]).all():
        fail("lr_prompt", cfg.lr_prompt, "small enough that the logits stay finite (overflow)")
    return out_p, out_c, log_steps


class _Float32Check:
    """A population config seen by :func:`fgrpo_theory.sim.precision.check_float32`: its
    fields, with ``lr`` the smaller positive of ``lr_shared`` and ``lr_prompt`` (a step size
    below float32's resolution stops that parameter group)."""

    def __init__(self, cfg: PopulationConfig) -> None:
        self._cfg = cfg
        self.lr = min(x for x in (cfg.lr_shared, cfg.lr_prompt) if x > 0.0)

    def __getattr__(self, name: str):
        return getattr(self._cfg, name)


def _float32_logits(cfg: PopulationConfig, pop: Population, a_c, a_w):
    """``(theta0, phi0)`` in float32, after the simulator's float32 checks (one-line refusal
    naming ``precision``) on every prompt's initial logits ``theta0 + phi0`` (the softmax span
    taken over all prompts together: a conservative bound)."""
    from ..sim.precision import MAX_ROUNDING32, check_float32

    z = pop.theta0[None, :] + pop.phi0
    check_float32(_Float32Check(cfg), z.ravel(), pop.correct.ravel(), a_c, a_w)
    th = pop.theta0.astype(np.float32)
    ph = pop.phi0.astype(np.float32)
    for a, a32 in ((pop.theta0, th), (pop.phi0, ph)):
        moved = float(np.abs(a32.astype(np.float64) - a).max())
        if moved > MAX_ROUNDING32:
            fail("precision", "float32", f"float64 for these logits: rounding them to float32 "
                 f"moves one by {moved:.3g} > {MAX_ROUNDING32:g} nats")  # fmt: skip
    return th, ph


def _per_prompt_frame(out_p, out_c, log_steps, n_train) -> pd.DataFrame:
    import pandas as pd

    R, n_log, P_all, _ = out_p.shape
    cnt = np.zeros((R, n_log, P_all, out_c.shape[-1]), dtype=np.int64)
    cnt[:, :, :n_train] = out_c
    idx = np.indices((R, n_log, P_all)).reshape(3, -1)
    flat = out_p.reshape(-1, out_p.shape[-1])
    cf = cnt.reshape(-1, cnt.shape[-1])
    return pd.DataFrame(
        dict(
            run=idx[0], step=log_steps[idx[1]], prompt=idx[2],
            split=np.where(idx[2] < n_train, "train", "test"),
            mu=flat[:, 0], tau=flat[:, 1], entropy=flat[:, 2], nll_rare_sum=flat[:, 3],
            groups=cf[:, 0], active=cf[:, 1], tail_miss=cf[:, 2], resamples=cf[:, 3],
        )
    )  # fmt: skip


def _metrics(pass_k, out_p, g, n_rare_pairs) -> dict[str, np.ndarray]:
    """The exact metrics of prompts ``g`` (theory.md section 13), flattened (run, logged step):
    pass@k, rare coverage@k, rare NLL and its rise from the first logged step, entropy."""
    from .._libm import power
    from . import kernel as kn

    R, n_log = out_p.shape[:2]
    mu = out_p[:, :, g, kn.P_MU].clip(0.0, 1.0)  # (R, n_log, n)
    tau = out_p[:, :, g, kn.P_TAU].clip(0.0, 1.0)
    d: dict[str, np.ndarray] = {}
    for k in pass_k:
        d[f"pass_at_{k}"] = (1.0 - power(1.0 - mu, k)).mean(axis=2).ravel()
    hr = n_rare_pairs[g] > 0
    for k in pass_k:
        if hr.any():
            cov = (1.0 - power(1.0 - tau[:, :, hr], k)).mean(axis=2).ravel()
        else:
            cov = np.full(R * n_log, np.nan)
        d[f"coverage_at_{k}"] = cov
    npairs = n_rare_pairs[g].sum()
    if npairs > 0:
        nll = out_p[:, :, g, kn.P_NLL].sum(axis=2) / npairs
        d["rare_nll"] = nll.ravel()
        d["rare_nll_rise"] = (nll - nll[:, :1]).ravel()
    else:
        d["rare_nll"] = d["rare_nll_rise"] = np.full(R * n_log, np.nan)
    d["entropy"] = out_p[:, :, g, kn.P_ENT].mean(axis=2).ravel()
    return d


def final_metrics(
    config: PopulationConfig, *, population: Population | None = None, threads: int | None = 1
) -> dict[str, dict[str, np.ndarray]]:
    """Last-step metrics per split and seed, without the tidy table (progress searches).

    ``{"train": {metric: array (seeds,)}, "test": {...}}`` with the metrics of
    :func:`simulate_population` (bucket "all"), the same numbers bit for bit, computed from a run
    that logs only step 0 and the last step (the kernel's random streams do not depend on what
    is logged).
    """
    if not isinstance(config, PopulationConfig):
        fail("config", config, "a PopulationConfig")
    cfg = config.replace(log_every=config.steps)
    pop = generate_population(cfg) if population is None else population
    out_p, _, _ = _run(cfg, pop, threads, None)
    n_rare_pairs = pop.rare.sum(axis=1).astype(float)
    P_all = out_p.shape[2]
    out = {}
    for split, ids in (("train", np.arange(pop.n_train)), ("test", np.arange(pop.n_train, P_all))):
        if len(ids):
            m = _metrics(cfg.pass_k, out_p, ids, n_rare_pairs)
            out[split] = {k: v.reshape(cfg.seeds, -1)[:, -1] for k, v in m.items()}
    return out


def _tidy(cfg, pop, out_p, out_c, log_steps) -> pd.DataFrame:
    """One row per (split, bucket, run, logged step): the metrics of the prompts of each
    (split, bucket) group, then the config columns. Built as one frame from whole columns (a
    frame per group and a column at a time cost more than the metrics themselves)."""
    import pandas as pd

    from . import kernel as kn

    R, n_log, P_all, _ = out_p.shape
    n_train = pop.n_train
    labels = bucket_labels(cfg.buckets)
    bidx = np.searchsorted(np.asarray(cfg.buckets), pop.mu0, side="right")
    n_rare_pairs = pop.rare.sum(axis=1).astype(float)
    has_rare = n_rare_pairs > 0
    n = R * n_log
    keys, parts = [], []  # (split, bucket, prompts) and the metric columns of each group
    for split, sl in (("train", slice(0, n_train)), ("test", slice(n_train, P_all))):
        ids = np.arange(P_all)[sl]
        if len(ids) == 0:
            continue
        groups = [("all", ids)] + [(lab, ids[bidx[ids] == j]) for j, lab in enumerate(labels)]
        for lab, g in groups:
            if len(g) == 0:
                continue
            d = _metrics(cfg.pass_k, out_p, g, n_rare_pairs)
            hr = has_rare[g]
            if split == "train":
                c = out_c[:, :, g]  # (R, n_log, n, N_CNT)
                grp = c[..., kn.C_GROUPS].sum(axis=2)
                act = c[..., kn.C_ACTIVE].sum(axis=2)
                act_r = c[:, :, hr, kn.C_ACTIVE].sum(axis=2)
                tail = c[..., kn.C_TAIL].sum(axis=2)
                with np.errstate(invalid="ignore", divide="ignore"):
                    d["groups"] = grp.ravel()
                    d["resamples"] = c[..., kn.C_RESAMPLES].sum(axis=2).ravel()
                    d["active_frac"] = np.where(grp > 0, act / np.maximum(grp, 1), np.nan).ravel()
                    d["tail_miss_rate"] = np.where(
                        act_r > 0, tail / np.maximum(act_r, 1), np.nan
                    ).ravel()
            else:
                d["groups"] = np.zeros(n, dtype=np.int64)
                d["resamples"] = np.zeros(n, dtype=np.int64)
                d["active_frac"] = d["tail_miss_rate"] = np.full(n, np.nan)
            keys.append((split, lab, len(g)))
            parts.append(d)
    runs = np.repeat(np.arange(R), n_log)
    cols: dict = {
        "run": np.tile(runs, len(parts)),
        "seed_index": np.tile(runs, len(parts)),
        "step": np.tile(log_steps, R * len(parts)),
        "split": np.repeat([k[0] for k in keys], n).astype(object),
        "bucket": np.repeat([k[1] for k in keys], n).astype(object),
        "n_prompts": np.repeat(np.array([k[2] for k in keys], dtype=np.int64), n),
    }
    for name in parts[0]:
        cols[name] = np.concatenate([d[name] for d in parts])
    cfgd = cfg.to_dict()
    for c in CONFIG_COLUMNS:
        cols[c] = cfgd[c]
    cols["config_hash"] = population_config_hash(cfg)
    cols["scheme"] = cfg.training_scheme().spec
    cols["population_seed"] = cfg.population_seed
    cols["precision"] = cfg.precision
    return pd.DataFrame(cols)
