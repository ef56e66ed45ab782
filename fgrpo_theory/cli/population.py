"""CLI command ``population``: train a population of prompts (shared + per-prompt logits)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .._validate import fail
from . import _common as opt
from ._app import app
from ._common import OutputFormat, ResultFolder, add_sweep_options, emit, with_progress

_METRICS = ["pass_at_1", "pass_at_256", "coverage_at_256", "rare_nll_rise", "entropy"]
_KEYS = ["name", "population_seed", "N", "B", "gamma", "algo", "inner_updates", "ds_fill",
         "optimizer", "lr_shared", "lr_prompt", "advantage", "scheme", "rule"]  # fmt: skip


@app.command("population")
def population_cmd(
    config: Path | None = typer.Option(
        None, "--config", help="Population TOML file (list-valued fields form a sweep)."
    ),
    preset: str | None = typer.Option(
        None, "--preset", help="Named config (default, shared-adam, tabular-sgd-B8, quick, ...)."
    ),
    N: str | None = typer.Option(
        None, "--N", help="Group size(s): 8, '2,8' or '2..32:x2' (overrides the config)."
    ),
    gamma: str | None = typer.Option(None, "--gamma", help="Focal exponent(s), e.g. '0,1'."),
    scheme: str | None = opt.SCHEME_OPTION,
    steps: int | None = typer.Option(None, "--steps", help="Steps (overrides)."),
    algo: str | None = opt.ALGO_OPTION,
    inner_updates: int | None = opt.INNER_UPDATES_OPTION,
    clip_low: float | None = opt.CLIP_LOW_OPTION,
    clip_high: float | None = opt.CLIP_HIGH_OPTION,
    dual_clip: str | None = opt.DUAL_CLIP_OPTION,
    dynamic_sampling: str | None = opt.DYNAMIC_SAMPLING_OPTION,
    ds_range: str | None = opt.DS_RANGE_OPTION,
    ds_fill: str | None = typer.Option(
        None,
        "--ds-fill",
        help="What replaces a dropped group: redraw (the same prompt's group) or next-prompt "
        "(the next prompt of the epoch order, as a trainer fills its batch).",
        show_default="redraw",
    ),
    precision: str | None = typer.Option(
        None,
        "--precision",
        help="Arithmetic of the logits, sampler and optimizer: float64 or float32 (see "
        "docs/precision.md).",
        show_default="float64",
    ),
    seeds: int | None = typer.Option(None, "--seeds", help="Seeds (overrides)."),
    seed: int | None = typer.Option(None, "--seed", help="Base seed (overrides)."),
    population_seeds: str | None = typer.Option(
        None,
        "--population-seeds",
        help="Population draws of the same declared distribution: '0..15', '16..31' or '3,7' "
        "(several make a sweep over population_seed; overrides the config).",
    ),
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="Numba threads (default: one per CPU, at most the process's cgroup CPU limit, such "
        "as a container's; NUMBA_NUM_THREADS sets it instead).",
    ),
    scheduler: str = opt.SCHEDULER_OPTION,
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Write all rows: .parquet/.csv file, or a folder for a sweep (one file per config).",
        show_default="none",
    ),
    resume: bool = typer.Option(
        True, "--resume/--no-resume", help="Reuse finished --out files of the same config and code."
    ),
    fmt: OutputFormat | None = opt.FORMAT_OPTION,
    output: Path | None = typer.Option(None, "--output", help="Write the summary to FILE."),
) -> None:
    """Train GRPO / F-GRPO on a population of prompts; summary of the last step per split.

    A list in --N or --gamma (or in the config file) makes a sweep: one result file per config
    in the --out folder, resumable, run locally or on Dask (--scheduler).

    Example: fgrpo-theory population --preset quick --N 2,8 --gamma 1 --out runs/
    """
    from ..distributed import parse_scheduler, require_distributed
    from ..population import expand_population_grid, load_population_sweep, run_population_sweep
    from ..population.presets import PRESETS

    if (config is None) == (preset is None):
        fail("--config", str(config), "given, or --preset given (exactly one of the two)")
    spec = parse_scheduler(scheduler, "--scheduler")
    if spec.kind != "local":
        require_distributed(spec, "--scheduler")
    if threads is not None and threads < 1:
        fail("--threads", threads, ">= 1")
    if preset is not None:
        if preset not in PRESETS:
            fail("--preset", preset, "one of " + ", ".join(sorted(PRESETS)))
        sweep = dict(PRESETS[preset])
    else:
        sweep = load_population_sweep(config)
    over = dict(steps=steps, seeds=seeds, seed=seed, dynamic_sampling=dynamic_sampling, algo=algo,
                inner_updates=inner_updates, clip_low=clip_low, clip_high=clip_high,
                ds_fill=ds_fill, scheme=scheme, precision=precision)  # fmt: skip
    sweep.update({k: v for k, v in over.items() if v is not None})
    add_sweep_options(sweep, N=N, gamma=gamma, ds_range=ds_range, dual_clip=dual_clip)
    if population_seeds is not None:
        from ._common import parse_int_list

        ps = [int(v) for v in parse_int_list(population_seeds, "--population-seeds", lo=0)]
        sweep["population_seed"] = ps if len(ps) > 1 else ps[0]
    cfgs = expand_population_grid(sweep)
    # a sweep's --out folder is created here and removed again if the run fails before writing
    folder = ResultFolder(out, len(cfgs))
    with folder:
        if output is not None:
            from ._common import check_output_path

            check_output_path(output)
        show = sys.stderr.isatty()
        try:
            if len(cfgs) == 1:
                df = _run_one(cfgs[0], spec, out, resume, threads, show)
            else:
                df = run_population_sweep(
                    cfgs, out, scheduler=spec, resume=resume, threads=threads, progress=show
                )
        except KeyboardInterrupt:
            # files are written whole (atomically) or not
            # the one line is printed by cli.main (exit code 130)
            raise typer.Exit(130) from None
    folder.report()
    last = df[(df["step"] == df["steps"]) & (df["bucket"] == "all")]
    cols = [c for c in _METRICS if c in last.columns]
    keys = [k for k in _KEYS if last[k].nunique() > 1] if len(cfgs) > 1 else []
    multi = any(c.seeds > 1 for c in cfgs)
    stats = ["mean", "std"] if multi else ["mean"]
    summary = last.groupby(["config_hash", *keys, "split"], sort=False)[cols].agg(stats)
    summary.columns = [f"{a}_{b}" for a, b in summary.columns]
    summary = summary.dropna(axis=1, how="all")  # e.g. no prompt with rare strategies
    summary = summary.reset_index().drop(columns="config_hash")
    name = cfgs[0].name if len(cfgs) == 1 else f"sweep of {len(cfgs)} configs"
    emit(summary, fmt, output, title=f"population {name}: last step over seeds")


def _run_one(cfg, spec, out: Path | None, resume: bool, threads: int | None, show: bool):
    """One config: reuse ``out`` if it holds this config's result from this code, else run it
    (locally with a per-seed progress bar, or as one Dask task) and write ``out`` atomically."""
    from ..population import population_config_hash, run_population_sweep, simulate_population
    from ..population.sweep import population_digest
    from ..sim.sweep import _folder_key, result_metadata, reusable_result, write_atomic

    key = population_config_hash
    code = population_digest() if out is not None else ""
    fkey = _folder_key(out.parent if str(out.parent) else Path(".")) if out is not None else None
    if out is not None and resume:
        df, why = reusable_result(out, cfg, key=key, code=code, folder_key=fkey)
        if df is not None:
            typer.echo(f"reused {out} (same config and code)", err=True)
            return df
        if why is not None:
            typer.echo(f"fgrpo-theory: {why}", err=True)
    if spec.kind != "local":
        df = run_population_sweep([cfg], None, scheduler=spec, threads=threads, progress=show)
    else:
        df = with_progress(
            show,
            cfg.seeds,
            "training",
            lambda progress: simulate_population(cfg, threads=threads, progress=progress),
        )
    if out is not None:
        try:
            meta = result_metadata(key(cfg), code, df, fkey)
            write_atomic(df, out, meta, fkey, name="--out")
        except OSError as e:
            fail("--out", str(out), f"a writable path ({e.strerror or e})")
        typer.echo(f"wrote {len(df)} rows to {out}", err=True)
    return df
