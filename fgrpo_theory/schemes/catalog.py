"""The registry: every training scheme, one entry each (``SCHEMES``, in ``scheme list`` order).

Adding a scheme is adding one :class:`~fgrpo_theory.schemes.base.SchemeDef` below (with its
table function in :mod:`.tables`, or its array function in :mod:`.likelihood` for a
likelihood-aware scheme); the closed forms, ``scheme list``, both simulators, the sequence model
and the trainer integrations read this dict. CONTRIBUTING.md says how.
"""

from __future__ import annotations

from ..advantages.conventions import PRESETS
from .base import Param, SchemeDef
from .tables import (
    convention_table,
    maxrl_table,
    nsr_table,
    pkpo_table,
    psr_table,
    w_reinforce_table,
)

__all__ = ["SCHEMES"]

_CONVENTION_SOURCES = {
    "grpo": "GRPO (P-3), population std, eps = 0",
    "grpo-bessel": "GRPO (P-3), Bessel std",
    "trl": "TRL GRPOTrainer, scale_rewards='group'",
    "trl-batch": "TRL GRPOTrainer, scale_rewards='batch' (no per-X table)",
    "verl": "verl compute_grpo_outcome_advantage",
    "verl-vectorized": "verl grpo_vectorized",
    "openrlhf": "OpenRLHF group_norm",
    "dr-grpo": "Dr.GRPO (Liu et al. 2025, arXiv 2503.20783): A = R - mean R",
    "verl-dr-grpo": "verl, norm_adv_by_std_in_grpo=False",
    "rloo": "RLOO (Ahmadian et al. 2024, arXiv 2402.14740): leave-one-out baseline",
    "verl-rloo": "verl compute_rloo_outcome_advantage",
    "trl-rloo": "TRL RLOOTrainer",
}


def _convention(name: str) -> SchemeDef:
    batch = PRESETS[name].scale_scope == "batch"
    return SchemeDef(
        name=name,
        role="advantage",
        summary=f"advantage convention {name!r} (theory.md section 3)",
        paper=_CONVENTION_SOURCES.get(name, "a trainer's convention (theory.md section 3)"),
        table=None if batch else convention_table(name),
        convention=True,
    )


_ENTRIES: list[SchemeDef] = [_convention(name) for name in PRESETS]
_ENTRIES += [
    SchemeDef(
        name="focal",
        role="modifier",
        summary="F-GRPO focal weight (1 - X/N)^gamma on any advantage term",
        paper="Plyusov et al. 2026, arXiv 2602.06717, (P-11)-(P-13)",
        params=(Param("gamma", 1.0, "focusing exponent", lo=0.0),),
    ),
    SchemeDef(
        name="maxrl",
        role="advantage",
        summary="MaxRL: (r - mean r) / mean r on 0/1 rewards; sum_{k<N} pass@k / k",
        paper="Tajwar et al. 2026, arXiv 2602.02710, Algorithm 1 (eq. 11 times N)",
        binary=True,
        table=maxrl_table,
    ),
    SchemeDef(
        name="w-reinforce",
        role="advantage",
        summary="W-REINFORCE: +lambda correct, -1 incorrect, no baseline",
        paper="Zhu et al. 2025, arXiv 2506.01347 (W-REINFORCE objective)",
        params=(Param("lambda", 0.1, "weight of the positive samples", lo=0.0),),
        binary=True,
        table=w_reinforce_table,
    ),
    SchemeDef(
        name="psr",
        role="advantage",
        summary="PSR: +1 on correct rollouts only",
        paper="Zhu et al. 2025, arXiv 2506.01347 (positive sample reinforcement)",
        binary=True,
        table=psr_table,
    ),
    SchemeDef(
        name="nsr",
        role="advantage",
        summary="NSR: -1 on incorrect rollouts only",
        paper="Zhu et al. 2025, arXiv 2506.01347 (negative sample reinforcement)",
        binary=True,
        table=nsr_table,
    ),
    SchemeDef(
        name="pkpo",
        role="advantage",
        summary="PKPO: rewards transformed so the policy gradient estimates grad pass@k",
        paper="Walder and Karkhanis 2025, arXiv 2505.15201, section 2.2 (binary rewards)",
        params=(
            Param("k", 4, "the k of pass@k (<= N)", kind="int", lo=1),
            Param(
                "estimator",
                "loo-1",
                "s^(loo-1) (recommended by the paper) or the plain transform s",
                kind="choice",
                choices=("loo-1", "plain"),
            ),
        ),
        binary=True,
        table=pkpo_table,
    ),
    SchemeDef(
        name="entropy",
        role="regularizer",
        summary="entropy bonus (GRPO-H): + coef * H(pi), exact on a softmax",
        paper="Plyusov et al. 2026, arXiv 2602.06717, Table 3 (GRPO-H, coef 1e-3)",
        params=(Param("coef", 1e-3, "coefficient of the entropy in the objective", lo=0.0),),
    ),
    SchemeDef(
        name="kl",
        role="regularizer",
        summary="KL penalty to the initial policy (GRPO-KL): exact, or the k3 estimator",
        paper="Shao et al. 2024, arXiv 2402.03300, eq. (4) (k3); arXiv 2602.06717 Table 3",
        params=(
            Param("coef", 1e-3, "coefficient of the KL in the loss", lo=0.0),
            Param(
                "estimator",
                "exact",
                "exact KL(pi || pi_0), or k3 on the sampled rollouts",
                kind="choice",
                choices=("exact", "k3"),
            ),
        ),
    ),
]

#: Every scheme by name, in ``scheme list`` order.
SCHEMES: dict[str, SchemeDef] = {d.name: d for d in _ENTRIES}
