"""CLI command ``sequence``: SFT (cached) + RL of a small transformer, exact evaluation."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from . import _common as opt
from ._app import app
from ._common import OutputFormat, emit

_COLUMNS = ["step", "split", "pass_at_1", "pass_at_16", "pass_at_256", "coverage_at_256",
            "rare_nll", "rare_nll_rise", "entropy", "active_frac", "tail_miss_rate"]  # fmt: skip


@app.command("sequence")
def sequence_cmd(
    preset: str = typer.Option(
        "quick", "--preset", help="Named run: quick, single-quick (one correct route) or smoke."
    ),
    N: int | None = typer.Option(None, "--N", help="Rollouts per prompt (overrides)."),
    B: int | None = typer.Option(None, "--B", help="Prompts per step (overrides)."),
    steps: int | None = typer.Option(None, "--steps", help="RL steps (overrides)."),
    scheme: str | None = typer.Option(
        None, "--scheme", help="Scheme spec: grpo, trl+focal:gamma=1, maxrl, ..."
    ),
    aggregation: str | None = typer.Option(
        None, "--aggregation", help="Loss aggregation: token-mean or sequence-sum."
    ),
    optimizer: str | None = typer.Option(None, "--optimizer", help="adamw or sgd."),
    lr: float | None = typer.Option(None, "--lr", help="RL learning rate (overrides)."),
    inner_updates: int | None = opt.INNER_UPDATES_OPTION,
    seed: int | None = typer.Option(
        None, "--seed", help="Seed of the task, weights, SFT data, prompts and rollouts."
    ),
    threads: int = typer.Option(
        1, "--threads", help="torch threads (same seed and threads: identical numbers)."
    ),
    lemma_check: bool = typer.Option(
        False,
        "--lemma-check",
        help="Before each step compute the batch's exact mu and tau: columns p_tail_miss, "
        "p_tail_miss_lemma (Lemma 3.1) and tail_miss_z (slower).",
    ),
    cache: bool = typer.Option(
        True, "--cache/--no-cache", help="Reuse / store the SFT checkpoint in the user cache."
    ),
    fmt: OutputFormat | None = opt.FORMAT_OPTION,
    output: Path | None = opt.OUTPUT_OPTION,
) -> None:
    """Train a small decoder-only transformer on grid routes: SFT on a biased teacher (cached),
    then RL with a group scheme; exact pass@k, rare coverage and rare NLL per logged step.

    Needs PyTorch (pip install torch==2.13.0, then the extra [torch]). docs/sequence.md.

    Example: fgrpo-theory sequence --preset quick --scheme grpo+focal:gamma=1
    """
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise ValueError(
            "the sequence command needs PyTorch: pip install torch==2.13.0, then "
            "pip install 'fgrpo-theory[torch]'"
        )
    from ..sequence.run import preset as make_config
    from ..sequence.run import run_sequence

    if output is not None:
        opt.check_output_path(output)
    cfg = make_config(
        preset, N=N, B=B, steps=steps, scheme=scheme, aggregation=aggregation,
        optimizer=optimizer, lr=lr, inner_updates=inner_updates, seed=seed, threads=threads,
    )  # fmt: skip
    show = sys.stderr.isatty()

    def progress(phase: str, done: int, total: int) -> None:
        if show:
            print(f"\r{phase} {done}/{total}", end="" if done < total else "\n", file=sys.stderr)

    try:
        df = run_sequence(cfg, cache=cache, progress=progress, lemma_check=lemma_check)
    except KeyboardInterrupt as e:
        # between steps (the SFT cache is written whole or not at all); cli.main prints the one
        # line, with the step the run stopped after (exit code 130)
        from ._common import INTERRUPTED_AFTER

        if show:
            print(file=sys.stderr)
        if e.args and isinstance(e.args[0], str):
            INTERRUPTED_AFTER.append(e.args[0])
        raise typer.Exit(130) from None
    # no value (held-out rows have no groups; single-solution prompts no rare set): empty / null
    cols = _COLUMNS + (["p_tail_miss", "p_tail_miss_lemma", "tail_miss_z"] if lemma_check else [])
    table = df[cols].astype(object).where(df[cols].notna(), None)
    emit(table, fmt, output, title=f"sequence {cfg.name}: {cfg.rl.scheme}, N={cfg.rl.N}")
    src = "from the cache" if df.attrs.get("sft_cached") else "trained"
    typer.echo(f"SFT checkpoint {src}; config_hash {df['config_hash'].iloc[0]}", err=True)
