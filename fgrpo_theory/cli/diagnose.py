"""CLI command ``diagnose``: fit a training log's difficulty distribution and answer section 13.

Thin layer over :mod:`fgrpo_theory.diagnose`: parse, read, one library call, emit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .._validate import fail
from ._app import app
from ._common import (
    FORMAT_OPTION,
    OUTPUT_OPTION,
    OutputFormat,
    check_output_path,
    emit,
    parse_float_list,
)

__all__ = ["diagnose_cmd"]


@app.command("diagnose")
def diagnose_cmd(
    log: str = typer.Argument(
        ...,
        metavar="LOG",
        help="Log file (.csv, .parquet, .jsonl), - for standard input, or verl's rollout_data_dir.",
    ),
    source: str = typer.Option(
        "table",
        "--from",
        help="table (per-group or per-rollout layout), verl (a rollout_data_dir dump) or trl "
        "(the log of fgrpo_theory.integrations.trl.GroupLogCallback).",
    ),
    columns: str | None = typer.Option(
        None, "--columns", help="Map column names: new=old,... (e.g. n_correct=solved,n=group)."
    ),
    rewards: str | None = typer.Option(
        None,
        "--rewards",
        help="Per-rollout logs: reward pair R_c,R_w (default 1,-1); every reward is one of them.",
    ),
    threshold: float | None = typer.Option(
        None, "--threshold", help="Per-rollout logs: a reward >= THRESHOLD counts as correct."
    ),
    rho: str = typer.Option(
        "0.01,0.05,0.1,0.25,0.5", "--rho", help="Relative masses rho of the rare subset, in (0, 1)."
    ),
    gamma: str = typer.Option("0.5,1,2", "--gamma", help="Focal exponents for the multiplier."),
    lr: float | None = typer.Option(
        None, "--lr", help="The focal run's learning rate: adds the matched vanilla control's."
    ),
    compute: int | None = typer.Option(
        None,
        "--compute",
        help="Largest group size searched (rollouts per prompt-step; 2..4096).",
        show_default="max(64, 8 N), N the log's most common group size",
    ),
    by_step: int | None = typer.Option(
        None, "--by-step", metavar="W", help="Also fit each window of W steps."
    ),
    bootstrap: int = typer.Option(200, "--bootstrap", help="Bootstrap replicates over prompts."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    fmt: OutputFormat = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
    plot: Path | None = typer.Option(
        None, "--plot", metavar="FILE", help="Also draw a four-panel figure to FILE.png or .pdf."
    ),
) -> None:
    """Diagnose a training log: difficulty distribution, active groups, tail misses, focal lr.

    Layouts: one row per group (prompt,step,n,n_correct) or one row per rollout
    (prompt,step,reward with --rewards or --threshold). Fits a beta-binomial (maximum likelihood)
    and a grid mixture (NPMLE), bootstrap intervals over prompts, and reports
    active_fraction_observed / active_fraction_predicted, p_tail_miss and
    p_tail_miss_given_active per rho, N_min_share and N_peak_miss, and the focal learning-rate
    multiplier per gamma (with --lr, control_lr).

    Example: fgrpo-theory diagnose run.csv --lr 1e-6 --plot run.png

    From verl's rollout dump (trainer.rollout_data_dir): fgrpo-theory diagnose DIR --from verl
    """
    from ..diagnose import diagnose, parse_columns, read_log

    col_map = parse_columns(columns)
    pair = None
    if rewards is not None:
        vals = parse_float_list(rewards, "--rewards")
        if vals.size != 2:
            fail("--rewards", rewards, "two numbers R_c,R_w")
        pair = (float(vals[0]), float(vals[1]))
    rho_v = parse_float_list(rho, "--rho")
    gamma_v = parse_float_list(gamma, "--gamma")
    output = check_output_path(output)
    if plot is not None:
        if plot.suffix.lower() not in (".png", ".pdf"):
            fail("--plot", str(plot), "a file name ending in .png or .pdf")
        plot = check_output_path(plot, "--plot")
    groups = read_log(log, columns=col_map, rewards=pair, threshold=threshold, source_format=source)
    report = diagnose(
        groups,
        rho=rho_v,
        gamma=gamma_v,
        lr=lr,
        compute=compute,
        by_step=by_step,
        bootstrap=bootstrap,
        seed=seed,
    )
    if plot is not None:
        from ..diagnose.plot import plot_diagnosis

        print(f"wrote plot to {plot_diagnosis(groups, report, plot)}", file=sys.stderr)
    emit(report, fmt, output, title=f"Diagnosis of {log}")
