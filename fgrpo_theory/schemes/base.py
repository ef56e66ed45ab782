"""What a training scheme is: its definition (one registry entry), its spec grammar, and the
composed :class:`Scheme` that every consumer (closed forms, both simulators, the sequence model,
the trainer integrations) reads.

A *scheme spec* is one string, the same in the library, on the CLI (``--scheme``) and in config
files::

    TERM[+TERM...]        TERM = NAME[:KEY=VALUE[,KEY=VALUE...]]

with at most one *advantage* term (a convention preset such as ``grpo`` or ``trl``, or a scheme
such as ``maxrl`` or ``unlikeliness:penalty=0.25``; ``grpo`` when omitted), at most one ``focal``
modifier (P-12, P-13: the advantages times (1 - X/N)^gamma, on top of any advantage term) and at
most one of each regularizer (``entropy``, ``kl``). Examples: ``maxrl``, ``focal:gamma=1`` (=
``grpo+focal:gamma=1``), ``trl+focal:gamma=0.5``, ``grpo+entropy:coef=0.001``.
:func:`parse_scheme` validates a spec and returns a :class:`Scheme` whose :attr:`Scheme.spec` is
the canonical text (parameters that equal their defaults are left out, numbers written by
``repr``), so two spellings of one scheme compare, hash and label alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from .._validate import fail

__all__ = ["Param", "SchemeDef", "Term", "Scheme", "parse_scheme", "MAX_SPEC_CHARS"]

Role = Literal["advantage", "modifier", "regularizer"]
#: Longest scheme spec accepted (a spec is a short label, never data).
MAX_SPEC_CHARS = 400


@dataclass(frozen=True)
class Param:
    """One parameter of a scheme: its default (from the scheme's paper) and its valid range.

    ``kind`` is ``"float"``, ``"int"`` or ``"choice"``; numbers must lie in ``[lo, hi]`` (ends
    open where ``lo_open`` / ``hi_open``), choices in ``choices``.
    """

    name: str
    default: float | int | str
    doc: str
    kind: Literal["float", "int", "choice"] = "float"
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple[str, ...] = ()

    def requirement(self) -> str:
        """The valid values in words, for error messages and ``scheme list``."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        what = "an integer" if self.kind == "int" else "a number"
        lo, hi = self.lo, self.hi
        if lo is None and hi is None:
            return what
        if hi is None:
            return f"{what} {'>' if self.lo_open else '>='} {_fmt(lo)}"
        if lo is None:
            return f"{what} {'<' if self.hi_open else '<='} {_fmt(hi)}"
        left = "(" if self.lo_open else "["
        right = ")" if self.hi_open else "]"
        return f"{what} in {left}{_fmt(lo)}, {_fmt(hi)}{right}"

    def coerce(self, text: Any, where: str) -> float | int | str:
        """``text`` (a string from a spec, or a number) as a valid value; a ValueError naming
        ``where`` (e.g. ``"scheme maxrl"``) otherwise."""
        label = f"{where}:{self.name}"
        if self.kind == "choice":
            value = str(text).strip().lower()
            if value not in self.choices:
                fail(label, text, self.requirement())
            return value
        try:
            if isinstance(text, bool):
                raise ValueError
            if self.kind == "int":
                value = int(str(text).strip()) if isinstance(text, str) else int(text)
                if not isinstance(text, str) and value != text:
                    raise ValueError
            else:
                value = float(text)
        except (TypeError, ValueError, OverflowError):
            fail(label, text, self.requirement())
        if not math.isfinite(value):
            fail(label, text, self.requirement())
        lo, hi = self.lo, self.hi
        if lo is not None and (value < lo or (self.lo_open and value == lo)):
            fail(label, text, self.requirement())
        if hi is not None and (value > hi or (self.hi_open and value == hi)):
            fail(label, text, self.requirement())
        return value


@dataclass(frozen=True)
class SchemeDef:
    """One registry entry (:data:`fgrpo_theory.schemes.SCHEMES`).

    Attributes
    ----------
    name : str
        The name used in specs (lower case, letters, digits and ``-``).
    role : {"advantage", "modifier", "regularizer"}
        An advantage term sets the advantages; the ``focal`` modifier rescales them; a
        regularizer adds a term to the loss (on a softmax policy: its exact value and logit
        gradient, :mod:`fgrpo_theory.schemes.regularizers`).
    summary : str
        One line for ``scheme list``.
    paper : str
        The source, with the equation it implements.
    params : tuple of Param
        Its parameters (defaults from the paper).
    binary : bool
        It needs each rollout's 0/1 correctness (the paper assumes binary rewards).
    needs_logprobs : bool
        Its advantages depend on the rollouts' log-probabilities (likelihood-aware).
    table : callable or None
        ``table(N, r_correct, r_incorrect, **params) -> (a_c, a_w)``, float64 arrays of length
        ``N + 1``: the advantage of a correct / an incorrect rollout in a group with ``X``
        correct (``a_c[0]`` and ``a_w[N]`` are never used and are 0). Binary group schemes have
        one; the closed forms of section 15 and the simulators' kernels read it.
    advantages : callable or None
        ``advantages(r, correct, logprobs, N, **params) -> A`` on ``[..., N]`` arrays of any
        array-API namespace, for what a table cannot express (rewards that are not binary, a
        batch-scoped convention, likelihood-aware schemes). Binary table schemes leave it
        ``None``: their advantages are gathered from the table.
    convention : bool
        The entry is an advantage convention preset (:mod:`fgrpo_theory.advantages`).
    """

    name: str
    role: Role
    summary: str
    paper: str
    params: tuple[Param, ...] = ()
    binary: bool = False
    needs_logprobs: bool = False
    table: Callable[..., tuple[np.ndarray, np.ndarray]] | None = None
    advantages: Callable[..., Any] | None = None
    convention: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params) or "none"
        fail(f"scheme {self.name}", name, f"a parameter of {self.name} ({known})")

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}


