"""CLI command ``scheme``: what a training scheme optimizes (docs/theory.md section 15), and
``scheme list``, the registry.

Parse, one library call (:func:`fgrpo_theory.schemes.report.scheme_profile_table` or
:func:`~fgrpo_theory.schemes.report.scheme_catalog`), emit.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .. import _spec
from .._validate import fail
from ._app import app
from ._common import FORMAT_OPTION, OUTPUT_OPTION, OutputFormat, emit


def _as_option(e: ValueError) -> ValueError:
    """The library's ``scheme ...`` messages (bad spec, a parameter that does not fit N, a
    scheme without tables) name the option ``--scheme``."""
    msg = str(e)
    return ValueError("--" + msg if msg.startswith(("scheme ", "scheme:")) else msg)


@app.command("scheme")
def scheme_cmd(
    action: str | None = typer.Argument(
        None, help="'list' prints the registry instead.", show_default=False, metavar="[list]"
    ),
    scheme: str = typer.Option(
        "grpo",
        "--scheme",
        help="Scheme spec NAME[:key=value,...][+focal:gamma=G] (see 'scheme list').",
    ),
    n: int = typer.Option(8, "--N", help="Group size N >= 1."),
    mu: str = typer.Option("0.1,0.3,0.5", "--mu", help="Success probabilities in [0, 1] (list)."),
    rewards: str = typer.Option(
        "1,0",
        "--rewards",
        help="Rewards R_c,R_w of a correct and an incorrect rollout (R_c > R_w).",
        metavar="R_c,R_w",
    ),
    fmt: OutputFormat | None = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """What a binary group scheme optimizes in expectation (docs/theory.md section 15).

    One row per mu: the difficulty profile H(mu; N) (the expected update is H grad mu), the
    implied objective F(mu) (F' = H, F(0) = 0) and the pass@k weights c_1..c_N, so that the
    scheme maximizes sum_k c_k pass@k (the same in every row). `scheme list` prints every
    registered scheme with its role, parameters (defaults and valid values) and paper.

    Examples, one line each:

    `fgrpo-theory scheme --scheme maxrl --N 8 --mu 0.3 --format csv`

    `fgrpo-theory scheme --scheme trl+focal:gamma=0.5 --N 16 --mu 0.05,0.5`

    `fgrpo-theory scheme list`
    """
    from ..schemes.report import scheme_catalog, scheme_profile_table

    if action is not None:
        if action.strip().lower() != "list":
            fail("scheme", action, "'list' or no argument (then --scheme, --N, --mu)")
        emit(scheme_catalog(), fmt, output, title="training schemes")
        return
    from ..schemes import parse_scheme

    mus = _spec.parse_float_list(mu, name="--mu")
    r_correct, r_incorrect = _spec.parse_pair(rewards, name="--rewards")
    try:
        s = parse_scheme(scheme)
        df = scheme_profile_table(s, n, mus, r_correct, r_incorrect)
    except ValueError as e:
        raise _as_option(e) from None
    emit(df, fmt, output, title=f"scheme {s.spec}, N = {n} (theory.md section 15)")
