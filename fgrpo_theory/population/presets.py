"""Named population configs for the default group-size experiment (chosen before any result).

The default population and the reason for each choice (docs/populations.md repeats them):

- ``P = P_test = 256``: enough prompts that dataset means are smooth at 8 seeds, cheap.
- ``K = 64`` strategies, breadth ``s_k ~ Beta(0.3, 3)`` (mean 0.09): most strategies solve few
  prompts and a handful solve many, the "few general methods, many special tricks" picture.
- ``mu_0 ~ Beta(0.6, 0.9)`` (mean 0.4, mass near 0 and near 1): a base model with dataset pass@1
  around 0.36-0.40 (Qwen2.5-7B math, Table 10) and many hard prompts, so pass@256 has room.
- ``rare_share = 0.1`` on the narrowest half of each prompt's correct strategies: the rare
  correct modes hold a tenth of the correct mass, as in the Fig. 2 setting's retained mass.
- ``B = 32`` (and 8), ``steps = 300``: a few dozen epochs-worth of visits per prompt.
- Adam ``lr = 0.01`` on all logits; SGD ``lr = 3`` (the per-prompt gradient is ~1/B of a
  single-prompt step, so SGD needs a larger step to move in 300 steps).
- ``shared``: theta and phi both trained at the same lr (a trainer updates all weights);
  ``tabular``: theta frozen (independent prompts); ``shared-only``: phi frozen.

The second default population, ``headroom-*`` (chosen 2026-11-25 from start-state
properties only, before any training on it; docs/arena.md): as above but ``mu_0 ~ Beta(0.2, 1)``
(mean 0.17: many prompts the base model almost never solves) and ``rare_share = 0.6`` (a prompt's
correct mass mostly on its rare strategies). At the start, over population seeds 0-15: test
pass@1 median 0.158, pass@256 median 0.689 (0.606-0.738, every draw <= 0.80), 36 % of test
prompts with mu_0 < 0.005, so pass@256 effects are not capped near 1 (the default population
starts at pass@256 0.95-0.98).
"""

from __future__ import annotations

from typing import Any

from .._validate import fail
from .config import PopulationConfig

__all__ = ["PRESETS", "preset"]

_BASE: dict[str, Any] = dict(
    P=256, P_test=256, K=64, breadth=(0.3, 3.0), mu0=(0.6, 0.9), rare_share=0.1,
    rare_fraction=0.5, unsolvable="drop", population_seed=0, B=32, N=8, steps=300,
    advantage="grpo", rule="logprob", optimizer="adam", seeds=8, seed=0, log_every=50,
    pass_k=(1, 4, 16, 64, 256, 1024),
)  # fmt: skip

_SHARING = {
    "shared": dict(lr_shared=1.0, lr_prompt=1.0),
    "tabular": dict(lr_shared=0.0, lr_prompt=1.0),
    "shared-only": dict(lr_shared=1.0, lr_prompt=0.0),
}
_LR = {"adam": 0.01, "sgd": 3.0}


def _make(sharing: str, optimizer: str, B: int = 32, **kw: Any) -> dict[str, Any]:
    d = dict(_BASE, optimizer=optimizer, B=B)
    d.update({k: v * _LR[optimizer] for k, v in _SHARING[sharing].items()})
    d["name"] = f"{sharing}-{optimizer}-B{B}"
    d.update(kw)
    return d


#: preset name -> config fields
PRESETS: dict[str, dict[str, Any]] = {
    f"{s}-{o}" + ("" if B == 32 else f"-B{B}"): _make(s, o, B)
    for s in _SHARING
    for o in _LR
    for B in (32, 8)
}
PRESETS["default"] = PRESETS["shared-adam"]
#: the headroom population (module docstring): same model, harder prompts, rare-heavy correct mass
HEADROOM: dict[str, Any] = dict(mu0=(0.2, 1.0), rare_share=0.6)
for _s in _SHARING:
    for _o in _LR:
        PRESETS[f"headroom-{_s}-{_o}"] = _make(_s, _o, 32, **HEADROOM, name=f"headroom-{_s}-{_o}")
PRESETS["headroom"] = PRESETS["headroom-shared-adam"]
PRESETS["quick"] = dict(_BASE, P=64, P_test=64, K=32, B=8, steps=60, seeds=2, log_every=20,
                        lr_shared=0.01, lr_prompt=0.01, name="quick")  # fmt: skip


def preset(name: str, **overrides: Any) -> PopulationConfig:
    """The :class:`PopulationConfig` of preset ``name`` with ``overrides``."""
    if name not in PRESETS:
        fail("--preset", name, "one of " + ", ".join(sorted(PRESETS)))
    return PopulationConfig(**{**PRESETS[name], **overrides})
