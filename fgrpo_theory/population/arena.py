"""The arena's arms: every remedy of the schemes registry at its pre-registered coefficients.

The grid was fixed on 2026-11-25 before any arena run (docs/arena.md, "Pre-registration"). One
:class:`ArenaArm` per (remedy, coefficient); the same list serves the population arena
(:func:`population_arms`) and the single-prompt companion (:func:`sim_changes`). An arm whose
scheme a simulator does not accept yet (the likelihood-aware schemes and the regularizers while
they are being added) is reported by :func:`missing_reason` and left out; it enters by itself
once the simulator accepts its spec. Adding a remedy is one line in :data:`GRID`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .draws import Arm

__all__ = ["ArenaArm", "GRID", "arena_arms", "population_arms", "missing_reason", "sim_changes"]

#: m_gamma = B(3/2, gamma + 3/2) / B(3/2, 3/2) for gamma = 0.5, 1, 2 (appendix N): the paper's
#: low-learning-rate control (:func:`fgrpo_theory.fair.controls.m_multiplier`, rounded here so
#: the arm's label is its factor)
_M = {"0.5": 0.6791, "1": 0.5, "2": 0.3125}

#: (family, kind, coefficient labels and values); kind: "term" (an advantage scheme or a term
#: composed with the reference convention), "lr" (a factor on the learning rates), "N" (group
#: size at B x N fixed), "dynamic" (DAPO's filter, batch refilled from the next prompts),
#: "scaled" (the registry default of the scheme's first number parameter times each factor)
GRID: tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...] = (
    ("focal", "term", (("0.5", "focal:gamma=0.5"), ("1", "focal:gamma=1"), ("2", "focal:gamma=2"))),
    ("maxrl", "term", (("", "maxrl"),)),
    ("w-reinforce", "term", tuple((v, f"w-reinforce:lambda={v}") for v in ("0.03", "0.1", "0.3"))),
    ("psr", "term", (("", "psr"),)),
    ("nsr", "term", (("", "nsr"),)),
    ("pkpo", "term", tuple((v, f"pkpo:k={v}") for v in ("2", "4", "8"))),
    ("entropy", "term", tuple((v, f"entropy:coef={v}") for v in ("0.001", "0.01", "0.1"))),
    ("kl", "term", tuple((v, f"kl:coef={v},estimator=k3") for v in ("0.001", "0.01", "0.1"))),
    ("ds", "scaled", (("x1/3", 1 / 3), ("x1", 1.0), ("x3", 3.0))),
    ("unlikeliness", "term",
     tuple((v, f"unlikeliness:penalty={v}") for v in ("0.1", "0.25", "0.5"))),
    ("low-lr", "lr", tuple((f"m{g}={m:g}", m) for g, m in _M.items())),
    ("larger-N", "N", (("16", 16), ("32", 32))),
    ("dynamic-sampling", "dynamic", (("dapo", "dapo"),)),
)  # fmt: skip


@dataclass(frozen=True)
class ArenaArm:
    """One arm: ``family`` and ``coef`` label it; ``scheme`` (a spec term, "" for GRPO),
    ``lr_factor``, ``N`` (0 = the setting's), ``dynamic`` ("" = off); ``note`` says why an arm
    could not be built (e.g. a scheme not in the registry)."""

    family: str
    coef: str = ""
    scheme: str = ""
    lr_factor: float = 1.0
    N: int = 0
    dynamic: str = ""
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.family} {self.coef}".strip()


def _scaled(family: str, factor: float) -> tuple[str, str]:
    """The spec of ``family`` with its first number parameter at default x factor."""
    from ..schemes import SCHEMES

    d = SCHEMES.get(family)
    if d is None:
        return family, f"scheme {family!r} is not in the registry yet"
    nums = [p for p in d.params if p.kind == "float"]
    if not nums:
        return family, f"scheme {family!r} has no number parameter to scale"
    p = nums[0]
    return f"{family}:{p.name}={float(p.default) * factor!r}", ""


def arena_arms() -> list[ArenaArm]:
    """Every arm of :data:`GRID`, GRPO (the reference) first."""
    out = [ArenaArm("grpo")]
    for family, kind, values in GRID:
        for label, v in values:
            if kind == "term":
                out.append(ArenaArm(family, label, scheme=v))
            elif kind == "scaled":
                spec, note = _scaled(family, v)
                out.append(ArenaArm(family, label, scheme=spec, note=note))
            elif kind == "lr":
                out.append(ArenaArm(family, label, lr_factor=float(v)))
            elif kind == "N":
                out.append(ArenaArm(family, label, N=int(v)))
            else:
                out.append(ArenaArm(family, label, dynamic=str(v)))
    return out


def _compose(reference: str, term: str) -> str:
    """The spec of ``term`` on top of the ``reference`` convention (modifiers and regularizers
    are composed; an advantage scheme replaces the convention)."""
    from ..schemes import SCHEMES

    name = term.partition(":")[0]
    d = SCHEMES.get(name)
    if d is not None and d.role != "advantage":
        return f"{reference}+{term}"
    return term


def population_arms(arms: list[ArenaArm], base: Any, compute_budget: int = 256) -> list[Arm]:
    """The :class:`~fgrpo_theory.population.draws.Arm` of each arena arm on ``base`` (a
    PopulationConfig): larger N keeps B x N = ``compute_budget``; dynamic sampling refills the
    batch from the next prompts of the epoch (``ds_fill = "next-prompt"``)."""
    out = []
    for a in arms:
        ch: dict[str, Any] = {}
        if a.scheme:  # the scheme field holds the whole spec (advantage and gamma at defaults)
            ch.update(scheme=_compose(base.training_scheme().spec, a.scheme), advantage="grpo",
                      gamma=0.0)  # fmt: skip
        if a.N:
            ch.update(N=a.N, B=compute_budget // a.N)
        if a.dynamic:
            ch.update(dynamic_sampling=a.dynamic, ds_fill="next-prompt")
        out.append(Arm(a.name, tuple(sorted(ch.items())), a.lr_factor, a.family, a.coef))
    return out


def missing_reason(arm: ArenaArm, base: Any, compute_budget: int = 256) -> str:
    """Why ``arm`` cannot run on ``base`` (a PopulationConfig or a SimConfig), or ""."""
    if arm.note:
        return arm.note
    try:
        if hasattr(base, "P"):
            cfg = population_arms([arm], base, compute_budget)[0].config(base)
            from .runner import advantage_tables

            advantage_tables(cfg)
        else:
            base.replace(**sim_changes(arm, base))
    except ValueError as e:
        return str(e)
    return ""


def sim_changes(arm: ArenaArm, base: Any) -> dict[str, Any]:
    """SimConfig changes of ``arm`` on the single-prompt ``base`` (its ``scheme`` is the
    reference convention); "larger N" has no single-prompt meaning (B = 1) and is refused."""
    from .._validate import fail

    if arm.N:
        fail("arm", arm.name, "an arm with a single-prompt meaning (B x N needs B > 1)")
    ch: dict[str, Any] = {}
    ref = base.training_scheme().spec
    if arm.scheme:
        ch.update(scheme=_compose(ref, arm.scheme), advantage="grpo", gamma=0.0)
    if arm.lr_factor != 1.0:
        ch["lr"] = base.lr * arm.lr_factor
    if arm.dynamic:
        ch["dynamic_sampling"] = arm.dynamic
    return ch
