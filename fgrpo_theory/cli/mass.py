"""CLI command ``mass``: mass redistribution inside the correct set (Proposition 3.2, P-17)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from ._app import app
from ._common import FORMAT_OPTION, OUTPUT_OPTION, OutputFormat, emit

#: Largest number of actions of ``mass`` (its report holds about 70 bytes per action: 700 MB).
MASS_MAX_ACTIONS = 10_000_000
#: The paper's simulation start (appendix J): 1 anchor at 5.0, 9,999 correct at 3.0, 118,000
#: incorrect at 0.0; the correct actions are the first 10,000.
PAPER_LOGITS = "5.0x1,3.0x9999,0.0x118000"
PAPER_CORRECT = "0..9999"

#: Library argument names -> the option that sets them (library errors are reported in the
#: user's words).
_OPTIONS = {
    "group counts": "--group",
    "group size": "--group",
    "group": "--group",
    "r_correct": "--rewards R_c",
    "r_incorrect": "--rewards R_w",
    "convention": "--advantage",
    "advantage": "--advantage",
    "samples": "--samples",
    "method": "--method",
    "logits": "--logits",
    "correct": "--correct",
    "gamma": "--gamma",
    "seed": "--seed",
    "rule": "--rule",
    "lr": "--lr",
    "N": "--N",
}


class Rule(StrEnum):
    """Update rule of the ``mass`` command (see :mod:`fgrpo_theory.mass.step`)."""

    theory = "theory"
    linear = "linear"
    logprob = "logprob"


class Method(StrEnum):
    """How expectations over the group draw are computed."""

    auto = "auto"
    enumerate = "enumerate"
    monte_carlo = "monte-carlo"


def _in_option_words(e: ValueError) -> ValueError:
    """Rename the library argument that starts the message to the option that sets it."""
    msg = str(e)
    for name, option in _OPTIONS.items():
        if msg.startswith(name + " must"):
            return ValueError(option + msg[len(name) :])
    return e


@app.command("mass")
def mass_cmd(
    logits: str = typer.Option(
        PAPER_LOGITS,
        "--logits",
        help="Policy logits: VALUE or VALUExCOUNT items, or a .npy/.csv file of a 1-d array.",
        metavar="SPEC",
    ),
    correct: str = typer.Option(
        PAPER_CORRECT,
        "--correct",
        help="Correct actions: 0-based indices I or ranges A..B, comma-separated.",
        metavar="INDEXSET",
    ),
    n: int | None = typer.Option(
        None,
        "--N",
        help="Group size N, 1 <= N <= 1048576 [default: 8, or the size of --group].",
        show_default=False,
    ),
    lr: float = typer.Option(1e-2, "--lr", help="Step size lr > 0 (eta in the paper)."),
    rewards: str = typer.Option(
        "1,-1", "--rewards", help="Rewards R_c,R_w with R_c > R_w.", metavar="R_C,R_W"
    ),
    rule: Rule = typer.Option(
        Rule.theory,
        "--rule",
        help="Update rule: theory (P-5), linear (the paper's simulation) or logprob.",
    ),
    gamma: float = typer.Option(0.0, "--gamma", help="Focal exponent gamma >= 0 (P-12)."),
    advantage: str | None = typer.Option(
        None,
        "--advantage",
        help="Advantage preset for linear and logprob: grpo, grpo-bessel, trl, verl, openrlhf, "
        "dr-grpo, rloo [default: dr-grpo for linear, grpo for logprob; none for theory].",
        show_default=False,
        metavar="PRESET",
    ),
    group: str | None = typer.Option(
        None,
        "--group",
        help="The group to decompose, as 0-based ACTION or ACTIONxCOUNT items (e.g. 0x3,17) "
        "[default: sampled with --seed].",
        show_default=False,
        metavar="GROUP",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the sampled group and of Monte Carlo."),
    samples: int = typer.Option(
        10_000,
        "--samples",
        help="Monte Carlo groups for the expectations, >= 2, with samples * N <= 2**31.",
    ),
    method: Method = typer.Option(
        Method.auto,
        "--method",
        help="Expectations by enumeration of all group outcomes (at most 5,000,000), Monte "
        "Carlo, or auto (enumerate up to 20,000 outcomes).",
    ),
    fmt: OutputFormat = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Decompose the change of the correct mass after one update (P-17, Proposition 3.2 / P-10).

    For ONE group of N draws (sampled with --seed, or given by --group) the command prints the
    section 5 statistics, the first-order change of the total correct mass Q_pos split into its
    three terms (sampled correct, sampled incorrect, unsampled coupling) and of the unsampled
    correct mass Q_u split into direct drift and normalization coupling, next to the EXACT changes
    after the softmax is recomputed. Then it prints their expected values over the group draw, by
    exact enumeration of all outcomes (small K and N) or Monte Carlo with a standard error. The
    closed forms P-17/P-10 describe the theory rule (linear surrogate on distinct sampled actions,
    P-5); for linear (per-sample linear surrogate, the paper's simulation) and logprob (policy
    gradient with an advantage convention) the first-order terms are P-19 applied to the rule's
    logit step. For logprob the expected drift of section 6 (h, E[dQ_pos], the threshold below
    which a correct action loses mass) is added.

    The default policy is the paper's simulation start: 128,000 actions, one correct anchor at
    logit 5.0, 9,999 correct at 3.0, 118,000 incorrect at 0.0.

    Example: fgrpo-theory mass --logits 2x1,1x3,0x4 --correct 0..3 --N 4 --lr 0.5 --rule logprob
    """
    import numpy as np

    from .. import _spec
    from ..mass import mass_report

    z = _spec.parse_logits(logits, max_actions=MASS_MAX_ACTIONS)
    idx = _spec.parse_index_set(correct, z.size, name="--correct")
    mask = np.zeros(z.size, dtype=bool)
    mask[idx] = True
    r_c, r_w = _spec.parse_pair(rewards, name="--rewards")
    grp = None if group is None else _spec.parse_group(group, z.size, name="--group")
    try:
        df = mass_report(
            z,
            mask,
            N=n,
            group=grp,
            lr=lr,
            rule=str(rule),
            gamma=gamma,
            r_correct=r_c,
            r_incorrect=r_w,
            advantage=advantage,
            method=str(method),
            samples=samples,
            seed=seed,
        )
    except ValueError as e:
        raise _in_option_words(e) from None
    a = df.attrs
    adv = "" if a["advantage"] is None else f", {a['advantage']}"
    title = (
        f"mass: logits {logits}; correct {correct}; rule {a['rule']}{adv}, N={a['N']}, "
        f"lr={a['lr']:g}, gamma={a['gamma']:g}, R_c={a['r_correct']:g}, R_w={a['r_incorrect']:g}"
    )
    emit(df, fmt, output, title=title)
