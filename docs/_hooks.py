"""MkDocs hooks of the documentation site (``mkdocs.yml``: ``hooks: [docs/_hooks.py]``).

Pages generated at build time, never committed (so they cannot drift from the code):

- ``cli.md``: the CLI reference, rendered from the Typer commands themselves (their docstrings,
  options, defaults and help texts);
- ``experiments/index.md`` and ``experiments/<name>.md``: one page per figure module of the
  registry (title, whether it is in the paper, cost, declared parameters, the module's docstring,
  the figure);
- ``figures/<name>.png|pdf``: the committed figures, so pages can show them;
- ``notebooks/<name>.md``: each ``docs/notebooks/*.ipynb`` **executed** with nbclient (a failing
  cell fails the build) and rendered as a page with its outputs.
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
import os
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Seconds a notebook cell may run before the build fails.
CELL_TIMEOUT = 120


def _cli_reference() -> str:
    import click
    import typer

    from fgrpo_theory.cli import app

    group = typer.main.get_command(app)
    ctx = click.Context(group, info_name="fgrpo-theory")
    out = [
        "# CLI reference",
        "",
        "Generated from the commands themselves at build time (`docs/_hooks.py`): what "
        "`fgrpo-theory COMMAND --help` prints, as tables. Every command also takes "
        "`-h/--help`.",
        "",
    ]
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        sub = click.Context(cmd, info_name=name, parent=ctx)
        usage = " ".join(cmd.collect_usage_pieces(sub))
        out += [f"## `{name}`", "", f"```\nfgrpo-theory {name} {usage}\n```", ""]
        out += [inspect.cleandoc(cmd.help or ""), ""]
        rows = []
        for p in cmd.params:
            if p.name == "help":
                continue
            opts = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
            if isinstance(p, click.Argument):
                opts = f"`{p.human_readable_name}` (argument)"
            default = ""
            show = getattr(p, "show_default", None)
            if isinstance(show, str):
                default = show
            elif p.required:
                default = "required"
            elif p.default not in (None, "") and not callable(p.default):
                d = p.default
                default = f"`{getattr(d, 'value', d)}`"
            text = _md_escape(" ".join((getattr(p, "help", None) or "").split()))
            rows.append(f"| {opts} | {default.replace('|', chr(92) + '|')} | {text} |")
        if rows:
            out += ["| option | default | meaning |", "|---|---|---|", *rows, ""]
    return "\n".join(out) + "\n"


def _fmt(v: object) -> str:
    """A declared parameter as text: paths relative to the repository, NumPy scalars as numbers,
    long sequences shortened."""
    import numpy as np

    if isinstance(v, Path):
        try:
            return str(v.resolve().relative_to(ROOT))
        except ValueError:
            return v.name
    if isinstance(v, np.generic):
        return repr(v.item())
    if isinstance(v, tuple | list):
        items = [_fmt(x) for x in v]
        if len(items) > 8:
            items = [*items[:4], "...", *items[-2:], f"({len(v)} values)"]
        return "(" + ", ".join(items) + ")"
    return repr(v)


def _md_escape(text: str) -> str:
    """Help text for a table cell: ``|`` escaped, and ``[`` / ``]`` outside code spans escaped
    (a spec grammar such as ``NAME[:key=value][+focal:gamma=G]`` is not a link)."""
    parts = text.replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):  # even parts are outside code spans
        parts[i] = parts[i].replace("[", "\\[").replace("]", "\\]")
    return "`".join(parts)


def _params_table(params: object) -> str:
    if not dataclasses.is_dataclass(params):
        return ""
    rows = ["| parameter | value |", "|---|---|"]
    for f in dataclasses.fields(params):
        text = _fmt(getattr(params, f.name)).replace("|", "/")
        rows.append(f"| `{f.name}` | `{text}` |")
    return "\n".join(rows)


def _experiment_pages() -> dict[str, str]:
    import importlib

    from fgrpo_theory.cli._experiments import experiments_package

    pkg = experiments_package()
    registry = importlib.import_module(f"{pkg.__name__}.registry")
    exps = registry.discover([])
    pages: dict[str, str] = {}
    index = [
        "# Experiments",
        "",
        "One page per figure: the experiment module `experiments/<name>.py` declares its "
        "parameters (fixed before any run), computes a tidy table with the library and draws "
        "the figure from that table only. `fgrpo-theory figures <name>` regenerates one; "
        "costs are wall-time estimates on a 2-core machine with full settings.",
        "",
        "| figure | in the paper | cost (s) | title |",
        "|---|---|---:|---|",
    ]
    for e in exps:
        mod = e.load()
        doc = inspect.cleandoc(mod.__doc__ or "")
        png = ROOT / "figures" / f"{e.name}.png"
        fig = (
            f"![{e.name}](../figures/{e.name}.png)\n\n[PDF](../figures/{e.name}.pdf)"
            if png.exists()
            else "*(not generated yet: `fgrpo-theory figures " + e.name + "`)*"
        )
        pages[f"experiments/{e.name}.md"] = "\n".join(
            [
                f"# {e.title}",
                "",
                f"`experiments/{e.name}.py` · in the paper: {'yes' if e.in_paper else 'no'} · "
                f"estimated cost {e.cost_seconds:g} s · "
                f"regenerate: `fgrpo-theory figures {e.name}`",
                "",
                fig,
                "",
                "## Settings",
                "",
                "Declared in the module (`PARAMS`) before any run; hashed into the cache key.",
                "",
                _params_table(getattr(mod, "PARAMS", None)),
                "",
                "## What it computes",
                "",
                _escape_doc(doc),
                "",
            ]
        )
        index.append(
            f"| [{e.name}]({e.name}.md) | {'yes' if e.in_paper else 'no'} | "
            f"{e.cost_seconds:g} | {e.title} |"
        )
    pages["experiments/index.md"] = "\n".join(index) + "\n"
    return pages


def _escape_doc(doc: str) -> str:
    """A module docstring as Markdown: reST roles as code, indented blocks kept verbatim."""
    doc = re.sub(r":(?:func|mod|class|data|meth|attr):`~?([^`]+)`", r"`\1`", doc)
    return doc.replace("``", "`")


def _notebook_page(path: Path) -> str:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # "python3" is ipykernel's own spec: the kernel runs in this Python (the docs extra)
    NotebookClient(
        nb,
        kernel_name="python3",
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    out = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            out.append(cell.source)
        elif cell.cell_type == "code":
            out.append(f"```python\n{cell.source}\n```")
            for o in cell.get("outputs", []):
                if o.output_type == "stream":
                    out.append(_text_block(o.text))
                elif o.output_type in ("execute_result", "display_data"):
                    data = o.get("data", {})
                    if "image/png" in data:
                        b64 = data["image/png"].replace("\n", "")
                        base64.b64decode(b64)  # a broken image fails the build
                        out.append(f"![output](data:image/png;base64,{b64})")
                    elif "text/plain" in data:
                        out.append(_text_block(data["text/plain"]))
                elif o.output_type == "error":  # pragma: no cover - execute() raises first
                    raise RuntimeError(f"{path.name}: {o.ename}: {o.evalue}")
    source = f"docs/notebooks/{path.name}"
    out.append(f"*Executed when the site was built; the notebook is `{source}`.*")
    return "\n\n".join(out) + "\n"


def _text_block(text: str) -> str:
    return "```text\n" + textwrap.dedent(text).rstrip("\n") + "\n```"


def on_files(files, config):  # noqa: ANN001, ANN201 - MkDocs's Files and config
    """Add the generated pages, the figures and the executed notebooks to the site."""
    from mkdocs.structure.files import File

    generated: dict[str, str] = {"cli.md": _cli_reference(), **_experiment_pages()}
    for nb in sorted((ROOT / "docs" / "notebooks").glob("*.ipynb")):
        generated[f"notebooks/{nb.stem}.md"] = _notebook_page(nb)
    for uri, text in generated.items():
        files.append(File.generated(config, uri, content=text))
    for fig in sorted((ROOT / "figures").glob("*.p[dn][fg]")):
        files.append(File.generated(config, f"figures/{fig.name}", abs_src_path=str(fig)))
    return files
