"""CLI command ``simulate``: run the softmax-policy simulator from a TOML file and/or flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import typer

from .._validate import fail
from ..sim.config import SimConfig
from ..sim.presets import preset_names
from ._app import app
from ._common import (
    ALGO_OPTION,
    CLIP_HIGH_OPTION,
    CLIP_LOW_OPTION,
    DS_RANGE_OPTION,
    DUAL_CLIP_OPTION,
    DYNAMIC_SAMPLING_OPTION,
    FORMAT_OPTION,
    INNER_UPDATES_OPTION,
    SCHEDULER_OPTION,
    SCHEME_OPTION,
    OutputFormat,
    ResultFolder,
    Rows,
    add_sweep_options,
    check_out,
    emit,
    parse_float_list,
    parse_int_list,
    with_progress,
)

_SUMMARY_KEYS = [
    "name", "K", "N", "algo", "rule", "advantage", "gamma", "scheme", "optimizer", "lr",
]  # fmt: skip


def _shown(df, k: str) -> bool:
    """A summary key is shown if in the frame; ``name`` when set, ``scheme`` when some config
    has one beyond its advantage and gamma (:func:`_scheme_says_more`)."""
    if k not in df.columns:
        return False
    if k == "name":
        return bool(df[k].any())
    if k == "scheme":
        pairs = df[[k, "advantage"]].astype(str).drop_duplicates()
        return any(_scheme_says_more(s, a) for s, a in pairs.itertuples(index=False))
    return True


def _scheme_says_more(scheme: str, advantage: str) -> bool:
    """Whether a config's scheme spec says more than its advantage and gamma columns: another
    scheme, or an entropy or KL term."""
    import re

    return scheme.split("+")[0] != advantage or re.search(r"\+(?:entropy|kl)", scheme) is not None


def _constant(cols: dict, k: str) -> object:
    """A column of ``simulate(..., as_frame=False)`` that is constant over the rows, as a
    Python scalar."""
    v = cols[k]
    if np.ndim(v) != 0:
        v = v[0]  # (an empty log keeps arrays: never summarized, see _summary_rows)
    return v.item() if isinstance(v, np.generic) else v


def _mean_over_runs(x) -> float:  # noqa: ANN001 - a 1-D array or Series of floats
    """The summary's mean of a metric over runs: the correctly rounded sum of the values that
    are not NaN (:func:`math.fsum`) divided by their count; NaN when there is none.

    One rule for both summaries below, with and without pandas. pandas' own ``mean`` gave other
    last bits by version and data (2.x: a compensated sum; 3.1: ``np.add.reduceat`` unless a
    value is NaN)."""
    import math

    v = np.asarray(x, dtype=float)
    v = v[~np.isnan(v)]
    if len(v) == 0:
        return float("nan")
    if not np.isfinite(v).all():  # (fsum refuses inf - inf; the logged metrics are finite)
        return float(np.sum(v)) / len(v)
    return math.fsum(v.tolist()) / len(v)


def _summary_rows(cols: dict) -> Rows:
    """The summary of one config's log given as columns (``simulate(..., as_frame=False)``):
    the rows :func:`simulate_cmd` builds with pandas for a sweep, without importing pandas
    (``tests/test_cli_rows.py`` checks they are the same)."""
    names = list(cols)
    metrics = [c for c in names if c in ("q_pos", "m_ret", "entropy", "active_frac")]
    metrics += [c for c in names if c.startswith(("mass_", "pass_at_"))]
    keys = [k for k in _SUMMARY_KEYS if k in cols]
    if len(cols["step"]) == 0:  # (no config has an empty log)
        keys = [k for k in keys if k not in ("name", "scheme")]
        return Rows((*keys, "runs", "step", *metrics), ())
    if not _constant(cols, "name"):
        keys.remove("name")
    if "scheme" in keys and not _scheme_says_more(
        str(_constant(cols, "scheme")), str(_constant(cols, "advantage"))
    ):
        keys.remove("scheme")
    last = np.flatnonzero(cols["step"] == _constant(cols, "steps"))
    if len(last) == 0:
        return Rows((*keys, "runs", "step", *metrics), ())
    row = (
        *(_constant(cols, k) for k in keys),
        len(last),
        int(cols["step"][last[0]]),
        *(_mean_over_runs(np.asarray(cols[m])[last]) for m in metrics),
    )
    return Rows((*keys, "runs", "step", *metrics), (row,))


#: Runs estimated longer than this (seconds) show a progress bar on stderr.
_BAR_SECONDS = 3.0


def _dflt(name: str) -> str:
    """SimConfig's default of field ``name``, as ``--help`` shows it (a preset or --config file
    overrides it). Read from the dataclass's fields: building a config at import time cost
    every command (``--help`` too) the import of the advantage presets and SciPy."""
    import dataclasses

    f = SimConfig.__dataclass_fields__[name]
    v = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
    if isinstance(v, tuple):
        return ",".join(str(x) for x in v)
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def _field(flag: str, help: str, *, shown: str | None = None) -> Any:
    """An option that, when given, overrides the config field named like ``flag``; ``--help``
    shows ``shown``, or else SimConfig's default of that field."""
    default = _dflt(flag.removeprefix("--").replace("-", "_")) if shown is None else shown
    return typer.Option(None, flag, help=help, show_default=default)


