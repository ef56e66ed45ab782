"""docs/equations.md: every listed function exists and cites its equation; nothing is left out.

The oracle is the documentation itself: the table in docs/equations.md (parsed here), the labels
used in docs/theory.md, and the docstrings of the functions the table names. The test is strict:
a function whose docstring does not cite its label fails, whoever owns it.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SECTION = re.compile(r"docs/theory\.md section (\d+)")
PAPER_LABEL = re.compile(
    r"\(P-\d+\)|Lemma [0-9A-Z]+\.\d+|Proposition [0-9A-Z]+\.\d+|Corollary [0-9A-Z]+\.\d+"
)


def _table_rows() -> list[tuple[str, str, str]]:
    """(label, what, dotted path) for each row of the table in docs/equations.md."""
    rows = []
    for line in (DOCS / "equations.md").read_text().splitlines():
        if not line.startswith("|") or line.startswith(("| Label", "|---")):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        assert len(cells) == 3, f"a row of docs/equations.md has {len(cells)} cells: {line}"
        label, what, path = cells
        m = re.fullmatch(r"`([\w.]+)`", path)
        assert m, f"the function cell is not one `dotted.path`: {line}"
        rows.append((label, what, m.group(1)))
    return rows


ROWS = _table_rows()


def _resolve(path: str) -> object:
    """Import ``a.b.c.name`` through its longest importable module prefix."""
    parts = path.split(".")
    assert parts[0] == "fgrpo_theory" and not any(p.startswith("_") for p in parts), path
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise AssertionError(f"cannot import any module of {path}")


def _cites(doc: str, label: str) -> bool:
    """Whether ``doc`` cites ``label``.

    "(P-n)" matches "P-n" not followed by a digit ("(P-24, P-25)" cites both), a section of
    docs/theory.md matches "theory.md section(s) n[, m and k]" or "theory.md sec. n", and any
    other label (Lemma 3.1, appendix N, ...) must appear verbatim (case-insensitive).
    """
    m = re.fullmatch(r"\(P-(\d+)\)", label)
    if m:
        return re.search(rf"\bP-{m.group(1)}(?!\d)", doc) is not None
    m = SECTION.fullmatch(label)
    if m:
        for ref in re.finditer(r"theory\.md sec(?:tions?|\.)\s*([\d ,and]+)", doc):
            if m.group(1) in re.findall(r"\d+", ref.group(1)):
                return True
        return False
    return label.lower() in " ".join(doc.split()).lower()


def test_table_is_not_empty_and_sane():
    assert len(ROWS) >= 30
    assert len({(label, path) for label, _, path in ROWS}) == len(ROWS)


@pytest.mark.parametrize(("label", "what", "path"), ROWS, ids=[f"{r[0]}:{r[2]}" for r in ROWS])
def test_listed_function_exists_and_cites_its_label(label, what, path):
    obj = _resolve(path)
    assert callable(obj), f"{path} is not callable"
    doc = obj.__doc__ or ""
    assert _cites(doc, label), f"the docstring of {path} does not cite {label!r} ({what})"


def test_each_paper_label_is_computed_in_one_function():
    seen: dict[str, str] = {}
    for label, _, path in ROWS:
        if SECTION.fullmatch(label):
            continue  # a section holds several results, each a row of its own
        assert seen.setdefault(label, path) == path, f"{label} is listed twice"


def _pending() -> str:
    text = (DOCS / "equations.md").read_text()
    return text.split("## Not computed by a public function (yet)", 1)[1]


def test_every_label_of_theory_md_is_in_the_table_or_pending():
    listed = {label for label, _, _ in ROWS}
    theory = (DOCS / "theory.md").read_text()
    for label in sorted(set(PAPER_LABEL.findall(theory))):
        assert label in listed or label in _pending(), f"{label} of docs/theory.md is not listed"
    sections = re.findall(r"^## (\d+)\. ", theory, flags=re.MULTILINE)
    assert sections == [str(n) for n in range(1, 16)]
    for n in sections:
        label = f"docs/theory.md section {n}"
        assert (label in listed) != (f"- {label}:" in _pending()), f"{label}: table xor pending"


def test_theory_md_defines_the_equation_labels():
    theory = (DOCS / "theory.md").read_text()
    assert '"(P-n)" always means equation n of arXiv 2602.06717 **v2**' in theory


# -- the front page and the documentation site -------------------------------------------------
README = ROOT / "README.md"
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) < 300
    for heading in ("## Install", "## Quick start", "## What should I do?", "## Gallery"):
        assert heading in text, heading
    assert "make reproduce" in text and "make test" in text
    assert "not need it to use the toolkit" in text  # make reproduce is optional


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(page):
    """Every relative link of the README and of docs/*.md names a file that exists (the site's
    generated pages, listed in mkdocs.yml's nav, count as existing for docs/ pages)."""
    generated = {"cli.md", "experiments/index.md"} | {
        f"experiments/{p.stem}.md" for p in (ROOT / "experiments").glob("[!_]*.py")
    }
    generated |= {f"notebooks/{p.stem}.md" for p in (DOCS / "notebooks").glob("*.ipynb")}
    generated |= {f"figures/{p.name}" for p in (ROOT / "figures").glob("*")}
    for target in _LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "#", "mailto:", "data:")):
            continue
        path = target.split("#", 1)[0]
        rel = (page.parent / path).resolve()
        if rel.exists():
            continue
        assert page.parent == DOCS and path in generated, f"{page.name}: broken link {target}"


def test_mkdocs_nav_lists_existing_or_generated_pages():
    nav = re.findall(r":\s+(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), flags=re.M)
    assert "cli.md" in nav and "glossary.md" in nav and "learning-rates.md" in nav
    hooks = _load_hooks()
    experiments = {f"experiments/{name}.md" for name in _experiment_names()}
    notebooks = {f"notebooks/{p.stem}.md" for p in (DOCS / "notebooks").glob("*.ipynb")}
    generated = {"cli.md", "experiments/index.md"} | experiments | notebooks
    for page in nav:
        assert (DOCS / page).exists() or page in generated, page
    assert experiments <= set(nav), "an experiment page is missing from the nav"
    assert notebooks <= set(nav), "a notebook is missing from the nav"
    assert callable(hooks.on_files)


def _load_hooks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_fgrpo_docs_hooks", DOCS / "_hooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _experiment_names() -> list[str]:
    from fgrpo_theory.cli._experiments import experiments_package

    reg = importlib.import_module(f"{experiments_package().__name__}.registry")
    return [e.name for e in reg.discover([])]


def test_cli_reference_is_generated_from_every_command():
    import typer

    from fgrpo_theory.cli import app

    text = _load_hooks()._cli_reference()
    names = typer.main.get_command(app).list_commands(None)
    assert "lr" in names and len(names) >= 13
    for name in names:
        assert f"## `{name}`" in text, name
    assert "`--optimizer`" in text and "<cache>/fast-preview/" in text


def _help_texts() -> list[str]:
    import typer

    from fgrpo_theory.cli import app

    group = typer.main.get_command(app)
    out = [group.help or ""]
    for name in group.list_commands(None):
        cmd = group.get_command(None, name)
        out.append(cmd.help or "")
        out += [getattr(p, "help", None) or "" for p in cmd.params]
    return out


def test_no_issue_numbers_in_user_facing_text():
    """README, docs pages, CLI help and figure titles never name the project's issue numbers."""
    from fgrpo_theory.cli._experiments import experiments_package

    reg = importlib.import_module(f"{experiments_package().__name__}.registry")
    texts = {"README.md": README.read_text()}
    texts |= {f"docs/{p.name}": p.read_text() for p in DOCS.glob("*.md")}
    texts |= {f"help {i}": t for i, t in enumerate(_help_texts())}
    texts |= {f"title {e.name}": e.title for e in reg.discover([])}
    for where, text in texts.items():
        assert not re.search(r"\bissues? #?\d+", text, flags=re.I), where


def _console_examples(text: str) -> list[tuple[str, str]]:
    """(command, expected output) of each ``$ fgrpo-theory`` line of a console block followed by
    output lines (a bare list of commands, as in the command tour, has no output to compare)."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("$ fgrpo-theory"):
                j = i + 1
                while j < len(lines) and not lines[j].startswith("$ "):
                    j += 1
                expected = "\n".join(lines[i + 1 : j]).strip()
                if expected:
                    out.append((lines[i][2:], expected))
                i = j
            else:
                i += 1
    return out


@pytest.mark.parametrize("command,expected", _console_examples(README.read_text()))
def test_readme_outputs_are_what_the_commands_print(command, expected, tmp_path):
    import os
    import subprocess
    import sys

    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    assert (Path(bindir) / "fgrpo-theory").exists(), "the console script is not installed"
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected
