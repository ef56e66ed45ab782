"""CLI command ``figures`` (regenerate the figures of the analysis); ``validate``: validate.py."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .._validate import fail
from ._app import app
from ._common import FORMAT_OPTION, OutputFormat, emit

_TORCH_HINT = "pip install torch==2.13.0, then pip install 'fgrpo-theory[torch]'"


def _parse_formats(text: str) -> tuple[str, ...]:
    items = tuple(t.strip().lower() for t in text.split(","))
    if not text.strip() or any(not t for t in items):
        fail("--figure-format", text, "a comma-separated list of pdf, png, svg")
    for t in items:
        if t not in {"pdf", "png", "svg"}:
            fail("--figure-format", t, "one of pdf, png, svg")
    return tuple(dict.fromkeys(items))


def _home_is_usable() -> bool:
    import os

    try:
        home = Path.home()
    except (RuntimeError, KeyError, OSError):
        return False
    return home.is_dir() and os.access(home, os.W_OK | os.X_OK)


def _private_config_without_home() -> bool:
    """With a missing or unwritable home folder, give matplotlib a private temporary folder
    (``MPLCONFIGDIR``, mode 0700, removed at exit) unless ``MPLCONFIGDIR`` is set, so that
    ``figures`` never creates the home folder (matplotlib's ``~/.config`` and ``~/.cache``; the
    table cache already declines a missing home). Call before matplotlib or the experiments
    load (:mod:`fgrpo_theory.plotting` does the same for library users). Returns True when the
    home folder is not usable."""
    import os

    if _home_is_usable():
        return False
    if not os.environ.get("MPLCONFIGDIR") and "matplotlib" not in sys.modules:
        import atexit
        import shutil
        import tempfile

        try:
            folder = tempfile.mkdtemp(prefix="fgrpo-theory-mpl-")
        except OSError:  # no usable temporary folder either: matplotlib copes (with a warning)
            return True
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        os.environ["MPLCONFIGDIR"] = folder
    return True


@app.command("figures")
def figures_cmd(
    names: list[str] = typer.Argument(
        None, help="'list', 'all', or one or more figure names (see 'figures list')."
    ),
    out: Path = typer.Option(
        None,
        "--out",
        help="Output folder [default: `figures/`, or `<cache>/fast-preview/` with --fast].",
    ),
    figure_format: str = typer.Option(
        "pdf,png", "--figure-format", help="Figure file formats: pdf, png, svg."
    ),
    fmt: OutputFormat = FORMAT_OPTION,
    fast: bool = typer.Option(
        False, "--fast", help="Fewer seeds, steps and grid points; figures marked FAST PREVIEW."
    ),
    force: bool = typer.Option(
        False, "--force", help="Recompute cached data (simulations and stored tables included)."
    ),
    recompute: bool = typer.Option(
        False,
        "--recompute",
        help="Recompute the stored tables of long experiments (and store them in a checkout).",
    ),
    dpi: int = typer.Option(300, "--dpi", help="PNG resolution, 200 to 2400."),
    workers: int = typer.Option(
        1,
        "--workers",
        help="Figures computed at a time, each in a process of its own (1 to 256); the files "
        "are the same for any value. `make reproduce` uses 2.",
    ),
) -> None:
    """Regenerate the figures of the analysis (tables cached in the user's cache folder).

    Long experiments plot from their stored tables (experiments/stored/, checked against the
    code that runs); --recompute computes them again.

    The cache folder is $FGRPO_THEORY_CACHE_DIR, else $XDG_CACHE_HOME/fgrpo-theory, else
    ~/.cache/fgrpo-theory. Extra figure modules are found in the folders listed in
    $FGRPO_THEORY_FIGURES_PATH. --format applies to 'figures list' (table, csv or json).

    Examples:

        fgrpo-theory figures list

        fgrpo-theory figures all --out figures --workers 2

        fgrpo-theory figures fig1a_tail_miss fig4_focal_magnitudes --figure-format png --out figs

        fgrpo-theory figures fig2_simulation --fast
    """
    import time

    from rich.console import Console

    from ._experiments import experiments_package

    no_home = _private_config_without_home()
    experiments_package()
    from fgrpo_theory_experiments import registry
    from fgrpo_theory_experiments.cache import cache_dir

    names = list(names or [])
    if not names:
        fail("NAMES", "nothing", "'list', 'all' or figure names")
    if names == ["list"]:
        import pandas as pd

        exps = registry.experiments()
        df = pd.DataFrame(
            {
                "name": [e.name for e in exps],
                "in_paper": [e.in_paper for e in exps],
                "cost_seconds": [e.cost_seconds for e in exps],
                "title": [e.title for e in exps],
            }
        )
        emit(df, fmt, None, title="Figures (fgrpo-theory figures NAME...)")
        return
    if "list" in names:
        fail("NAMES", "list", "used alone")
    selected = registry.names() if names == ["all"] else list(dict.fromkeys(names))
    if "all" in selected and names != ["all"]:
        fail("NAMES", "all", "used alone")
    exps = [registry.get(n) for n in selected]  # validate every name before running anything
    for exp in exps:  # and refuse a stale stored table before computing anything
        problem = registry.stored_problem(exp, fast=fast, recompute=recompute or force)
        if problem is not None:
            raise ValueError(problem)
    formats = _parse_formats(figure_format)
    if not 200 <= dpi <= 2400:
        fail("--dpi", dpi, "in [200, 2400]")
    if not 1 <= workers <= registry.MAX_WORKERS:
        fail("--workers", workers, f"an integer in [1, {registry.MAX_WORKERS}]")
    if no_home and fast and out is None and cache_dir().absolute().is_relative_to(Path.home()):
        fail(
            "--out",
            "not given",
            "a folder when the home folder is missing (--fast writes into the cache folder "
            "under it by default)",
        )
    out_dir = (
        out if out is not None else (cache_dir() / "fast-preview" if fast else Path("figures"))
    )
    if out_dir.exists() and not out_dir.is_dir():
        fail("--out", str(out_dir), "a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail("--out", str(out_dir), f"a folder that can be created ({e.strerror or e})")
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    t_all = time.perf_counter()
    skipped = []
    running: list[str] = []
    finished: list[str] = []
    status = console.status("")

    def label() -> str:
        if workers == 1:
            return f"[{len(finished) + 1}/{len(exps)}] {running[0]} ..."
        return f"{len(finished)}/{len(exps)} done; running: {', '.join(running)}"

    def on_start(exp) -> None:
        running.append(exp.name)
        status.update(label())

    def on_done(exp, res) -> None:
        running.remove(exp.name)
        finished.append(exp.name)
        head = f"[{len(finished)}/{len(exps)}] {exp.name}"
        if res is None:  # an optional extra the figure needs (the sequence rung)
            if names != ["all"]:
                raise ValueError(f"figure {exp.name} needs PyTorch: {_TORCH_HINT}")
            skipped.append(exp.name)
            console.print(f"{head}: skipped (needs PyTorch)")
        else:
            src = {"cache": "cached"}.get(res.source, res.source)
            files = ", ".join(p.name for p in res.paths)
            console.print(f"{head}: {src}, {res.seconds:.1f} s -> {out_dir}/ {files}")
        if running:
            status.update(label())

    with status:
        registry.run_all(
            exps, out_dir, formats, workers=workers, skip_missing_torch=True, on_start=on_start,
            on_done=on_done, fast=fast, force=force, recompute=recompute, dpi=dpi,
        )  # fmt: skip
    done = len(exps) - len(skipped)
    console.print(f"done: {done} figure(s) in {time.perf_counter() - t_all:.1f} s")
    if skipped:
        console.print(f"skipped {len(skipped)} figure(s) that need PyTorch: {_TORCH_HINT}")
