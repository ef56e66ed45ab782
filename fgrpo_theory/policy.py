"""Softmax policies over a finite set of actions: logits, the correct set, probabilities.

A categorical policy (theory.md sections 5 and 8) is a vector of logits ``z`` over K actions and
a boolean mask of the correct actions C; its probabilities are ``p = softmax(z)`` (temperature 1)
and its success probability is ``mu = pi(C) = sum_C p`` (P-2).

Policies are given compactly as *logit specs*: comma-separated items ``LOGIT`` (one action) or
``LOGITxCOUNT`` (``COUNT`` actions with that logit), e.g. ``"5.0x1,3.0x9999"``. The paper's
simulation start (appendix J, theory.md section 8) is :func:`paper_policy`: 128,000 actions, one
"anchor" correct action at logit 5.0, 9,999 other correct actions at 3.0 and 118,000 incorrect
actions at 0.0, correct actions first, so ``mu`` is about 0.63.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import log_softmax, softmax

from ._validate import check_array, check_int_array, fail

__all__ = [
    "PAPER_CORRECT_SPEC",
    "PAPER_INCORRECT_SPEC",
    "MAX_ACTIONS",
    "logits_from_spec",
    "policy_from_specs",
    "paper_policy",
    "check_policy",
    "probabilities",
    "log_probabilities",
    "success_probability",
    "load_logits",
    "load_correct_mask",
    "load_policy",
]

#: Logit spec of the correct actions of the paper's simulation (anchor first).
PAPER_CORRECT_SPEC = "5.0x1,3.0x9999"
#: Logit spec of the incorrect actions of the paper's simulation.
PAPER_INCORRECT_SPEC = "0.0x118000"
#: Largest number of actions a spec may expand to (an 8-byte logit each: 400 MB).
MAX_ACTIONS = 50_000_000

_SPEC_GRAMMAR = "a comma-separated list of LOGIT or LOGITxCOUNT items with COUNT >= 1"


def logits_from_spec(spec: str, *, name: str = "spec", allow_empty: bool = False) -> np.ndarray:
    """Expand a logit spec such as ``"5.0x1,3.0x9999"`` into a 1-d array of logits.

    Parameters
    ----------
    spec : str
        Comma-separated items, each ``LOGIT`` (one action) or ``LOGITxCOUNT`` (``COUNT`` actions
        with logit ``LOGIT``); whitespace around items is ignored, ``X`` works as well as ``x``.
        Plain lists like ``"1.0,2.0,0.5"`` are specs too.
    name : str
        Parameter name for error messages (e.g. ``"--correct"`` in the CLI).
    allow_empty : bool
        Whether an empty (or all-blank) spec is accepted; it gives an empty array.

    Returns
    -------
    numpy.ndarray
        Float64 logits, items expanded in order.

    Raises
    ------
    ValueError
        Malformed items, non-finite logits, counts that are not integers >= 1, or more than
        :data:`MAX_ACTIONS` actions in total.

    Examples
    --------
    >>> logits_from_spec("5.0x1,3.0x2,0.5")
    array([5. , 3. , 3. , 0.5])
    """
    if not isinstance(spec, str):
        fail(name, spec, "a string such as '5.0x1,3.0x9999'")
    if not spec.strip():
        if allow_empty:
            return np.zeros(0)
        fail(name, spec, "non-empty: " + _SPEC_GRAMMAR)
    values: list[float] = []
    counts: list[int] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            fail(name, spec, _SPEC_GRAMMAR + " (an item is empty)")
        head, sep, tail = item.lower().rpartition("x")
        value_text, count_text = (head, tail) if sep else (tail, "1")
        try:
            value = float(value_text)
        except ValueError:
            fail(name, item, "LOGIT or LOGITxCOUNT with a number LOGIT")
        if not math.isfinite(value):
            fail(name, item, "an item with a finite logit")
        try:
            count = int(count_text.strip())
        except ValueError:
            fail(name, item, "LOGITxCOUNT with an integer COUNT >= 1")
        if count < 1:
            fail(name, item, "LOGITxCOUNT with an integer COUNT >= 1")
        values.append(value)
        counts.append(count)
        if sum(counts) > MAX_ACTIONS:
            fail(name, item, f"a spec of at most {MAX_ACTIONS} actions in total")
    return np.repeat(np.asarray(values, dtype=float), counts)


def policy_from_specs(
    correct: str, incorrect: str = "", *, names: tuple[str, str] = ("correct", "incorrect")
) -> tuple[np.ndarray, np.ndarray]:
    """Build ``(logits, correct_mask)`` from a spec of the correct and of the incorrect actions.

    Parameters
    ----------
    correct : str
        Logit spec of the correct actions (at least one action).
    incorrect : str
        Logit spec of the incorrect actions; may be empty (then every action is correct).
    names : (str, str)
        Parameter names for error messages.

    Returns
    -------
    logits : numpy.ndarray
        Correct actions first, then incorrect ones.
    correct_mask : numpy.ndarray of bool

    Examples
    --------
    >>> z, c = policy_from_specs("2.0x1,1.0x2", "0.0x3")
    >>> z.tolist(), c.tolist()
    ([2.0, 1.0, 1.0, 0.0, 0.0, 0.0], [True, True, True, False, False, False])
    """
    zc = logits_from_spec(correct, name=names[0])
    zw = logits_from_spec(incorrect, name=names[1], allow_empty=True)
    if zc.size + zw.size > MAX_ACTIONS:
        fail(names[1], incorrect, f"a spec leaving at most {MAX_ACTIONS} actions in total")
    mask = np.zeros(zc.size + zw.size, dtype=bool)
    mask[: zc.size] = True
    return np.concatenate([zc, zw]), mask


def paper_policy() -> tuple[np.ndarray, np.ndarray]:
    """The paper's simulation start (appendix J): 128,000 actions, correct actions first.

    One anchor correct action at logit 5.0, 9,999 other correct actions at 3.0 and 118,000
    incorrect actions at 0.0, so ``mu = (e^5 + 9999 e^3) / (e^5 + 9999 e^3 + 118000)`` ~ 0.630.

    Returns
    -------
    logits : numpy.ndarray, shape (128000,)
    correct_mask : numpy.ndarray of bool, shape (128000,)
        True for the first 10,000 actions.
    """
    return policy_from_specs(PAPER_CORRECT_SPEC, PAPER_INCORRECT_SPEC)


def check_policy(
    logits: Any, correct: Any, *, names: tuple[str, str] = ("logits", "correct")
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a policy and return ``(logits, correct)`` as float64 and bool 1-d arrays.

    Parameters
    ----------
    logits : array_like, shape (K,)
        Finite logits, K >= 1.
    correct : array_like of bool (or of 0/1), shape (K,)
        Mask of the correct actions; at least one must be correct.
    names : (str, str)
        Parameter names for error messages.

    Raises
    ------
    ValueError
        NaN or infinite logits, a mask of another shape or with values other than 0/1/True/False,
        or an empty correct set.
    """
    z = check_array(names[0], logits)
    if z.ndim != 1:
        fail(names[0], f"an array of shape {z.shape}", "a 1-d array of logits")
    mask = np.asarray(correct)
    if mask.dtype != bool:
        vals = check_array(names[1], mask, allow_empty=True)
        bad = (vals != 0) & (vals != 1)
        if bad.any():
            fail(names[1], vals[bad].flat[0], "a mask of booleans or 0/1 values")
        mask = vals.astype(bool)
    if mask.shape != z.shape:
        fail(names[1], f"a mask of shape {mask.shape}", f"of the logits' shape {z.shape}")
    if not mask.any():
        fail(names[1], 0, "a mask with at least one correct action (number of correct actions)")
    return z, mask


