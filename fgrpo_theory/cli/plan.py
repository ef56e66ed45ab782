"""CLI command ``plan``: before training, what each group size costs and misses on your prompts.

Thin layer over :func:`fgrpo_theory.plan.plan_table`: parse, one library call, emit.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .. import _spec
from ._app import app
from ._common import FORMAT_OPTION, OUTPUT_OPTION, OutputFormat, check_output_path, emit

__all__ = ["plan_cmd"]


@app.command("plan")
def plan_cmd(
    difficulty: str = typer.Option(
        ...,
        "--difficulty",
        help="Prompts' success rates: beta:A,B, uniform, rates:FILE (pass_rate or n,c columns) "
        "or log:FILE (a training log, beta-binomial fit).",
    ),
    N: str = typer.Option(
        "2..64:x2", "--N", help="Group sizes: integers, A..B, A..B:S or A..B:xF, comma-separated."
    ),
    B: int | None = typer.Option(None, "--B", help="Kept groups per step (adds gens_per_step)."),
    budget: int | None = typer.Option(
        None, "--budget", help="Rollouts per step B x N held fixed: B = budget / N."
    ),
    rho: str = typer.Option(
        "0.05", "--rho", help="Relative masses rho of the rare correct subset, in (0, 1); list."
    ),
    scheme: list[str] = typer.Option(
        ["focal:gamma=1"],
        "--scheme",
        help="Scheme spec whose learning-rate multiplier is reported (repeat the option).",
    ),
    reference: str = typer.Option(
        "grpo", "--reference", help="Scheme the learning-rate multipliers are relative to."
    ),
    dynamic_sampling: str = typer.Option(
        "off,dapo,verl,openrlhf",
        "--dynamic-sampling",
        help="Dynamic-sampling rules: off, dapo, verl, openrlhf (comma-separated).",
    ),
    threshold: float | None = typer.Option(
        None, "--threshold", help="log:FILE per rollout: a reward >= THRESHOLD is correct."
    ),
    fmt: OutputFormat | None = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Plan a run: mixed groups, dynamic-sampling cost, tail misses and step size over N.

    One row per (N, dynamic_sampling, rho, scheme): p_mixed (a group has both a correct and a
    wrong rollout), zero_adv_fraction (share of an update's groups with all advantages 0),
    p_keep, gens_per_kept_group and gens_per_step (expected rollouts generated under the
    trainer's dynamic sampling), p_tail_miss (a drawn group is active yet misses a rare subset of
    relative mass rho, Lemma 3.1) and p_tail_miss_kept (its share of the kept updates), and the
    scheme's lr_multiplier against the reference. Binary rewards; checked against Monte Carlo by
    `fgrpo-theory validate`.

    Example, one line:

    `fgrpo-theory plan --difficulty beta:2,5 --N 2..64:x2 --budget 256`
    """
    from ..plan import MAX_PLAN_N, parse_difficulty, plan_table

    Ns = _spec.parse_int_list(N, name="--N", lo=2, hi=MAX_PLAN_N)
    rhos = _spec.parse_float_list(rho, name="--rho")
    rules = [r.strip() for r in dynamic_sampling.split(",")]
    output = check_output_path(output)
    d = parse_difficulty(difficulty, threshold=threshold)
    df = plan_table(
        d,
        Ns,
        B=B,
        budget=budget,
        rho=rhos,
        schemes=scheme,
        reference=reference,
        dynamic_sampling=rules,
    )
    emit(df, fmt, output, title=f"Plan for difficulty {d.label}")
