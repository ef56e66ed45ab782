"""CLI command ``validate``: every closed form against Monte Carlo, enumeration or quadrature.

Parse, one library call (:func:`fgrpo_theory.validation.run_validation`), emit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ._app import app
from ._common import FORMAT_OPTION, OUTPUT_OPTION, OutputFormat, check_output_path, emit


@app.command("validate")
def validate_cmd(
    quick: bool = typer.Option(False, "--quick", help="Fewer Monte Carlo samples (seconds)."),
    fmt: OutputFormat | None = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Check every closed form of the toolkit against Monte Carlo, enumeration or quadrature.

    Prints one row per check (quantity, parameters, method, closed form, estimate, standard error,
    z, tolerance, pass/fail). Exit code 1 if any check fails. Seeds are fixed, so the table is the
    same on every run.

    Examples, one line each:

    `fgrpo-theory validate --quick`

    `fgrpo-theory validate --format csv --output validation.csv`
    """
    from ..validation import run_validation

    output = check_output_path(output)
    df = run_validation(quick=quick)
    emit(df, fmt, output, title="fgrpo-theory validate" + (" --quick" if quick else ""))
    failed = int((~df["passed"]).sum())
    print(f"{len(df) - failed}/{len(df)} checks passed", file=sys.stderr)
    if failed:
        raise typer.Exit(code=1)
