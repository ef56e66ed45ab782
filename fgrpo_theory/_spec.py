"""Every spec grammar of the toolkit, in one place (private; the CLI and config files use it).

- logit spec: comma-separated items ``VALUE`` or ``VALUExCOUNT`` (``"5.0x1,3.0x9999,0.0x118000"``;
  ``"0"`` is ONE action with logit 0, ``"0x6"`` is six), or a path to a ``.npy`` / ``.csv`` /
  ``.txt`` file holding a 1-D array of logits;
- index set: comma-separated items ``I``, ``A..B`` (inclusive) or ``A..B:S`` (step), 0-based
  (``"0,5,7..9"``);
- integer range list: items ``I``, ``A..B``, ``A..B:S`` (step S) or ``A..B:xF`` (geometric);
- float list: comma-separated finite numbers; reward pair: two of them, ``R_c,R_w``;
- group spec: items ``ACTION`` or ``ACTIONxCOUNT`` (``"0x3,17"``).

Every function raises :class:`ValueError` with one line naming the option and the bad value. Work
is bounded before it is done: lists are counted before they are expanded and a ``.npy`` header is
read (``numpy.lib.format``) before its data are allocated. No import of the CLI (or typer) here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from ._validate import MAX_EXACT_INT, fail

T = TypeVar("T")

__all__ = [
    "MAX_ACTIONS",
    "MAX_LIST_LENGTH",
    "parse_logits",
    "logit_items",
    "is_logit_file",
    "parse_index_set",
    "index_ranges",
    "parse_int_list",
    "parse_float_list",
    "check_float_text",
    "parse_group",
    "parse_pair",
]

#: Largest number of actions a logit spec or file may hold (an 8-byte logit each: 400 MB).
MAX_ACTIONS = 50_000_000
#: Largest number of values an integer or float list may expand to.
MAX_LIST_LENGTH = 1_000_000
#: File suffixes that make a logit spec a path.
_FILE_SUFFIXES = (".npy", ".csv", ".txt")

_INT = r"[+-]?\d{1,30}"  # bounded: Python refuses to convert over 4,300 digits
_INT_RE = re.compile(_INT)
_RANGE = re.compile(rf"^({_INT})\.\.({_INT})(?::(x)?([^:]+))?$")
_PLAIN_RANGE = re.compile(rf"^({_INT})\.\.({_INT})$")


def _items(
    spec: object, name: str, what: str, empty: str = "a non-empty comma-separated list"
) -> list[str]:
    """Split a comma-separated spec into stripped, non-empty items (or fail naming ``name``)."""
    if not isinstance(spec, str):
        fail(name, spec, f"a string: {what}")
    if not spec.strip():
        fail(name, spec, empty)
    items = [t.strip() for t in spec.split(",")]
    if any(not t for t in items):
        fail(name, spec, f"a comma-separated list of non-empty items: {what}")
    return items


def _counted(
    items: list[str],
    parse: Callable[[str], tuple[T, int]],
    limit: int,
    name: str,
    too_many: str,
) -> tuple[list[T], list[int]]:
    """The ``(thing, count)`` of each ``THINGxCOUNT`` item (``parse`` checks one item), refusing
    the first item that takes the running total of counts over ``limit``."""
    things: list[T] = []
    counts: list[int] = []
    total = 0
    for item in items:
        thing, count = parse(item)
        total += count
        if total > limit:
            fail(name, item, too_many)
        things.append(thing)
        counts.append(count)
    return things, counts


def _int(token: str, name: str, item: str, what: str) -> int:
    if not _INT_RE.fullmatch(token.strip()):
        fail(name, item, what)
    return int(token)


def _float(token: str, name: str, item: str, what: str, infinite: str = "a finite number") -> float:
    """``float(token)``, or fail naming ``item``: ``what`` if it is no number, ``infinite`` if it
    is not finite, :func:`check_float_text`'s refusal if it underflows."""
    try:
        value = float(token)
    except ValueError:
        fail(name, item, what)
    if not math.isfinite(value):
        fail(name, item, infinite)
    return check_float_text(token, value, name, item)


