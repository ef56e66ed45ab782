"""Spec grammars (logit specs, index sets, integer and float lists, groups, pairs).

PLACEHOLDER written on branch ``mass`` only so that ``cli/mass.py`` can be tested; helper "cli"
owns this module and its version replaces this one at merge. Signatures follow HELPERS.md.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from ._validate import MAX_EXACT_INT, check_array, fail

#: Largest number of actions a logit spec or index set may expand to.
MAX_ACTIONS = 50_000_000


def _items(spec: str, name: str) -> list[str]:
    if not isinstance(spec, str) or not spec.strip():
        fail(name, spec, "a non-empty comma-separated list")
    items = [t.strip() for t in spec.split(",")]
    if any(not t for t in items):
        fail(name, spec, "a comma-separated list without empty items")
    return items


def parse_logits(spec: str) -> np.ndarray:
    """``VALUE`` / ``VALUExCOUNT`` items, or a .npy / .csv path of a 1-d array -> float64 logits."""
    name = "--logits"
    if isinstance(spec, str) and spec.lower().endswith((".npy", ".csv")):
        path = Path(spec)
        if not path.is_file():
            fail(name, spec, "an existing .npy or .csv file")
        arr = np.load(path) if spec.lower().endswith(".npy") else np.loadtxt(path, delimiter=",")
        z = check_array(name, arr)
        if z.ndim != 1:
            fail(name, f"an array of shape {z.shape}", "a 1-d array of logits")
        return z
    values, counts = [], []
    for item in _items(spec, name):
        head, sep, tail = item.lower().rpartition("x")
        v_text, c_text = (head, tail) if sep else (tail, "1")
        try:
            v, c = float(v_text), int(c_text)
        except ValueError:
            fail(name, item, "VALUE or VALUExCOUNT with a number VALUE and an integer COUNT >= 1")
        if not math.isfinite(v) or c < 1:
            fail(name, item, "VALUE or VALUExCOUNT with a finite VALUE and COUNT >= 1")
        values.append(v)
        counts.append(c)
        if sum(counts) > MAX_ACTIONS:
            fail(name, item, f"a spec of at most {MAX_ACTIONS} actions")
    return np.repeat(np.asarray(values, dtype=float), counts)


def parse_index_set(spec: str, size: int | None = None, *, name: str) -> np.ndarray:
    """``I`` / ``A..B`` items (0-based, inclusive) -> sorted unique int64, each < size."""
    hi = (MAX_ACTIONS if size is None else size) - 1
    out: list[np.ndarray] = []
    total = 0
    for item in _items(spec, name):
        m = re.fullmatch(r"(\d+)(?:\.\.(\d+))?", item)
        if m is None:
            fail(name, item, "an index I or a range A..B of integers >= 0")
        a = int(m.group(1))
        b = a if m.group(2) is None else int(m.group(2))
        if b < a:
            fail(name, item, "a range A..B with A <= B")
        if b > hi:
            fail(name, b, f"an index <= {hi}")
        total += b - a + 1
        if total > MAX_ACTIONS:
            fail(name, item, f"a set of at most {MAX_ACTIONS} indices")
        out.append(np.arange(a, b + 1, dtype=np.int64))
    return np.unique(np.concatenate(out))


def parse_int_list(
    spec: str, *, name: str, lo: int | None = None, hi: int | None = None
) -> list[int]:
    """``I`` / ``A..B`` items -> sorted unique ints in [lo, hi] (minimal placeholder)."""
    hi = MAX_EXACT_INT if hi is None else hi
    vals = parse_index_set(spec, None, name=name) if lo is None or lo >= 0 else None
    if vals is None:
        fail(name, spec, "non-negative integers")
    for v in vals:
        if lo is not None and v < lo:
            fail(name, int(v), f">= {lo}")
        if v > hi:
            fail(name, int(v), f"<= {hi}")
    return [int(v) for v in vals]


def parse_float_list(spec: str, *, name: str) -> list[float]:
    """Comma-separated finite floats, order kept."""
    out = []
    for item in _items(spec, name):
        try:
            v = float(item)
        except ValueError:
            fail(name, item, "a number")
        if not math.isfinite(v):
            fail(name, item, "a finite number")
        out.append(v)
    return out


def parse_group(spec: str, n_actions: int, *, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``ACTION`` / ``ACTIONxCOUNT`` items -> (actions, counts) int64 arrays, actions distinct."""
    actions, counts = [], []
    for item in _items(spec, name):
        m = re.fullmatch(r"(\d+)(?:[xX](\d+))?", item)
        if m is None:
            fail(name, item, "ACTION or ACTIONxCOUNT with integers ACTION >= 0, COUNT >= 1")
        a, c = int(m.group(1)), 1 if m.group(2) is None else int(m.group(2))
        if a >= n_actions:
            fail(name, item, f"an item whose action is in [0, {n_actions - 1}]")
        if c < 1 or c > MAX_EXACT_INT:
            fail(name, item, "ACTIONxCOUNT with 1 <= COUNT <= 2**53")
        actions.append(a)
        counts.append(c)
    if len(set(actions)) != len(actions):
        fail(name, spec, "a list of distinct actions")
    return np.asarray(actions, dtype=np.int64), np.asarray(counts, dtype=np.int64)


def parse_pair(spec: str, *, name: str) -> tuple[float, float]:
    """Two comma-separated finite floats."""
    vals = parse_float_list(spec, name=name)
    if len(vals) != 2:
        fail(name, spec, "two comma-separated numbers")
    return vals[0], vals[1]