@dataclass(frozen=True)
class Term:
    """One term of a spec: a registry name and its parameters (all of them, defaults filled)."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def kw(self) -> dict[str, Any]:
        return dict(self.params)

    def text(self, definition: SchemeDef) -> str:
        """Canonical text: parameters that differ from their defaults, in definition order."""
        parts = []
        for p in definition.params:
            v = self.kw[p.name]
            if v != p.default:
                parts.append(f"{p.name}={_fmt(v)}")
        return self.name + (":" + ",".join(parts) if parts else "")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return repr(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(v)
    return str(v)


def _registry() -> dict[str, SchemeDef]:
    from .catalog import SCHEMES

    return SCHEMES


def _parse_term(text: str, spec: str) -> Term:
    reg = _registry()
    name, _, rest = text.partition(":")
    name = name.strip().lower()
    if name not in reg:
        fail("scheme", name or spec, "one of " + ", ".join(reg) + " (see 'scheme list')")
    d = reg[name]
    values = d.defaults()
    seen: set[str] = set()
    if rest.strip():
        for item in rest.split(","):
            key, eq, val = item.partition("=")
            key = key.strip().lower()
            if not eq or not key:
                fail("scheme", spec, f"parameters written as {name}:key=value,key=value")
            p = d.param(key)
            if key in seen:
                fail(f"scheme {name}", key, "given once")
            seen.add(key)
            values[key] = p.coerce(val.strip(), f"scheme {name}")
    elif rest != "" or text.endswith(":"):
        fail("scheme", spec, f"parameters written as {name}:key=value,key=value")
    return Term(name, tuple((p.name, values[p.name]) for p in d.params))


def parse_scheme(spec: str | Scheme) -> Scheme:
    """The :class:`Scheme` of a spec string (see the module docstring); a Scheme is returned as is.

    Raises ValueError naming ``scheme`` and the bad part: an unknown scheme or parameter, a
    parameter out of its range, two advantage terms, two focal terms or a repeated
    regularizer.
    """
    if isinstance(spec, Scheme):
        return spec
    if not isinstance(spec, str):
        fail("scheme", spec, "a scheme spec such as 'maxrl' or 'trl+focal:gamma=1'")
    if len(spec) > MAX_SPEC_CHARS:
        fail("scheme", spec[:40] + "...", f"at most {MAX_SPEC_CHARS} characters")
    text = spec.strip()
    if not text:
        fail("scheme", spec, "a scheme spec such as 'maxrl' or 'trl+focal:gamma=1'")
    reg = _registry()
    base: Term | None = None
    gamma = 0.0
    has_focal = False
    regs: list[Term] = []
    for part in text.split("+"):
        if not part.strip():
            fail("scheme", spec, "terms joined by '+' such as 'trl+focal:gamma=1'")
        term = _parse_term(part.strip(), spec)
        role = reg[term.name].role
        if role == "advantage":
            if base is not None:
                fail("scheme", spec, "one advantage term (two schemes where one is allowed)")
            base = term
        elif role == "modifier":
            if has_focal:
                fail("scheme", spec, "at most one focal term")
            has_focal = True
            gamma = float(term.kw["gamma"])
        else:
            if any(r.name == term.name for r in regs):
                fail("scheme", spec, f"at most one {term.name} term")
            regs.append(term)
    if base is None:
        base = Term("grpo")
    order = list(reg)
    regs.sort(key=lambda t: order.index(t.name))
    return Scheme(base=base, gamma=gamma, regularizers=tuple(regs))


@dataclass(frozen=True)
class Scheme:
    """A validated, composed training scheme: an advantage term, an optional focal weight and
    optional regularizers. Build it with :func:`parse_scheme`."""

    base: Term = Term("grpo")
    gamma: float = 0.0
    regularizers: tuple[Term, ...] = ()

    # -- description ---------------------------------------------------------------------------
    @property
    def definition(self) -> SchemeDef:
        """The registry entry of the advantage term."""
        return _registry()[self.base.name]

    @property
    def spec(self) -> str:
        """Canonical spec text (defaults omitted, fixed term order)."""
        reg = _registry()
        parts = [self.base.text(reg[self.base.name])]
        if self.gamma != 0.0:
            parts.append(f"focal:gamma={_fmt(self.gamma)}")
        parts += [r.text(reg[r.name]) for r in self.regularizers]
        return "+".join(parts)

    def __str__(self) -> str:
        return self.spec

    @property
    def binary(self) -> bool:
        """Whether the advantages need each rollout's 0/1 correctness."""
        return self.definition.binary

    @property
    def needs_logprobs(self) -> bool:
        """Whether the advantages depend on the rollouts' log-probabilities."""
        return self.definition.needs_logprobs

    @property
    def has_table(self) -> bool:
        """Whether the advantages are a per-X table (binary group scheme, section 15)."""
        return self.definition.table is not None and not self.needs_logprobs

    @property
    def is_convention(self) -> bool:
        """A convention preset, possibly with focal, and no regularizer: what the ``advantage``
        and ``gamma`` fields of the simulators' configs already express."""
        return self.definition.convention and not self.regularizers

    def regularizer(self, name: str) -> dict[str, Any] | None:
        """The parameters of regularizer ``name`` (``"entropy"`` / ``"kl"``), None if absent."""
        for r in self.regularizers:
            if r.name == name:
                return r.kw
        return None

    # -- numbers -------------------------------------------------------------------------------
    def tables(
        self, N: int, r_correct: float = 1.0, r_incorrect: float = -1.0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per-X advantages ``(a_c, a_w)`` of a correct / an incorrect rollout, X = 0..N, focal
        weight (P-12) included (P-13); float64 arrays of length N + 1.

        Raises ValueError for a scheme without a table (likelihood-aware, batch-scoped) or
        parameters that do not fit N.
        """
        from .._validate import check_integer, check_rewards
        from ..advantages import focal_weight

        d = self.definition
        N = check_integer("N", N, 1, 100_000_000)
        rc, rw = check_rewards(r_correct, r_incorrect)
        if not self.has_table:
            fail("scheme", self.spec, "a binary group scheme with per-X tables (section 15)")
        a_c, a_w = d.table(N, rc, rw, **self.base.kw)
        X = np.arange(N + 1)
        g = focal_weight(X / N, self.gamma)  # P-12 on mu_hat = X/N (P-11); A_F = g A (P-13)
        a_c = np.ascontiguousarray(np.asarray(a_c, dtype=float) * g)
        a_w = np.ascontiguousarray(np.asarray(a_w, dtype=float) * g)
        if not (np.all(np.isfinite(a_c)) and np.all(np.isfinite(a_w))):
            if d.convention and not self.regularizers:
                fail("advantage", self.base.name, f"finite for N = {N}")
            fail("scheme", self.spec, f"finite advantages for N = {N}")
        return a_c, a_w

    def advantages(self, rewards: Any, logprobs: Any = None, correct: Any = None) -> Any:
        """Advantages of groups of rollouts, ``[..., N]`` in, the same array type out.

        Parameters
        ----------
        rewards : array, shape (..., N)
            NumPy array, torch tensor or any array-API array (last axis = the group).
        logprobs : array, shape (..., N), optional
            Each rollout's log-probability under the sampling policy (sequence sum for a
            language model); required by likelihood-aware schemes, ignored by the others.
        correct : bool array, shape (..., N), optional
            Each rollout's correctness. Binary schemes and the focal weight need it; without it
            every reward must be 0 or 1 and correct means reward 1.

        Returns
        -------
        array of the input's type: the advantages the loss multiplies (focal weight included).
        Regularizers are separate loss terms (:attr:`regularizers`).
        """
        from . import arrays

        return arrays.scheme_advantages(self, rewards, logprobs, correct)


def scheme_from_fields(scheme: Any, advantage: str, gamma: float) -> Scheme:
    """The scheme a config describes: its ``scheme`` spec, or (when that is empty) its
    ``advantage`` preset with focal ``gamma``."""
    if scheme:
        return parse_scheme(scheme)
    return Scheme(base=Term(advantage), gamma=float(gamma))