def _nonzero_mantissa(token: str) -> bool:
    """Whether the digits of ``token`` before its exponent are not all zero."""
    mantissa = re.split(r"[eE]", token.strip(), maxsplit=1)[0]
    try:
        return float(mantissa) != 0.0
    except ValueError:
        return False


_HOLDS = "a number float64 can hold"


def check_float_text(token: str, value: float, name: str, item: str | None = None) -> float:
    """``value`` (``float(token)``), refused naming ``name`` and showing the text (``item``,
    default ``token``), not the number, where float64 cannot hold what was typed: a nonzero
    number below about 5e-324 reads as 0.0 and one beyond about 1.8e308 as inf (typed ``inf``
    and ``nan`` are left to the caller's own check). The one rule for every float option."""
    shown = token if item is None else item
    if math.isinf(value) and "inf" not in token.lower():
        fail(name, shown, f"{_HOLDS} (of magnitude below about 1.8e308: it reads as inf)")
    if value == 0.0 and _nonzero_mantissa(token):
        fail(name, shown, f"{_HOLDS} (of magnitude above about 5e-324: it reads as 0)")
    return value


# --- logits ---------------------------------------------------------------------------------------

_LOGIT_GRAMMAR = "VALUE or VALUExCOUNT items (e.g. 5.0x1,3.0x9999) or a .npy/.csv file"


def parse_logits(
    spec: str, *, name: str = "--logits", max_actions: int = MAX_ACTIONS
) -> np.ndarray:
    """Expand a logit spec (or load a logit file) into a 1-D float64 array.

    Parameters
    ----------
    spec : str
        Comma-separated items ``VALUE`` (one action) or ``VALUExCOUNT`` (COUNT >= 1 actions with
        that logit), in order; or a path ending in ``.npy``, ``.csv`` or ``.txt`` to a file of a
        1-D array (a CSV holds one number per line, or one line of comma-separated numbers).
    name : str
        Option name for error messages.
    max_actions : int
        Largest number of actions accepted; checked before anything is allocated (for a ``.npy``
        file, from its header).

    Raises
    ------
    ValueError
        Malformed items, non-finite logits, more than ``max_actions`` actions, a missing or
        unreadable file, a 2-D, complex or non-numeric array.

    Examples
    --------
    >>> parse_logits("5.0x1,3.0x2,0.5").tolist()
    [5.0, 3.0, 3.0, 0.5]
    >>> parse_logits("0").tolist()
    [0.0]
    """
    if is_logit_file(spec):
        return _load_logits(Path(spec.strip()), name, max_actions)
    values, counts = logit_items(spec, name=name, max_actions=max_actions)
    return np.repeat(np.asarray(values, dtype=np.float64), counts)


def is_logit_file(spec: object) -> bool:
    """Whether a logit spec names a file (it ends in ``.npy``, ``.csv`` or ``.txt``)."""
    return isinstance(spec, str) and spec.strip().lower().endswith(_FILE_SUFFIXES)


def logit_items(
    spec: str, *, name: str = "--logits", max_actions: int = MAX_ACTIONS
) -> tuple[list[float], list[int]]:
    """Values and counts of a literal logit spec, validated without expanding it.

    The grammar of :func:`parse_logits` without files: ``"5.0x1,3.0x9999"`` gives
    ``([5.0, 3.0], [1, 9999])``. Lets a caller check the number of actions of a spec of 10**8
    actions without allocating them.
    """
    if not isinstance(spec, str):
        fail(name, spec, "a string: " + _LOGIT_GRAMMAR)
    if is_logit_file(spec):
        fail(name, spec, "a literal spec here (VALUE or VALUExCOUNT items), not a file")

    def value_and_count(item: str) -> tuple[float, int]:
        head, sep, tail = item.lower().rpartition("x")
        value_text, count_text = (head, tail) if sep else (tail, "1")
        what = "VALUE or VALUExCOUNT with a number VALUE"
        value = _float(value_text, name, item, what, "an item with a finite logit")
        count = _int(count_text, name, item, "VALUExCOUNT with an integer COUNT >= 1")
        if count < 1:
            fail(name, item, "VALUExCOUNT with an integer COUNT >= 1")
        return value, count

    items = _items(spec, name, _LOGIT_GRAMMAR, "non-empty: " + _LOGIT_GRAMMAR)
    too_many = f"a spec of at most {max_actions} actions in total"
    return _counted(items, value_and_count, max_actions, name, too_many)


