"""CLI command ``population``: train a population of prompts (shared + per-prompt logits)."""

from __future__ import annotations

from pathlib import Path

import typer

from .._validate import fail
from ._app import app
from ._common import FORMAT_OPTION, OutputFormat, emit

_METRICS = ["pass_at_1", "pass_at_256", "coverage_at_256", "rare_nll_rise", "entropy"]


@app.command("population")
def population_cmd(
    config: Path | None = typer.Option(None, "--config", help="Population TOML file."),
    preset: str | None = typer.Option(
        None, "--preset", help="Named config (default, shared-adam, tabular-sgd-B8, quick, ...)."
    ),
    N: int | None = typer.Option(None, "--N", help="Group size (overrides the config)."),
    gamma: float | None = typer.Option(None, "--gamma", help="Focal exponent (overrides)."),
    steps: int | None = typer.Option(None, "--steps", help="Steps (overrides)."),
    seeds: int | None = typer.Option(None, "--seeds", help="Seeds (overrides)."),
    seed: int | None = typer.Option(None, "--seed", help="Base seed (overrides)."),
    threads: int | None = typer.Option(None, "--threads", help="Numba threads (default: all)."),
    scheduler: str = typer.Option(
        "local", "--scheduler", help="Only 'local' (Numba threads) for populations so far."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Write every row to a .parquet/.csv file; reused if it exists."
    ),
    resume: bool = typer.Option(True, "--resume/--no-resume", help="Reuse a finished --out."),
    fmt: OutputFormat | None = FORMAT_OPTION,
    output: Path | None = typer.Option(None, "--output", help="Write the summary to FILE."),
) -> None:
    """Train GRPO / F-GRPO on a population of prompts; summary of the last step per split.

    Example: fgrpo-theory population --preset quick --N 8 --gamma 1
    """
    from ..population import load_population_config, simulate_population
    from ..population.presets import preset as get_preset

    if (config is None) == (preset is None):
        fail("--config", str(config), "given, or --preset given (exactly one of the two)")
    if scheduler != "local":
        fail("--scheduler", scheduler, "'local' (populations run on local Numba threads only)")
    over = dict(N=N, gamma=gamma, steps=steps, seeds=seeds, seed=seed)
    over = {k: v for k, v in over.items() if v is not None}
    cfg = get_preset(preset) if preset is not None else load_population_config(config)
    if over:
        cfg = cfg.replace(**over)
    if out is not None and out.suffix not in (".parquet", ".csv"):
        fail("--out", str(out), "a .parquet or .csv file")
    if output is not None:
        from ._common import check_output_path

        check_output_path(output)
    import pandas as pd

    from ..population import population_config_hash
    from ..sim.sweep import write_atomic

    df = None
    if out is not None and resume and out.exists():
        old = pd.read_parquet(out) if out.suffix == ".parquet" else pd.read_csv(out)
        if "config_hash" in old and (old["config_hash"] == population_config_hash(cfg)).all():
            df = old
            typer.echo(f"reused {out} (same config)", err=True)
    if df is None:
        from rich.console import Console
        from rich.progress import Progress

        with Progress(transient=True, console=Console(stderr=True)) as bar:
            task = bar.add_task("training", total=cfg.seeds)
            df = simulate_population(
                cfg, threads=threads, progress=lambda d, t: bar.update(task, completed=d)
            )
        if out is not None:
            write_atomic(df, out)
            typer.echo(f"wrote {len(df)} rows to {out}", err=True)
    last = df[(df["step"] == df["steps"]) & (df["bucket"] == "all")]
    cols = [c for c in _METRICS if c in last.columns]
    stats = ["mean", "std"] if cfg.seeds > 1 else ["mean"]
    summary = last.groupby("split", sort=False)[cols].agg(stats)
    summary.columns = [f"{a}_{b}" for a, b in summary.columns]
    summary = summary.dropna(axis=1, how="all")  # e.g. no prompt with rare strategies
    emit(summary.reset_index(), fmt, output, title=f"population {cfg.name}: last step over seeds")
