"""CLI command ``lr``: at what learning rate to run focal weighting, coming from vanilla GRPO.

Parse, one library call (:func:`fgrpo_theory.fair.lr_advice_table`), emit.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .. import _spec
from .._validate import fail
from ._app import app
from ._common import FORMAT_OPTION, OUTPUT_OPTION, OutputFormat, emit, resolve_format

__all__ = ["lr_cmd"]


@app.command("lr")
def lr_cmd(
    lr: float = typer.Option(..., "--lr", help="Your vanilla run's learning rate (> 0)."),
    optimizer: str = typer.Option(
        ..., "--optimizer", help="Your optimizer: sgd, adam or adamw (they need different answers)."
    ),
    n: str | None = typer.Option(
        None,
        "--N",
        help="Group size(s) N >= 2: 8 or 4,8,16.",
        show_default="the log's most common group size with --log, else 8",
    ),
    gamma: str = typer.Option("0.5,1", "--gamma", help="Focal exponents gamma > 0 (list)."),
    beta: str | None = typer.Option(
        None,
        "--beta",
        metavar="A,B",
        help="Your prompts' difficulty as Beta(A, B) (diagnose's beta_a, beta_b).",
        show_default="mu ~ Uniform(0, 1), appendix N's assumption",
    ),
    log: str | None = typer.Option(
        None,
        "--log",
        metavar="LOG",
        help="A training log (as for diagnose: prompt,step,n,n_correct): fit Beta(A, B) from it.",
    ),
    advantage: str = typer.Option(
        "grpo", "--advantage", help="Advantage convention of your run: grpo, trl, verl, ..."
    ),
    fmt: OutputFormat | None = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """The learning rate to run focal weighting (gamma) at, coming from your vanilla GRPO run.

    One row per N and gamma: `step_ratio` r (focal's expected step over vanilla's at the same
    lr on your prompts' difficulty), `focal_lr` (the answer), `control_lr` (vanilla's lr for a
    focal run kept at your lr), `matching` and `why`. SGD: focal at lr / r (step-size matched).
    Adam / AdamW: a constant factor is normalized away, so focal at your lr, compared with a
    progress-matched vanilla control (what the toolkit measured). See docs/learning-rates.md.

    Example, one line:

    `fgrpo-theory lr --lr 1e-6 --optimizer adamw --N 8 --gamma 1 --beta 2.07,5.43`
    """
    from ..fair import lr_advice_table

    if beta is not None and log is not None:
        fail("--beta", beta, "not given together with --log (one difficulty)")
    ab = None
    default_n = 8
    if beta is not None:
        vals = _spec.parse_float_list(beta, name="--beta")
        if len(vals) != 2:
            fail("--beta", beta, "two numbers A,B")
        ab = (float(vals[0]), float(vals[1]))
    if log is not None:
        import numpy as np

        from ..diagnose import fit_beta_binomial, read_log

        groups = read_log(log)
        fit = fit_beta_binomial(
            groups["n"].to_numpy(), groups["n_correct"].to_numpy(), groups["prompt"].to_numpy()
        )
        ab = (fit.a, fit.b)
        sizes, counts = np.unique(groups["n"].to_numpy(), return_counts=True)
        default_n = int(sizes[np.argmax(counts)])
    ns = _spec.parse_int_list(n, name="--N", lo=2) if n is not None else [default_n]
    gammas = _spec.parse_float_list(gamma, name="--gamma")
    df = lr_advice_table(lr, optimizer, ns, gammas, beta=ab, advantage=advantage)
    title = f"learning rate for focal weighting ({df['optimizer'].iloc[0]})"
    if output is not None or resolve_format(fmt, output) != OutputFormat.table:
        emit(df, fmt, output, title=title)  # every column, the reasons included
        return
    # a terminal table holds the numbers; the reasons follow as paragraphs (a cell would fold
    # them into a column a dozen characters wide)
    emit(df.drop(columns=["optimizer", "why", "check"]), fmt, output, title=title)
    _print_reasons(df)


def _print_reasons(df) -> None:
    import shutil
    import textwrap

    width = min(100, shutil.get_terminal_size((100, 24)).columns)
    out = []
    for row in df.itertuples(index=False):
        out.append(textwrap.fill(f"N = {row.N}, gamma = {row.gamma:g}: {row.why}", width))
    out.append(textwrap.fill(f"Check: {df['check'].iloc[0]}", width))
    typer.echo("\n" + "\n\n".join(out))