def _check_logit_array(arr: np.ndarray, name: str, path: Path) -> np.ndarray:
    if arr.dtype.kind == "c":
        fail(name, str(path), f"a file of real logits (it holds complex values, dtype {arr.dtype})")
    if arr.dtype.kind not in "biuf":
        fail(name, str(path), f"a file of numbers (dtype {arr.dtype})")
    if arr.ndim != 1:
        fail(name, str(path), f"a file of a 1-D array (shape {arr.shape})")
    if arr.size == 0:
        fail(name, str(path), "a file with at least one logit")
    out = np.asarray(arr, dtype=np.float64)
    bad = ~np.isfinite(out)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        fail(name, out[i], f"a finite number (entry {i} of '{path}')")
    return out


def _load_logits(path: Path, name: str, max_actions: int) -> np.ndarray:
    if not path.is_file():
        fail(name, str(path), "an existing file")
    if path.suffix.lower() == ".npy":
        return _load_npy(path, name, max_actions)
    size = path.stat().st_size
    if size > 64 * max_actions:
        fail(name, str(path), f"a text file of at most {64 * max_actions} bytes ({size})")
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as e:
        fail(name, str(path), f"a readable UTF-8 text file ({type(e).__name__})")
    rows = [line for line in (ln.strip() for ln in text.splitlines()) if line]
    if not rows:
        fail(name, str(path), "a file with at least one value")
    widths = {len(r.split(",")) for r in rows}
    if len(rows) > 1 and widths != {1}:
        fail(name, str(path), "a 1-D list: one number per line, or one line of numbers")
    tokens = [t.strip() for r in rows for t in r.split(",")]
    if len(tokens) > max_actions:
        fail(name, str(path), f"a file of at most {max_actions} logits ({len(tokens)})")
    values = np.empty(len(tokens))
    for i, tok in enumerate(tokens):
        try:
            values[i] = float(tok)
        except ValueError:
            fail(name, tok, f"a number (value {i + 1} of '{path}')")
    return _check_logit_array(values, name, path)


def _load_npy(path: Path, name: str, max_actions: int) -> np.ndarray:
    from numpy.lib import format as npy

    try:
        with path.open("rb") as fh:
            version = npy.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = npy.read_array_header_1_0(fh)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = npy.read_array_header_2_0(fh)
            else:
                raise ValueError(f"unknown .npy version {version}")
    except (ValueError, OSError, SyntaxError) as e:
        fail(name, str(path), f"a readable .npy file ({' '.join(str(e).split())})")
    if dtype.kind == "c":
        fail(name, str(path), f"a file of real logits (it holds complex values, dtype {dtype})")
    if dtype.kind not in "biuf" or dtype.hasobject:
        fail(name, str(path), f"a .npy file of numbers (dtype {dtype})")
    if len(shape) != 1:
        fail(name, str(path), f"a .npy file of a 1-D array (shape {shape})")
    if shape[0] > max_actions:
        fail(name, str(path), f"a .npy file of at most {max_actions} logits (header: {shape[0]})")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        fail(name, str(path), f"a readable .npy file ({' '.join(str(e).split())})")
    return _check_logit_array(arr, name, path)


# --- index sets -----------------------------------------------------------------------------------

_INDEX_GRAMMAR = (
    "0-based indices I, inclusive ranges A..B or A..B:S (step S), comma-separated (e.g. 0,5,7..9)"
)