def probabilities(logits: Any) -> np.ndarray:
    """Softmax probabilities ``p = softmax(z)`` at temperature 1 (stable: scipy.special.softmax).

    Parameters
    ----------
    logits : array_like, shape (..., K)
        Finite logits; the softmax runs over the last axis.

    Returns
    -------
    numpy.ndarray, shape (..., K)
    """
    return softmax(check_array("logits", logits), axis=-1)


def log_probabilities(logits: Any) -> np.ndarray:
    """Log-probabilities ``log softmax(z)`` over the last axis (scipy.special.log_softmax)."""
    return log_softmax(check_array("logits", logits), axis=-1)


def success_probability(logits: Any, correct: Any) -> float:
    """Success probability ``mu = pi(C) = sum_C p`` of a policy (P-2).

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)

    Returns
    -------
    float
    """
    z, mask = check_policy(logits, correct)
    return float(softmax(z)[mask].sum())


def load_logits(path: str | Path, *, name: str = "--logits") -> np.ndarray:
    """Load a 1-d array of logits from a ``.npy`` file or a ``.csv``/text file of numbers.

    A CSV may hold one number per line or comma-separated numbers on any number of lines; all
    values are read in order and flattened.

    Raises
    ------
    ValueError
        An unknown extension, an unreadable file or non-finite values.
    FileNotFoundError
        The file does not exist.
    """
    arr = _load_array(path, name)
    return check_array(name, arr).ravel()


