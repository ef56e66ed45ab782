"""CLI command ``figures`` (regenerate the figures of the analysis); ``validate``: validate.py."""

from __future__ import annotations

from pathlib import Path

import typer

from .._validate import fail
from ._app import app
from ._common import OutputFormat, emit

#: Where ``figures --fast`` writes when no ``--out`` is given (gitignored, so previews never
#: overwrite the committed figures).
FAST_OUT = Path("experiments") / "data" / "fast-preview"


def _parse_formats(text: str) -> tuple[str, ...]:
    items = tuple(t.strip().lower() for t in text.split(","))
    if not text.strip() or any(not t for t in items):
        fail("--format", text, "a comma-separated list of pdf, png, svg")
    for t in items:
        if t not in {"pdf", "png", "svg"}:
            fail("--format", t, "one of pdf, png, svg")
    return tuple(dict.fromkeys(items))


@app.command("figures")
def figures_cmd(
    names: list[str] = typer.Argument(
        None, help="'list', 'all', or one or more figure names (see 'figures list')."
    ),
    out: Path = typer.Option(
        None,
        "--out",
        help="Output folder [default: figures/, or experiments/data/fast-preview/ with --fast].",
    ),
    fmt: str = typer.Option("pdf,png", "--format", help="Figure formats: pdf, png, svg."),
    fast: bool = typer.Option(
        False, "--fast", help="Fewer seeds, steps and grid points; figures marked FAST PREVIEW."
    ),
    force: bool = typer.Option(False, "--force", help="Recompute cached data."),
    dpi: int = typer.Option(300, "--dpi", help="PNG resolution, 200 to 2400."),
) -> None:
    """Regenerate the figures of the analysis (data cached under experiments/data/).

    Examples:

        fgrpo-theory figures list

        fgrpo-theory figures all

        fgrpo-theory figures fig1a_tail_miss fig3_tail_miss_panels --format png --out /tmp/figs

        fgrpo-theory figures fig2_simulation --fast
    """
    import time

    from rich.console import Console

    from experiments import registry

    names = list(names or [])
    if not names:
        fail("NAMES", "nothing", "'list', 'all' or figure names")
    if names == ["list"]:
        import pandas as pd

        df = pd.DataFrame(
            {
                "name": [e.name for e in registry.EXPERIMENTS],
                "in_paper": ["yes" if e.in_paper else "no" for e in registry.EXPERIMENTS],
                "title": [e.title for e in registry.EXPERIMENTS],
            }
        )
        emit(df, OutputFormat.table, None, title="Figures (fgrpo-theory figures NAME...)")
        return
    if "list" in names:
        fail("NAMES", "list", "used alone")
    selected = registry.names() if names == ["all"] else names
    if "all" in selected and names != ["all"]:
        fail("NAMES", "all", "used alone")
    for n in selected:
        registry.get(n)  # validate every name before running anything
    formats = _parse_formats(fmt)
    if not 200 <= dpi <= 2400:
        fail("--dpi", dpi, "in [200, 2400]")
    out_dir = out if out is not None else (FAST_OUT if fast else Path("figures"))
    if out_dir.exists() and not out_dir.is_dir():
        fail("--out", str(out_dir), "a folder")
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    t_all = time.perf_counter()
    for i, n in enumerate(selected, 1):
        with console.status(f"[{i}/{len(selected)}] {n} ..."):
            res = registry.run(n, out_dir, formats, fast=fast, force=force, dpi=dpi)
        src = "cached" if res.cache_hit else "computed"
        files = ", ".join(p.name for p in res.paths)
        console.print(
            f"[{i}/{len(selected)}] {n}: {src}, {res.seconds:.1f} s -> {out_dir}/ {files}"
        )
    console.print(f"done: {len(selected)} figure(s) in {time.perf_counter() - t_all:.1f} s")