def index_ranges(spec: str, size: int | None = None, *, name: str) -> list[tuple[int, int, int]]:
    """The ``(start, stop, step)`` items of an index set, validated without expanding them.

    Items are ``I``, ``A..B`` (inclusive) or ``A..B:S`` (every S-th index from A). ``stop`` is
    inclusive. Bounds as in :func:`parse_index_set`.
    """
    bound = MAX_ACTIONS if size is None else int(size)
    out: list[tuple[int, int, int]] = []
    total = 0
    for item in _items(spec, name, _INDEX_GRAMMAR):
        m = _RANGE.match(item)
        step = 1
        if m is None:
            if ".." in item:
                fail(name, item, "a range A..B or A..B:S with integers 0 <= A <= B")
            a = b = _int(item, name, item, "an integer index or a range A..B")
        else:
            a, b = int(m.group(1)), int(m.group(2))
            if m.group(3) or m.group(4) is not None:
                if m.group(3) or not _INT_RE.fullmatch(m.group(4)) or int(m.group(4)) < 1:
                    fail(name, item, "a range A..B:S with an integer step S >= 1")
                step = int(m.group(4))
            if b < a:
                fail(name, item, "a range A..B with A <= B")
        if a < 0:
            fail(name, item, "indices >= 0")
        if b > MAX_EXACT_INT:
            fail(name, item, f"indices <= 2**53 = {MAX_EXACT_INT}")
        if size is not None and b >= size:
            fail(name, item, f"indices in [0, {size - 1}] (size {size})")
        total += (b - a) // step + 1
        if total > bound:
            fail(name, item, f"a set of at most {bound} indices")
        out.append((a, b, step))
    return out


def parse_index_set(spec: str, size: int | None = None, *, name: str) -> np.ndarray:
    """Parse an index set such as ``"0..9999"``, ``"0,5,7..9"`` or ``"1..99:2"`` into int64.

    The result is sorted and unique. Each index must be >= 0 and, when ``size`` is given,
    < ``size``. At most ``size`` (or :data:`MAX_ACTIONS`) indices are expanded; larger sets are
    refused before expanding.

    Examples
    --------
    >>> parse_index_set("7..9,0,5,5", 10, name="--correct").tolist()
    [0, 5, 7, 8, 9]
    >>> parse_index_set("1..9:4", 10, name="--correct").tolist()
    [1, 5, 9]
    """
    pieces = [
        np.arange(a, b + 1, st, dtype=np.int64) for a, b, st in index_ranges(spec, size, name=name)
    ]
    return np.unique(np.concatenate(pieces))


# --- integer and float lists ----------------------------------------------------------------------

_INT_LIST_GRAMMAR = "integers I, ranges A..B, A..B:S or A..B:xF, comma-separated"


def parse_int_list(
    spec: str,
    *,
    name: str,
    lo: int | None = None,
    hi: int | None = None,
    max_length: int = MAX_LIST_LENGTH,
) -> list[int]:
    """Parse ``"4,8,16"``, ``"4..64"``, ``"4..64:4"`` or ``"1..131072:x2"`` into sorted unique ints.

    Items are an integer, an inclusive range ``A..B``, a range with step ``A..B:S`` or a geometric
    range ``A..B:xF`` (``A, A*F, A*F^2, ... <= B``, rounded to integers). Every value must lie in
    ``[lo, hi]`` (``hi`` defaults to ``2**53``, the largest integer exact in float64). A list that
    would expand to more than ``max_length`` values is refused before it is expanded.

    Examples
    --------
    >>> parse_int_list("1..16:x2,3", name="--N", lo=1)
    [1, 2, 3, 4, 8, 16]
    """
    if hi is None:
        hi = MAX_EXACT_INT
    values: set[int] = set()
    total = 0
    for item in _items(spec, name, _INT_LIST_GRAMMAR):
        m = _RANGE.match(item)
        if m is None:
            if ".." in item:
                fail(name, item, "a range A..B, A..B:S or A..B:xF with integers A <= B")
            a = b = _int(item, name, item, "an integer, A..B, A..B:S or A..B:xF")
            kind = "one"
        else:
            a, b = int(m.group(1)), int(m.group(2))
            kind = "xf" if m.group(3) else ("step" if m.group(4) is not None else "range")
        if b < a:
            fail(name, item, "a range A..B with A <= B")
        if lo is not None and a < lo:
            fail(name, a, f">= {lo}")
        if b > hi:
            fail(name, b, f"<= {hi}")
        if kind == "xf":
            try:
                factor = float(m.group(4))
            except ValueError:
                fail(name, item, "a geometric range A..B:xF with a number F > 1")
            if not (math.isfinite(factor) and factor > 1):
                fail(name, item, "a geometric range A..B:xF with F > 1")
            if a < 1:
                fail(name, item, "a geometric range A..B:xF with A >= 1")
            count = int(math.floor(math.log(b / a) / math.log(factor) + 1e-9)) + 1
        elif kind == "step":
            step = _int(m.group(4), name, item, "a range A..B:S with an integer step S >= 1")
            if step < 1:
                fail(name, item, "a range A..B:S with step S >= 1")
            count = (b - a) // step + 1
        else:
            step = 1
            count = b - a + 1
        total += count
        if total > max_length:
            fail(name, item, f"a list of at most {max_length} values")
        if kind == "xf":
            seq = {int(round(a * factor**j)) for j in range(count)}
            values.update(s for s in seq if s <= b)
        else:
            values.update(range(a, b + 1, step))
    return sorted(values)