def load_correct_mask(path: str | Path, size: int, *, name: str = "--correct-mask") -> np.ndarray:
    """Load a correct mask (booleans or 0/1 values) from ``.npy`` or ``.csv``; length ``size``."""
    arr = _load_array(path, name).ravel()
    if arr.dtype != bool:
        vals = check_array(name, arr)
        bad = (vals != 0) & (vals != 1)
        if bad.any():
            fail(name, vals[bad].flat[0], "a mask of booleans or 0/1 values")
        arr = vals.astype(bool)
    if arr.size != size:
        fail(name, f"{arr.size} values", f"one value per action ({size})")
    return arr


def load_policy(
    logits_path: str | Path,
    correct_mask_path: str | Path | None = None,
    n_correct: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Load ``(logits, correct_mask)`` from files.

    Parameters
    ----------
    logits_path : path
        ``.npy`` or ``.csv`` file of logits.
    correct_mask_path : path, optional
        ``.npy`` or ``.csv`` file with one boolean (or 0/1) per action.
    n_correct : int, optional
        Instead of a mask file: the first ``n_correct`` actions are correct. Exactly one of
        ``correct_mask_path`` and ``n_correct`` must be given.

    Returns
    -------
    logits, correct_mask : numpy.ndarray
    """
    z = load_logits(logits_path)
    if (correct_mask_path is None) == (n_correct is None):
        fail(
            "--correct-mask",
            "both or neither",
            "given alone, or replaced by --n-correct (exactly one of the two)",
        )
    if correct_mask_path is not None:
        mask = load_correct_mask(correct_mask_path, z.size)
    else:
        k = int(check_int_array("--n-correct", n_correct, lo=1, hi=z.size))
        mask = np.zeros(z.size, dtype=bool)
        mask[:k] = True
    return check_policy(z, mask, names=("--logits", "--correct-mask"))


def _load_array(path: str | Path, name: str) -> np.ndarray:
    path = Path(path)
    if not path.is_file():
        fail(name, str(path), "an existing file")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        try:
            return np.load(path, allow_pickle=False)
        except (ValueError, OSError) as e:
            fail(name, str(path), f"a readable .npy file ({' '.join(str(e).split())})")
    if suffix in (".csv", ".txt"):
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            fail(name, str(path), "a readable UTF-8 text file")
        tokens = [t for t in text.replace(",", " ").split()]
        if not tokens:
            fail(name, str(path), "a file with at least one value")
        lowered = [t.lower() for t in tokens]
        if all(t in ("true", "false") for t in lowered):
            return np.asarray([t == "true" for t in lowered])
        try:
            return np.asarray([float(t) for t in tokens])
        except ValueError:
            bad = next(t for t in tokens if not _is_float(t))
            fail(name, bad, f"a number (in {path})")
    fail(name, str(path), "a .npy or .csv file")


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
