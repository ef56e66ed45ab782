"""Run a :class:`SimConfig`: build arrays, call the kernels, return a long-format DataFrame."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .backend import _zero_sum, choose_backend, choose_sampler
from .config import SimConfig, parse_index_set, parse_logits
from .grid import config_hash
from .keys import run_keys

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "simulate",
    "SimTables",
    "run_one",
    "prepare",
    "CONFIG_COLUMNS",
    "choose_backend",
    "choose_sampler",
]

#: Config fields copied into every output row (besides ``config_hash``).
CONFIG_COLUMNS = (
    "name",
    "K",
    "logits",
    "correct",
    "N",
    "steps",
    "algo",
    "rule",
    "advantage",
    "gamma",
    "optimizer",
    "lr",
    "weight_decay",
    "inner_updates",
    "clip_low",
    "clip_high",
    "dynamic_sampling",
    "r_correct",
    "r_incorrect",
    "seed",
    "dual_clip",
    "ds_range",
)

#: Largest N for which the sum-tree path tabulates exp(dz) per (X, n) instead of calling exp.
ETAB_MAX_N = 64


def prepare(cfg: SimConfig) -> dict:
    """Arrays and scalars the kernels need (validated config in, NumPy arrays out)."""
    from ..policy import probabilities

    K, N = cfg.K, cfg.N
    z0 = parse_logits(cfg.logits, K)
    correct = np.zeros(K, dtype=np.uint8)
    if isinstance(cfg.correct, str):
        correct[parse_index_set(cfg.correct, K, "correct")] = 1
    else:
        correct[: cfg.correct] = 1
    names = list(cfg.subsets)
    submask = np.zeros((len(names), K), dtype=np.uint8)
    for j, nm in enumerate(names):
        submask[j, parse_index_set(cfg.subsets[nm], K, f"subsets.{nm}")] = 1
    # per-X tables of the scheme, focal weight included (P-12, P-13; schemes/base.py); a
    # likelihood-aware scheme has none (its advantages are computed per group in the kernel)
    sch = cfg.training_scheme()
    if sch.needs_logprobs:
        adv_c = adv_w = np.zeros(N + 1)
    else:
        adv_c, adv_w = sch.tables(N, cfg.r_correct, cfg.r_incorrect)
    if cfg.precision == "float32":
        from .precision import check_float32

        z0 = check_float32(cfg, z0, correct, adv_c, adv_w)  # float32: runs start from these
    p0 = probabilities(z0.astype(np.float64))
    sum_p0c = float(p0[correct == 1].sum())
    clip_lo, clip_hi = cfg.clip_bounds()
    return dict(
        z0=z0,
        correct=correct,
        submask=submask,
        subset_names=names,
        p0=p0,
        sum_p0c=sum_p0c,
        adv_c=adv_c,
        adv_w=adv_w,
        log_steps=cfg.log_schedule(),
        clip_lo=clip_lo,
        clip_hi=clip_hi,
        # unlikeliness is zero-sum by construction (GRPO-norm of m); DS is not
        zero_sum=_zero_sum(adv_c, adv_w, N) if not sch.needs_logprobs else sch.base.name != "ds",
        backend=choose_backend(cfg, adv_c, adv_w),
        sampler=choose_sampler(cfg),
        ds_keep=cfg.ds_keep(),
        dual_c=math.inf if cfg.dual_clip is None else float(cfg.dual_clip),
    )


def build_records(cfg: SimConfig, a: dict) -> dict:
    """The kernels' parameter records for ``cfg``, each built once, field by field, by name."""
    from . import kcore as kc
    from . import records as rc
    from .kernels import SAMPLER_TREE

    prob = rc.Problem(
        z0=a["z0"],
        correct=a["correct"],
        p0=a["p0"],
        sum_p0c=float(a["sum_p0c"]),
        adv_c=a["adv_c"],
        adv_w=a["adv_w"],
    )
    log = rc.Logging(
        log_steps=a["log_steps"],
        submask=a["submask"],
        thresholds=np.asarray(cfg.thresholds, dtype=np.float64),
        n_steps=int(cfg.steps),
    )
    tree = a["backend"] == "sumtree"
    if tree:
        sampler = SAMPLER_TREE
    else:
        sampler = kc.SAMPLER_IID if a["sampler"] == "iid" else kc.SAMPLER_SORTED
    alg = rc.Algorithm(
        N=int(cfg.N),
        rule=kc.RULE_LINEAR if cfg.rule == "linear" else kc.RULE_LOGPROB,
        algo=kc.ALGO_CISPO if cfg.algo == "cispo" else kc.ALGO_PPO,
        inner=int(cfg.inner_updates),
        clip_lo=float(a["clip_lo"]),
        clip_hi=float(a["clip_hi"]),
        dyn=cfg.dynamic_sampling != "off",
        max_res=int(cfg.max_resamples),
        sampler=sampler,
        zero_sum=bool(a["zero_sum"]),
        keep=a["ds_keep"],
        dual_c=float(a["dual_c"]),
    )
    opt = rc.Optimizer(
        kind={"sgd": kc.OPT_SGD, "adam": kc.OPT_ADAM, "adamw": kc.OPT_ADAMW}[cfg.optimizer],
        lr=float(cfg.lr),
        wd=float(cfg.weight_decay),
        b1=float(cfg.beta1),
        b2=float(cfg.beta2),
        eps=float(cfg.adam_eps),
    )
    from .._libm import exp
    from ..policy import log_probabilities

    terms = rc.scheme_terms(
        cfg.training_scheme(), cfg.N, lambda: log_probabilities(a["z0"].astype(np.float64))[None]
    )
    rec = dict(prob=prob, log=log, alg=alg, opt=opt, tree=None, scheme=terms)
    if tree:
        if cfg.N <= ETAB_MAX_N:  # exp(lr n A(X) / N) for X, n = 0..N, same arithmetic as the kernel
            n = np.arange(cfg.N + 1)[None, :]
            inv_n = 1.0 / cfg.N
            etab_c = exp(cfg.lr * ((n * a["adv_c"][:, None]) * inv_n))  # the C library's, as the
            etab_w = exp(cfg.lr * ((n * a["adv_w"][:, None]) * inv_n))  # kernel's (_libm)
        else:
            etab_c = etab_w = np.ones((1, 1))
        rec["tree"] = rc.Tree(renorm_every=int(cfg.renorm_every), etab_c=etab_c, etab_w=etab_w)
    return rec