def _est_seconds(cfgs: list) -> float:
    """Estimated single-core seconds of all configs (:func:`fgrpo_theory.sim.budget.estimate`)."""
    from ..sim.budget import estimate

    return sum(estimate(c).seconds for c in cfgs)


@app.command("simulate")
def simulate_cmd(
    config: Path | None = typer.Option(
        None, "--config", help="TOML config or sweep (list-valued fields form a grid)."
    ),
    preset: str | None = typer.Option(
        None,
        "--preset",
        help="A shipped configuration: " + ", ".join(preset_names()) + " (flags override it).",
    ),
    K: int | None = _field("--K", "Number of actions."),
    logits: str | None = _field(
        "--logits",
        "Initial logits of K actions, e.g. '5.0x1,3.0x9999,0.0x118000', or a .npy/.csv file; "
        "none = uniform.",
    ),
    correct: str | None = _field(
        "--correct", "Correct actions, 0-based index set, e.g. '0..9999'.", shown="0"
    ),
    subset: list[str] | None = typer.Option(
        None, "--subset", help="Named subset NAME=SPEC (repeatable), e.g. rare=1..9999."
    ),
    N: str | None = _field("--N", "Group size(s): 8, '2,8' or '2..131072:x2'."),
    steps: int | None = _field("--steps", "Steps per run."),
    algo: str | None = ALGO_OPTION,
    rule: str | None = _field("--rule", "Surrogate: linear or logprob."),
    advantage: str | None = _field(
        "--advantage", "Advantage preset: grpo, dr-grpo (the paper's simulation), rloo, ..."
    ),
    rewards: str | None = _field(
        "--rewards", "Rewards R_c,R_w of correct and incorrect actions.", shown="1,-1"
    ),
    gamma: str | None = _field("--gamma", "Focal exponent(s), e.g. '0,1'."),
    scheme: str | None = SCHEME_OPTION,
    optimizer: str | None = _field("--optimizer", "sgd, adam or adamw."),
    lr: float | None = _field("--lr", "Learning rate."),
    weight_decay: float | None = _field("--weight-decay", "Weight decay."),
    inner_updates: int | None = INNER_UPDATES_OPTION,
    dynamic_sampling: str | None = DYNAMIC_SAMPLING_OPTION,
    ds_range: str | None = DS_RANGE_OPTION,
    max_resamples: int | None = _field(
        "--max-resamples", "Cap on dynamic-sampling redraws per step."
    ),
    clip_low: float | None = CLIP_LOW_OPTION,
    clip_high: float | None = CLIP_HIGH_OPTION,
    dual_clip: str | None = DUAL_CLIP_OPTION,
    seeds: int | None = _field("--seeds", "Seeds per prompt."),
    seed: int | None = _field("--seed", "Base seed."),
    log_every: int | None = _field("--log-every", "Log every this many steps."),
    pass_k: str | None = _field("--pass-k", "k values of pass@k, e.g. '1,256'."),
    thresholds: str | None = _field(
        "--thresholds",
        "Q_pos thresholds in (0, 1), e.g. '0.9,0.95,0.98': the summary shows, per "
        "threshold, the first step runs reach it and M_ret there (computed in the kernel).",
        shown="none",
    ),
    controls: str | None = _field(
        "--controls",
        "Matched vanilla controls of a focal config (gamma > 0), e.g. 'm,h,progress': "
        "lr x m_gamma, lr x h_gamma/h_0, the progress-matched lr. Runs the config and the arms "
        "(16 seeds unless --seeds) and shows per arm the median and IQR and the paired "
        "focal-minus-arm difference of M_ret at each threshold (default 0.9,0.95,0.98).",
        shown="none",
    ),
    precision: str | None = _field(
        "--precision", "Dense-path arithmetic: float64 or float32 (see docs/precision.md)."
    ),
    threads: int | None = _field(
        "--threads",
        "Numba threads (by default at most the process's cgroup CPU limit, such as a "
        "container's, unless NUMBA_NUM_THREADS is set).",
        shown="Numba's count: one per CPU",
    ),
    scheduler: str = SCHEDULER_OPTION,
    out: Path | None = _field(
        "--out", "Write all rows: .parquet/.csv file, or a folder for a sweep.", shown="none"
    ),
    resume: bool = typer.Option(True, "--resume/--no-resume", help="Sweep: skip finished files."),
    fmt: OutputFormat | None = FORMAT_OPTION,
    output: Path | None = _field("--output", "Write the summary to FILE.", shown="stdout"),
) -> None:
    """Simulate GRPO / DAPO / CISPO (vanilla or focal) on softmax policies.

    Prints a summary (last logged step, mean over runs, per config); --out writes every logged
    row. Flags override the file; a list in --N or --gamma (or in the file) makes a sweep.

    Example: fgrpo-theory simulate --preset fig2-logprob-adam --N 2,256 --steps 20 --seeds 1
    """
    from ..sim.grid import expand_grid, load_sweep

    if config is not None and preset is not None:
        fail("--preset", preset, "not given together with --config")
    if preset is not None:
        from ..sim.presets import load_preset

        if preset not in preset_names():
            fail("--preset", preset, "one of " + ", ".join(preset_names()))
        sweep: dict = load_preset(preset)
    else:
        sweep = load_sweep(config) if config is not None else {}
    flags = dict(
        K=K, logits=logits, correct=correct, steps=steps, algo=algo, rule=rule,
        advantage=advantage, optimizer=optimizer, lr=lr, weight_decay=weight_decay,
        inner_updates=inner_updates, dynamic_sampling=dynamic_sampling, seeds=seeds, seed=seed,
        log_every=log_every,
    )  # fmt: skip
    flags.update(max_resamples=max_resamples, clip_low=clip_low, clip_high=clip_high)
    flags.update(precision=precision, scheme=scheme)
    sweep.update({k: v for k, v in flags.items() if v is not None})
    add_sweep_options(sweep, N=N, gamma=gamma, ds_range=ds_range, dual_clip=dual_clip)
    if rewards is not None:
        rw = [float(v) for v in parse_float_list(rewards, "--rewards")]
        if len(rw) != 2:
            fail("--rewards", rewards, "two values R_c,R_w such as 1,-1")
        sweep.pop("r_correct", None)
        sweep.pop("r_incorrect", None)
        sweep["rewards"] = rw
    if pass_k is not None:
        sweep["pass_k"] = [int(v) for v in parse_int_list(pass_k, "--pass-k", lo=1)]
    if thresholds is not None:
        sweep["thresholds"] = [float(v) for v in parse_float_list(thresholds, "--thresholds")]
    if controls is not None:
        sweep["controls"] = controls
    if subset:
        subs = dict(sweep.get("subsets", {}))
        given: set[str] = set()
        for item in subset:
            name, sep, spec = item.partition("=")
            if not sep or not name.strip() or not spec.strip():
                fail("--subset", item, "NAME=SPEC such as rare=1..9999")
            if name.strip() in given:
                fail("--subset", item, "a NAME given once")
            given.add(name.strip())
            subs[name.strip()] = spec.strip()
        sweep["subsets"] = subs
    if threads is not None and threads < 1:
        fail("--threads", threads, ">= 1")
    from ..distributed import parse_scheduler, require_distributed

    spec = parse_scheduler(scheduler, "--scheduler")
    if spec.kind != "local":
        require_distributed(spec, "--scheduler")
    cfgs = expand_grid(sweep)
    if any(c.controls for c in cfgs):
        _check_controls(cfgs, spec, scheduler, "seeds" in sweep)
        if "seeds" not in sweep:
            from ..fair import DEFAULT_SEEDS

            cfgs = [c.replace(seeds=DEFAULT_SEEDS) for c in cfgs]
        if out is not None:
            check_out(out, 1)
        if output is not None:
            from ._common import check_output_path

            check_output_path(output)
        _run_controls(cfgs, out, threads, fmt, output)
        return
    with_thr = any(c.thresholds for c in cfgs)
    if with_thr and (len(cfgs) > 1 or spec.kind != "local"):
        fail(
            "--thresholds",
            ",".join(f"{t:g}" for t in cfgs[0].thresholds),
            f"used with a single config run locally (a sweep stores per-step logs only; "
            f"this is {len(cfgs)} config(s) on {scheduler})",
        )
    from ..sim.budget import check_budget
    from ..sim.threads import run_threads

    # one config printed, no file: its summary is built without pandas (Rows)
    light = not with_thr and len(cfgs) == 1 and spec.kind == "local" and out is None
    # a sweep's --out folder is created here and removed again if the run fails before writing
    folder = ResultFolder(out, len(cfgs))
    with folder:
        if output is not None:
            from ._common import check_output_path

            check_output_path(output)
        for c in cfgs:  # refuse before compiling or allocating anything
            check_budget(c, run_threads(threads))  # the threads that will run
        show = _est_seconds(cfgs) > _BAR_SECONDS
        try:
            if with_thr:
                df, thr = _run_thresholds(cfgs[0], out, threads, show)
            elif light:
                cols = _run_columns(cfgs[0], threads, show)
            else:
                df = _run(cfgs, spec, out, resume, threads, show)
        except KeyboardInterrupt:
            # the kernels run in chunks of about half a second, so Ctrl-C lands here promptly;
            # results are written only after a config completes (atomically): none half-written
            # the one line is printed by cli.main (exit code 130)
            raise typer.Exit(130) from None
        except MemoryError:
            fail("--seeds", "this run", "a run whose output fits in memory (out of memory)")
    folder.report()

    if with_thr:
        from ..fair import summarize_thresholds

        keys = [k for k in _SUMMARY_KEYS if _shown(thr, k)]
        emit(
            summarize_thresholds(thr, by=keys),
            fmt,
            output,
            title="simulate: first step with q_pos >= threshold; medians over the runs that "
            "reach it",
        )
        return
    title = "simulate: last step, mean over runs"
    if light:
        emit(_summary_rows(cols), fmt, output, title=title)
        return
    import pandas as pd

    last = df[df["step"] == df["steps"]]
    metrics = [c for c in df.columns if c in ("q_pos", "m_ret", "entropy", "active_frac")]
    metrics += [c for c in df.columns if c.startswith(("mass_", "pass_at_"))]
    keys = [k for k in _SUMMARY_KEYS if _shown(df, k)]
    by_config = last.groupby(keys + ["config_hash"], sort=False)
    summary = by_config[metrics].agg(_mean_over_runs).reset_index()
    summary.insert(len(keys), "runs", last.groupby("config_hash", sort=False).size().values)
    summary.insert(
        len(keys) + 1, "step", last.groupby("config_hash", sort=False)["step"].first().values
    )
    summary = summary.drop(columns="config_hash")
    emit(pd.DataFrame(summary), fmt, output, title=title)


