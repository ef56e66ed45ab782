"""Softmax policies over a finite set of actions: logits, the correct set, probabilities.

A categorical policy (theory.md sections 5 and 8) is a vector of logits ``z`` over K actions and
a boolean mask of the correct actions C; its probabilities are ``p = softmax(z)`` (temperature 1)
and its success probability is ``mu = pi(C) = sum_C p`` (P-2).

Policies are given compactly as *logit specs* (grammar owned by :mod:`fgrpo_theory._spec`):
comma-separated items ``VALUE`` (one action) or ``VALUExCOUNT``, e.g. ``"5.0x1,3.0x9999"``, or a
``.npy`` / ``.csv`` file of a 1-D array. The paper's
simulation start (appendix J, theory.md section 8) is :func:`paper_policy`: 128,000 actions, one
"anchor" correct action at logit 5.0, 9,999 other correct actions at 3.0 and 118,000 incorrect
actions at 0.0, correct actions first, so ``mu`` is about 0.63.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._spec import MAX_ACTIONS, parse_logits
from ._validate import check_array, check_int_array, fail

__all__ = [
    "PAPER_CORRECT_SPEC",
    "PAPER_INCORRECT_SPEC",
    "MAX_ACTIONS",
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


def _logits(spec: str, name: str, allow_empty: bool = False) -> np.ndarray:
    """A logit spec (grammar of :func:`fgrpo_theory._spec.parse_logits`); ``""`` may mean none."""
    if allow_empty and isinstance(spec, str) and not spec.strip():
        return np.zeros(0)
    return parse_logits(spec, name=name, max_actions=MAX_ACTIONS)


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
    zc = _logits(correct, names[0])
    zw = _logits(incorrect, names[1], allow_empty=True)
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


def _softmax(z: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, shifted by the maximum (the operations of
    ``scipy.special.softmax(z, axis=-1)``), with the C library's ``exp`` on every CPU
    (:mod:`fgrpo_theory._libm`: NumPy's AVX-512 ``exp`` rounds a few values differently, and
    the simulator's initial probabilities feed its thresholds)."""
    from ._libm import exp

    e = exp(z - np.max(z, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def probabilities(logits: Any) -> np.ndarray:
    """Softmax probabilities ``p = softmax(z)`` at temperature 1 (stable: shifted by the maximum,
    as scipy.special.softmax).

    Parameters
    ----------
    logits : array_like, shape (..., K)
        Finite logits; the softmax runs over the last axis.

    Returns
    -------
    numpy.ndarray, shape (..., K)
    """
    return _softmax(check_array("logits", logits))


def log_probabilities(logits: Any) -> np.ndarray:
    """Log-probabilities ``log softmax(z)`` over the last axis: the operations of
    ``scipy.special.log_softmax`` (shift by the maximum, ``tmp - log(sum(exp(tmp)))``), with the
    C library's ``exp`` and ``log`` on every CPU (:mod:`fgrpo_theory._libm`; this is the KL
    reference of both simulators)."""
    from ._libm import exp, log

    z = check_array("logits", logits)
    tmp = z - np.max(z, axis=-1, keepdims=True)  # finite (check_array refuses inf and NaN)
    return tmp - log(np.sum(exp(tmp), axis=-1, keepdims=True))


def success_probability(logits: Any, correct: Any) -> float:
    """Success probability ``mu = pi(C) = sum_C p`` of a policy (P-2, docs/theory.md section 1).

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)

    Returns
    -------
    float
    """
    z, mask = check_policy(logits, correct)
    return float(_softmax(z)[mask].sum())


def load_logits(path: str | Path, *, name: str = "--logits") -> np.ndarray:
    """Load a 1-d array of logits from a ``.npy`` file or a ``.csv``/text file of numbers.

    The file rules are those of :func:`fgrpo_theory._spec.parse_logits`: a 1-D real array (2-D
    and complex arrays are refused, and a ``.npy`` header claiming more than :data:`MAX_ACTIONS`
    entries is refused before anything is allocated).

    Raises
    ------
    ValueError
        An unknown extension, a missing or unreadable file, a 2-D or complex array, or
        non-finite values.
    """
    text = str(path)
    if not text.strip().lower().endswith((".npy", ".csv", ".txt")):
        fail(name, text, "a .npy or .csv file")
    return parse_logits(text, name=name, max_actions=MAX_ACTIONS)


def load_correct_mask(path: str | Path, size: int, *, name: str = "path") -> np.ndarray:
    """Load a correct mask (booleans or 0/1 values) from ``.npy`` or ``.csv``; length ``size``.

    A file only: an index set of correct actions (``"0..9999"``) is what ``correct`` takes
    everywhere else (:func:`fgrpo_theory.sim.SimConfig`, ``--correct``). ``name`` is the
    argument that errors name.
    """
    arr = _load_array(path, name)
    if arr.ndim != 1:
        fail(name, str(path), f"a file of a 1-D mask (shape {arr.shape})")
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
    z = load_logits(logits_path, name="logits_path")
    if (correct_mask_path is None) == (n_correct is None):
        fail(
            "correct_mask_path",
            "both or neither",
            "given alone, or replaced by n_correct (exactly one of the two)",
        )
    if correct_mask_path is not None:
        mask = load_correct_mask(correct_mask_path, z.size, name="correct_mask_path")
    else:
        k = int(check_int_array("n_correct", n_correct, lo=1, hi=z.size))
        mask = np.zeros(z.size, dtype=bool)
        mask[:k] = True
    return check_policy(z, mask, names=("logits_path", "correct_mask_path"))


def _load_array(path: str | Path, name: str) -> np.ndarray:
    path = Path(path)
    if not path.is_file():
        fail(name, str(path), "an existing file")
    suffix = path.suffix.lower()
    if suffix == ".npy":  # header read first: 1-D, real, at most MAX_ACTIONS entries
        from ._spec import _load_npy

        return _load_npy(path, name, MAX_ACTIONS)
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