#: whether eligible dense configs at small K take :mod:`.ksmall`'s loop (tests compare both)
SMALL_PATH = True
#: whether those of them :func:`.klanes.lanes_eligible` takes run in SIMD lanes (the same bits)
LANES = True
#: A thread with at most this many runs calls the one-run kernel (``kernels.run_steps``,
#: ``ksmall.run_small``) once per run from Python instead of the batch kernel (the same numbers):
#: a first simulate of a few runs then compiles no batch kernel, whose compilation optimizes and
#: emits again all the code it calls (measured, empty cache: the sum-tree config of
#: ``bench_startup.py`` compiled the one-run kernel in 5.5 s CPU, its first simulate took 12 s);
#: a call from Python costs about 30 us.
DIRECT_RUNS = 16
#: whether the run loops call the metrics pass through its address (``kmetrics.metrics_into``),
#: compiled beside them on a cold start (``sim/beside.py``), or link it in (tests compare both)
METRICS_BY_ADDRESS = True


def _run_chunk(
    rec: dict,
    st,
    step_lo: int,
    step_hi: int,
    out: np.ndarray,
    thr_out: np.ndarray | None = None,
    thr_step: np.ndarray | None = None,
) -> None:
    """Advance the runs of ``st`` from step ``step_lo`` to ``step_hi`` (state carried in ``st``).

    ``out[r, n_log, n_metrics]`` (the kernels do not check bounds, so the widths are checked
    here); ``thr_out``/``thr_step`` default to no thresholds being recorded.
    """
    from . import kernels as kn

    p, lg, al, op = rec["prob"], rec["log"], rec["alg"], rec["opt"]
    R = st.z.shape[0]
    n_met = kn.n_metrics(lg.submask.shape[0])
    n_thr = lg.thresholds.shape[0]
    if thr_out is None or thr_step is None:
        thr_out = np.full((R, n_thr, n_met), np.nan)
        thr_step = np.full((R, n_thr), -1, dtype=np.int64)
    if (
        out.shape[0] != R
        or out.shape[1] != lg.log_steps.shape[0]
        or out.shape[2] != n_met
        or thr_out.shape != (R, n_thr, n_met)
        or thr_step.shape != (R, n_thr)
    ):
        raise ValueError(f"output arrays of shape {out.shape} do not fit the records (a bug)")
    from . import klanes, ksmall
    from .kcore import OPT_SGD
    from .kmetrics import metrics_address
    from .threads import compile_for, n_blocks, on_threads, rows

    # an argument None: its code is not compiled (Adam, dynamic sampling; below: dense, thresholds)
    ad, ds = (None if op.kind == OPT_SGD else True), (True if al.dyn else None)
    if SMALL_PATH and ksmall.small_eligible(rec, st.z):  # the lean loop of small K (same bits)

        def one_run(r: int, sctab: np.ndarray, t_base: int, met: int | None) -> tuple:
            """The arguments of ``ksmall.run_small`` for run ``r``."""
            return (
                p, lg, al, op, ad, ds, st.z[r], st.mm[r], st.vv[r], st.rng[r], st.ints[r],
                st.tails[r], step_lo, step_hi, out[r], sctab, t_base, met,
            )  # fmt: skip

        def scalars(lo: int, hi: int) -> tuple[np.ndarray, int]:
            K = st.z.shape[1]
            if ad is None or K >= ksmall.ADAM_SCALAR_K:  # no per-step scalars read
                return np.zeros((1, 3)), 0
            return ksmall.step_scalars(op, ad, st.ints[lo:hi], K, step_lo, step_hi)

        met = None
        all_lanes = LANES and klanes.lanes_eligible(rec, st.z) and R // n_blocks(R) > DIRECT_RUNS
        if METRICS_BY_ADDRESS and not all_lanes:
            # some block runs the one-run loop (run_small_batch nests it): it compiles first, for
            # an int64 address (0 here: types only), beside the pass on a cold start
            met = metrics_address(
                lambda: compile_for(ksmall.run_small, one_run(0, *scalars(0, 1), 0))
            )

        def block(lo: int, hi: int) -> None:
            if hi - lo > DIRECT_RUNS and LANES and klanes.lanes_eligible(rec, st.z):
                klanes.run_lanes(p, lg, al, op, ad, rows(st, lo, hi), step_lo, step_hi, out[lo:hi])
                return
            if hi - lo > DIRECT_RUNS:
                ksmall.run_small_batch(
                    p, lg, al, op, ad, ds, rows(st, lo, hi), step_lo, step_hi, out[lo:hi], met
                )
                return
            sctab, t_base = scalars(lo, hi)
            for r in range(lo, hi):
                ksmall.run_small(*one_run(r, sctab, t_base, met))

    else:
        some = n_thr > 0
        dn = True if rec["tree"] is None else None
        tr, sr = rec["tree"], rec["scheme"]

        def one_run(r: int, met: int | None) -> tuple:
            """The arguments of ``kernels.run_steps`` for run ``r``."""
            return (
                p, lg, al, op, tr, dn, ad, sr, ds, st.z[r], st.mm[r], st.vv[r], st.tree[r],
                st.shift[r : r + 1], st.rng[r], st.ints[r], st.tails[r], step_lo, step_hi,
                out[r], thr_out[r] if some else None, thr_step[r] if some else None, met,
            )  # fmt: skip

        met = None
        # float32 logits, and the threshold checks (kthresh), call the pass directly
        if METRICS_BY_ADDRESS and st.z.dtype == np.float64 and not some:
            met = metrics_address(
                lambda: compile_for(kn.run_steps, one_run(0, 0)),
                None if tr is None else "fgrpo_theory.sim.beside:sum_tree_then_metrics",
            )

        def block(lo: int, hi: int) -> None:
            if hi - lo > DIRECT_RUNS:
                kn.run_batch(
                    p, lg, al, op, tr, dn, ad, sr, ds, rows(st, lo, hi), step_lo, step_hi,
                    out[lo:hi], thr_out[lo:hi] if some else None,
                    thr_step[lo:hi] if some else None, met,
                )  # fmt: skip
                return
            for r in range(lo, hi):
                kn.run_steps(*one_run(r, met))

    on_threads(block, R)