def _write(df, out: Path) -> None:
    from ..sim.sweep import write_atomic

    try:
        write_atomic(df, out, name="--out")
    except OSError as e:
        fail("--out", str(out), f"a writable path ({e.strerror or e})")
    typer.echo(f"wrote {len(df)} rows to {out}", err=True)


def _check_controls(cfgs: list, spec, scheduler: str, seeds_given: bool) -> None:
    """Refuse what a matched comparison cannot do, with one line naming the option."""
    c = cfgs[0]
    names = ",".join(c.controls)
    if spec.kind != "local":
        fail("--controls", names, f"run locally (not on {scheduler}: the comparison is sequential)")
    if seeds_given and c.seeds < 2:
        fail("--seeds", c.seeds, ">= 2 with --controls (a paired interval needs 2 seeds)")


def _run_controls(
    cfgs: list, out: Path | None, threads: int | None, fmt, output: Path | None
) -> None:
    """The matched comparison of each focal config (one library call each) and its summary;
    a sweep's summary carries the fields that vary; --out gets every row of every config."""
    import pandas as pd

    from ..fair import run_comparison, summarize_comparison
    from ..sim.budget import check_budget
    from ..sim.threads import run_threads

    for cfg in cfgs:  # refuse before any run
        check_budget(cfg, run_threads(threads))
    keys = [k for k in _SUMMARY_KEYS if len({getattr(c, k) for c in cfgs}) > 1]
    rows, sums = [], []
    for i, cfg in enumerate(cfgs):
        label = ", ".join(f"{k}={getattr(cfg, k)}" for k in keys)
        try:
            res = run_comparison(cfg, seeds=cfg.seeds, threads=threads)
        except KeyboardInterrupt:
            # the one line is printed by cli.main (exit code 130)
            raise typer.Exit(130) from None
        pm = res.attrs.get("progress_match")
        if pm is not None:
            typer.echo(
                (f"[{label}] " if label else "")
                + f"progress match: lr {pm['lr']:.6g} (x{pm['multiplier']:.4g}), median final "
                f"q_pos {pm['achieved']:.4f} vs focal {pm['target']:.4f} (tol {pm['q_tol']:g}, "
                f"{len(pm['evaluations'])} simulations, matched {pm['matched']}, monotone "
                f"{pm['monotone']})",
                err=True,
            )
        rows.append(res.assign(comparison=i))
        summ = summarize_comparison(res)
        for j, k in enumerate(keys):
            summ.insert(j, k, getattr(cfg, k))
        sums.append(summ)
    if out is not None:
        _write(pd.concat(rows, ignore_index=True), out)
    emit(
        pd.concat(sums, ignore_index=True),
        fmt,
        output,
        title=f"simulate --controls: {cfgs[0].seeds} seeds per arm; m_ret@t = M_ret at the first "
        "step with q_pos >= t (runs that reach it); focal_minus_arm = paired difference of "
        "medians [95% bootstrap]",
    )


