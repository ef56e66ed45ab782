"""CLI commands ``focal`` and ``lr-multiplier`` (focal weights, focal advantages, LR multiplier).

Parse, one library call (:func:`fgrpo_theory.tables.focal_table`,
:func:`fgrpo_theory.advantages.lr_multiplier`), emit.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .. import _spec
from ._app import app
from ._common import FORMAT_OPTION, OUTPUT_OPTION, OutputFormat, emit

#: Option names for the library's error messages.
_NAMES = {
    "N": "--N",
    "gamma": "--gamma",
    "r_correct": "--rewards (R_c)",
    "r_incorrect": "--rewards (R_w)",
    "advantage": "--advantage",
}

_ADVANTAGE_HELP = (
    "Advantage convention (preset): grpo, grpo-bessel, trl, verl, openrlhf, dr-grpo, rloo."
)


@app.command("focal")
def focal(
    n: str = typer.Option("8", "--N", help="Group size(s) N >= 1: 8, 2,8,32 or 2..64:x2."),
    gamma: str = typer.Option("0,0.5,1", "--gamma", help="Focal exponents gamma >= 0 (list)."),
    advantage: str = typer.Option("grpo", "--advantage", help=_ADVANTAGE_HELP),
    rewards: str = typer.Option(
        "1,-1",
        "--rewards",
        help="Rewards R_c,R_w of a correct and an incorrect rollout (R_c > R_w).",
        metavar="R_c,R_w",
    ),
    fmt: OutputFormat | None = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Focal weight g = (1 - X/N)^gamma (P-12) and focal advantages g*A (P-13) for X = 0..N.

    One row per gamma, N and number of correct rollouts X: mu_hat = X/N, g, and the focal-weighted
    advantage of a correct (adv_pos) and an incorrect (adv_neg) rollout under the chosen
    advantage convention. A column for a rollout the group does not have is 0, never NaN: adv_pos
    at X = 0 (no correct rollout) and adv_neg at X = N (no incorrect one). Such groups have zero
    variance and get A = 0 (inactive), except a group of one under verl's rule (A = r/(1 + 1e-6)).

    Example, one line:

    `fgrpo-theory focal --N 8 --gamma 0,0.5,1 --advantage trl --format csv`
    """
    from ..tables import focal_table

    ns = _spec.parse_int_list(n, name="--N", lo=1)
    gammas = _spec.parse_float_list(gamma, name="--gamma")
    r_correct, r_incorrect = _spec.parse_pair(rewards, name="--rewards")
    df = focal_table(
        ns,
        gammas,
        advantage=advantage,
        r_correct=r_correct,
        r_incorrect=r_incorrect,
        names=_NAMES,
    )
    emit(df, fmt, output, title=f"focal advantages ({advantage})")


@app.command("lr-multiplier")
def lr_multiplier_cmd(
    gamma: str = typer.Option("0,0.5,1,2", "--gamma", help="Focal exponents gamma >= 0 (list)."),
    fmt: OutputFormat | None = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Learning-rate multiplier m_gamma = B(3/2, gamma+3/2) / B(3/2, 3/2) (appendix N).

    The average focal weight applied to the mean |advantage| 2 sqrt(mu(1-mu)) over
    mu ~ Uniform(0, 1), relative to gamma = 0: how much F-GRPO shrinks the average update. The
    paper's low-LR control trains vanilla GRPO at base LR * m_gamma.

    Example, one line:

    `fgrpo-theory lr-multiplier --gamma 0,0.5,1,2 --format csv`
    """
    import pandas as pd

    from .._validate import check_array
    from ..advantages import lr_multiplier

    gammas = check_array("--gamma", _spec.parse_float_list(gamma, name="--gamma"), lo=0)
    df = pd.DataFrame({"gamma": gammas, "lr_multiplier": lr_multiplier(gammas)})
    emit(df, fmt, output, title="learning-rate multiplier")