def _next_chunk(steps: int, seconds: float, planned: int) -> int:
    """Steps of the next kernel call: as many as took :data:`.budget.CHUNK_SECONDS` in the call
    just measured (``steps`` in ``seconds``), at most the planned chunk.

    The plan is an estimate; on a slower or loaded machine a planned chunk took many times the
    target, and Ctrl-C (acted on between calls only: a kernel holds the interpreter) waited
    that long. Shrinking to the measured rate bounds that wait; growing back to the plan (a
    first call that also compiled or loaded the kernels is slow) keeps the calls few. Chunk
    boundaries change no number (the state carries over), so this is timing only.
    """
    from .budget import CHUNK_SECONDS

    if seconds <= 0.0:
        return planned
    return max(1, min(planned, int(steps * CHUNK_SECONDS / seconds)))


class SimTables(NamedTuple):
    """Output of ``simulate(config, tables=True)``.

    ``log``: the long per-step frame (``simulate``'s default output); ``thresholds``: one row per
    run and Q_pos threshold of ``config.thresholds`` (none: empty); dicts if ``as_frame=False``."""

    log: pd.DataFrame | dict[str, object]
    thresholds: pd.DataFrame | dict[str, object]


def _start_nll(rec: dict, n_met: int) -> np.ndarray:
    """The metrics row of the initial policy (its subset NLLs are the base of ``nll_rise_*``),
    computed by the kernels' own metric function, so a logged step 0 has a rise of exactly 0."""
    from .kmetrics import _metrics

    p, lg = rec["prob"], rec["log"]
    row = np.zeros(n_met)
    _metrics(p.z0, p.correct, lg.submask, p.p0, p.sum_p0c, row)
    return row


