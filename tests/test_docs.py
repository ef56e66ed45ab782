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