def _thresholds_path(out: Path) -> Path:
    """``run.parquet`` -> ``run.thresholds.parquet`` (the threshold table beside the log)."""
    return out.with_name(f"{out.stem}.thresholds{out.suffix}")


def _run_thresholds(cfg, out: Path | None, threads: int | None, show: bool):
    """One config with thresholds: ``(log, threshold table)``; --out gets both files."""
    from ..sim import simulate

    res = with_progress(
        show,
        cfg.n_runs,
        "simulating",
        lambda progress: simulate(cfg, threads=threads, progress=progress, tables=True),
    )
    if out is not None:
        _write(res.log, out)
        _write(res.thresholds, _thresholds_path(out))
    return res.log, res.thresholds


def _run_columns(cfg, threads: int | None, show: bool) -> dict:
    """One config run locally, its log as columns (``simulate(..., as_frame=False)``)."""
    from ..sim import simulate

    return with_progress(
        show,
        cfg.n_runs,
        "simulating",
        lambda progress: simulate(cfg, threads=threads, progress=progress, as_frame=False),
    )


def _run(cfgs: list, spec, out: Path | None, resume: bool, threads: int | None, show: bool):
    """Run the configs locally or on Dask; the progress bar (if any) goes to stderr only."""
    from ..sim import run_sweep

    if spec.kind != "local":
        from ..distributed import run_sweep_distributed

        folder = out if (out is not None and len(cfgs) > 1) else None
        df = run_sweep_distributed(
            cfgs, folder, spec, resume=resume, threads_per_task=threads, progress=show
        )
        if out is not None and folder is None:
            _write(df, out)
        return df
    if len(cfgs) == 1:
        from ..sim import simulate

        cfg = cfgs[0]
        df = with_progress(
            show,
            cfg.n_runs,
            "simulating",
            lambda progress: simulate(cfg, threads=threads, progress=progress),
        )
        if out is not None:
            _write(df, out)
        return df
    try:
        df = run_sweep(cfgs, out_dir=out, resume=resume, threads=threads, progress=show)
    except OSError as e:
        if out is None:
            raise
        fail("--out", str(out), f"a writable folder ({e.strerror or e})")
    return df