def simulate(
    config: SimConfig,
    threads: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    chunk_steps: int | None = None,
    *,
    tables: bool = False,
    as_frame: bool = True,
) -> pd.DataFrame | SimTables | dict[str, object]:
    """Simulate every run (prompt x seed) of ``config``; long-format DataFrame.

    The categorical simulation of Fig. 2 (docs/theory.md section 8): each step draws a group of
    ``N`` actions from the softmax policy, computes the (focal) advantages and applies the
    surrogate's update. With ``inner_updates > 1`` GRPO / DAPO use the PPO clipped ratio and CISPO
    the stop-gradient clipped importance weight of (P-15) with the clip of (P-16).

    Parameters
    ----------
    config : SimConfig
        The experiment (already validated).
    threads : int, optional
        Threads for the loop over runs, an integer >= 1, set for the call (at most
        ``NUMBA_NUM_THREADS``; default: Numba's current setting, at most the process's cgroup
        CPU limit while that setting is Numba's own default, see
        :func:`.threads.default_threads`; each thread runs a block of runs in a kernel that
        releases the GIL). Results are bit-identical for any value.
    progress : callable, optional
        Called as ``progress(runs_done, runs_total)`` after each chunk of steps (``runs_done``
        counts finished fractions of runs, rounded down).
    chunk_steps : int, optional
        Steps per kernel call (default: about half a second of work, see
        :func:`.budget.plan_chunks`, shrunk to the measured rate when a call takes longer:
        :func:`_next_chunk`). Results are bit-identical for any value; Ctrl-C is honoured
        between chunks.
    tables : bool
        If true, return :class:`SimTables` ``(log, thresholds)`` instead of the log alone.
    as_frame : bool
        If false, each table is the dict of columns its DataFrame is built from, without
        importing pandas (about 0.4 s of a short run's process): column name to a 1-D array,
        or to a scalar for a column that is constant over the rows (the config columns, and
        ``precision`` and ``scheme`` of the log). The same numbers, in the same order. The
        arrays are not copied: the metric columns are views of one buffer, and with dynamic
        sampling off ``kept_tail_miss_<subset>`` is the array of ``tail_miss_<subset>``; copy a
        column before writing to it.

    Returns
    -------
    pandas.DataFrame
        One row per logged step and run with columns ``run``, ``prompt``, ``seed_index``,
        ``step``, the config columns (:data:`CONFIG_COLUMNS`, ``config_hash``, ``backend``;
        ``dual_clip`` is NaN when off, ``ds_range`` is ``"lo,hi"`` for the OpenRLHF filter and
        empty otherwise), and metrics: ``q_pos`` (correct mass), ``m_ret`` (retained positive
        mass, P-26), ``entropy`` (nats), ``mass_<subset>``, ``pass_at_<k>`` (exact,
        ``1 - (1 - q_pos)^k``), ``groups`` (groups drawn since the previous logged step, first
        draws only), ``active_frac`` (the fraction of them with mixed rewards, P-7; NaN at step 0
        where no group was drawn),
        ``tail_miss_<subset>`` (count of those groups that were active and drew no action of the
        subset: the event B of Lemma 3.1), ``resamples`` (dynamic-sampling redraws), then
        ``nll_<subset>`` (mean of ``-log p`` over the subset, ``logsumexp(z) - mean_S z``, exact
        for any subset size: the analogue of the rare-solution NLL of appendix M, theory.md
        section 11) and ``nll_rise_<subset>`` (its rise from step 0), and the counts over the
        *kept* groups (the group each step trains on: the last draw under dynamic sampling, else
        the first): ``kept_active`` (kept groups with mixed rewards; fewer than ``groups`` when
        ``max_resamples`` ran out or the filter keeps all-equal groups) and
        ``kept_tail_miss_<subset>`` (kept active groups that drew no action of the subset; their
        frequency estimates Pr(B | A_N), theory.md section 12).
    SimTables
        With ``tables=True``: ``log`` (the frame above) and ``thresholds``, one row per run and
        threshold t of ``config.thresholds`` (equal-progress metrics, theory.md section 11,
        computed in the kernel after every step, so no per-step logging is needed): ``run``,
        ``prompt``, ``seed_index``, ``threshold``, ``reached`` (bool), ``step`` (the first step
        whose ``q_pos >= t``, 0 = the start; -1 if never), and at that step ``q_pos``, ``m_ret``,
        ``entropy``, ``mass_<subset>``, ``nll_<subset>``, ``nll_rise_<subset>`` (NaN when not
        reached: never imputed), then the config columns. The same numbers as
        :func:`fgrpo_theory.fair.threshold_metrics` on an every-step log.
    """
    import numba

    from ..passk import pass_at_k_exact
    from .kernels import (
        M_ACTIVE,
        M_ENT,
        M_GROUPS,
        M_MRET,
        M_QPOS,
        M_RESAMPLES,
        M_SUB0,
        m_kept_active,
        m_kept_tail,
        m_nll,
        n_metrics,
    )

    if not isinstance(config, SimConfig):
        from .._validate import fail

        fail("config", config, "a SimConfig")
    cfg = config
    from .budget import check_budget
    from .threads import run_threads

    nt = run_threads(threads)  # the threads that run
    check_budget(cfg, nt)  # refuse before allocating anything
    a = prepare(cfg)
    rec = build_records(cfg, a)
    R = cfg.n_runs
    keys = run_keys(cfg.seed, R)
    n_sub = len(a["subset_names"])
    n_log = len(a["log_steps"])
    n_met = n_metrics(n_sub)
    n_thr = len(cfg.thresholds)
    out = np.zeros((R, n_log, n_met))
    thr_out = np.full((R, n_thr, n_met), np.nan)
    thr_step = np.full((R, n_thr), -1, dtype=np.int64)
    old_threads = numba.get_num_threads()
    numba.set_num_threads(nt)
    try:
        from .budget import plan_chunks
        from .records import new_state

        # Runs are independent, and a chunk of steps carries every piece of a run's state
        # (logits, moments, random stream, counters, tree) to the next, so neither the batches
        # of runs nor the chunks of steps change any number. Chunks bound the time between
        # returns to Python, where Ctrl-C (KeyboardInterrupt) and progress are handled.
        batch, planned = plan_chunks(cfg, nt, chunk_steps)
        chunk = planned
        for lo in range(0, R, batch):
            hi = min(R, lo + batch)
            st = new_state(
                rec["prob"], rec["log"], rec["opt"], keys[lo:hi], rec["tree"] is not None
            )
            s_lo = 0
            while s_lo < cfg.steps:
                s_hi = min(cfg.steps, s_lo + chunk)
                t0 = time.perf_counter()
                _run_chunk(rec, st, s_lo, s_hi, out[lo:hi], thr_out[lo:hi], thr_step[lo:hi])
                if chunk_steps is None:
                    chunk = _next_chunk(s_hi - s_lo, time.perf_counter() - t0, planned)
                s_lo = s_hi
                if progress is not None:
                    progress(lo + ((hi - lo) * s_hi) // cfg.steps, R)
    finally:
        numba.set_num_threads(old_threads)

    run = np.repeat(np.arange(R), n_log)
    cols: dict[str, object] = {
        "run": run,
        "prompt": run // cfg.seeds,
        "seed_index": run % cfg.seeds,
        "step": np.tile(a["log_steps"], R),
    }
    flat = out.reshape(R * n_log, -1)
    if not np.isfinite(flat[:, [M_QPOS, M_MRET, M_ENT]]).all():
        from .._validate import fail

        fail("lr", cfg.lr, "small enough that the logits stay finite (they overflowed in this run)")
    cols["q_pos"] = flat[:, M_QPOS]
    cols["m_ret"] = flat[:, M_MRET]
    cols["entropy"] = flat[:, M_ENT]
    for j, nm in enumerate(a["subset_names"]):
        cols[f"mass_{nm}"] = flat[:, M_SUB0 + j]
    for k in cfg.pass_k:
        cols[f"pass_at_{k}"] = pass_at_k_exact(np.clip(flat[:, M_QPOS], 0.0, 1.0), k)
    groups = flat[:, M_GROUPS].astype(np.int64)
    cols["groups"] = groups
    with np.errstate(invalid="ignore", divide="ignore"):
        cols["active_frac"] = np.where(
            groups > 0, flat[:, M_ACTIVE] / np.maximum(groups, 1), np.nan
        )
    for j, nm in enumerate(a["subset_names"]):
        cols[f"tail_miss_{nm}"] = flat[:, M_SUB0 + n_sub + j].astype(np.int64)
    cols["resamples"] = flat[:, M_RESAMPLES].astype(np.int64)
    d = cfg.to_dict()
    d["clip_low"], d["clip_high"] = a["clip_lo"], a["clip_hi"]
    d["correct"] = str(d["correct"])
    d["dual_clip"] = np.nan if cfg.dual_clip is None else cfg.dual_clip  # NaN = off
    d["ds_range"] = _ds_range_text(cfg)
    h = config_hash(cfg)

    def constants(n: int) -> dict:  # constant columns, built in one go (inserts are slow)
        # scalars, broadcast by pandas over the rows: the same columns and dtypes as full
        # arrays, 5x faster for the string columns (no per-row string conversion); an empty
        # table keeps arrays (a scalar there would make a string column "str", not "object")
        c = {k: d[k] for k in CONFIG_COLUMNS}
        c["config_hash"] = h
        c["backend"] = a["backend"]
        if n == 0:
            c = {k: np.full(0, v, dtype=object if isinstance(v, str) else None)
                 for k, v in c.items()}  # fmt: skip
        return c

    cols.update(constants(R * n_log))
    # columns added after the config columns (so earlier columns keep their positions)
    start = _start_nll(rec, n_met)
    names = a["subset_names"]
    for j, nm in enumerate(names):
        cols[f"nll_{nm}"] = flat[:, m_nll(n_sub) + j]
    for j, nm in enumerate(names):
        cols[f"nll_rise_{nm}"] = flat[:, m_nll(n_sub) + j] - start[m_nll(n_sub) + j]
    if cfg.dynamic_sampling != "off":
        cols["kept_active"] = flat[:, m_kept_active(n_sub)].astype(np.int64)
        for j, nm in enumerate(names):
            cols[f"kept_tail_miss_{nm}"] = flat[:, m_kept_tail(n_sub) + j].astype(np.int64)
    else:  # the kept group is the first draw
        cols["kept_active"] = np.rint(flat[:, M_ACTIVE]).astype(np.int64)
        for nm in names:
            cols[f"kept_tail_miss_{nm}"] = cols[f"tail_miss_{nm}"]
    cols["precision"] = cfg.precision  # (last, so earlier columns keep their positions)
    cols["scheme"] = cfg.training_scheme().spec
    if not tables:
        return _frame(cols, as_frame)
    # threshold table: one row per run and threshold
    run_t = np.repeat(np.arange(R), n_thr)
    tf = thr_out.reshape(R * n_thr, n_met)
    ts = thr_step.reshape(-1)
    reached = ts >= 0
    tcols: dict[str, object] = {
        "run": run_t,
        "prompt": run_t // cfg.seeds,
        "seed_index": run_t % cfg.seeds,
        "threshold": np.tile(np.asarray(cfg.thresholds, dtype=float), R),
        "reached": reached,
        "step": ts.copy(),
        "q_pos": tf[:, M_QPOS],
        "m_ret": tf[:, M_MRET],
        "entropy": tf[:, M_ENT],
    }
    for j, nm in enumerate(names):
        tcols[f"mass_{nm}"] = tf[:, M_SUB0 + j]
    for j, nm in enumerate(names):
        tcols[f"nll_{nm}"] = tf[:, m_nll(n_sub) + j]
    for j, nm in enumerate(names):
        tcols[f"nll_rise_{nm}"] = tf[:, m_nll(n_sub) + j] - start[m_nll(n_sub) + j]
    tcols.update(constants(R * n_thr))
    tcols["precision"] = np.full(R * n_thr, cfg.precision, dtype=object)
    tcols["scheme"] = np.full(R * n_thr, cfg.training_scheme().spec, dtype=object)
    return SimTables(_frame(cols, as_frame), _frame(tcols, as_frame))


def _frame(cols: dict[str, object], as_frame: bool) -> pd.DataFrame | dict[str, object]:
    """``cols`` as a DataFrame (scalars broadcast over the rows), or as it is."""
    if not as_frame:
        return cols
    import pandas as pd

    return pd.DataFrame(cols)


def _ds_range_text(cfg: SimConfig) -> str:
    """The ``ds_range`` column: ``"lo,hi"`` of OpenRLHF's filter in effect, else ``""``."""
    if cfg.dynamic_sampling != "openrlhf":
        return ""
    from .config import DS_RANGE_DEFAULT

    lo, hi = DS_RANGE_DEFAULT if cfg.ds_range is None else cfg.ds_range
    return f"{lo!r},{hi!r}"


def run_one(cfg: SimConfig) -> pd.DataFrame:
    """Top-level, picklable: ``simulate(cfg)`` with default threads and no progress."""
    return simulate(cfg)