def parse_float_list(spec: str, *, name: str, max_length: int = MAX_LIST_LENGTH) -> list[float]:
    """Parse a comma-separated list of finite numbers (``"0.2,0.5,0.8"``), order kept.

    Examples
    --------
    >>> parse_float_list("0.2, 0.5,1e-3", name="--mu")
    [0.2, 0.5, 0.001]
    """
    items = _items(spec, name, "finite numbers, e.g. 0.2,0.5,0.8")
    if len(items) > max_length:
        fail(name, f"{len(items)} values", f"a list of at most {max_length} values")
    return [_float(item, name, item, "a number") for item in items]


def parse_pair(spec: str, *, name: str) -> tuple[float, float]:
    """Parse two comma-separated finite numbers, e.g. ``--rewards 1,-1`` -> ``(1.0, -1.0)``.

    Examples
    --------
    >>> parse_pair("1,-1", name="--rewards")
    (1.0, -1.0)
    """
    values = parse_float_list(spec, name=name, max_length=2)
    if len(values) != 2:
        fail(name, spec, "two comma-separated numbers, e.g. 1,-1")
    return values[0], values[1]


# --- groups ---------------------------------------------------------------------------------------

_GROUP_GRAMMAR = "ACTION or ACTIONxCOUNT items with 0-based ACTION, e.g. 0x3,17"


def parse_group(
    spec: str, n_actions: int, *, name: str, max_size: int = MAX_ACTIONS
) -> tuple[np.ndarray, np.ndarray]:
    """Parse a group spec ``"0x3,17"`` into ``(actions, counts)`` int64 arrays, items in order.

    ``ACTION`` is a 0-based action index in ``[0, n_actions - 1]``; ``COUNT >= 1`` rollouts drew
    it. The total count (the group size) is at most ``max_size``. Repeated actions are kept as
    given (the caller's group constructor decides whether to merge them).

    Examples
    --------
    >>> a, c = parse_group("0x3,17", 20, name="--group")
    >>> a.tolist(), c.tolist()
    ([0, 17], [3, 1])
    """
    what = "ACTION or ACTIONxCOUNT with integers ACTION >= 0, COUNT >= 1"

    def action_and_count(item: str) -> tuple[int, int]:
        head, sep, tail = item.lower().partition("x")
        action = _int(head, name, item, what)
        count = _int(tail, name, item, what) if sep else 1
        if action < 0 or action >= n_actions:
            fail(name, item, f"an item whose action is in [0, {n_actions - 1}]")
        if count < 1:
            fail(name, item, "ACTIONxCOUNT with COUNT >= 1")
        return action, count

    items = _items(spec, name, _GROUP_GRAMMAR)
    too_many = f"a group of at most {max_size} rollouts"
    actions, counts = _counted(items, action_and_count, max_size, name, too_many)
    return np.asarray(actions, dtype=np.int64), np.asarray(counts, dtype=np.int64)
