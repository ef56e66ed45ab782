"""verl: an advantage estimator for any table scheme of :mod:`fgrpo_theory.schemes`.

Importing this module registers the estimator in verl's registry
(``verl.trainer.ppo.core_algos.register_adv_est``) under the name in the environment variable
``FGRPO_VERL_ESTIMATOR`` (default ``"fgrpo"``); :func:`register` registers it under another name.
verl computes advantages in its own processes (the Ray task runner), so the module must be
imported there, not only in the user's script. Two documented ways:

- ``VERL_USE_EXTERNAL_MODULES=fgrpo_theory.integrations.verl`` (verl imports it in every
  process that imports verl);
- the ``verl.plugins`` entry point of this package (``pip install fgrpo-theory[verl]``), which
  verl loads on import unless ``VERL_USE_EXTERNAL_PLUGINS=none``.

Configuration, read from verl's ``algorithm`` config at every call (add keys with ``+``)::

    algorithm.adv_estimator=fgrpo
    +algorithm.fgrpo_scheme='focal:gamma=1'   # a scheme spec (default focal:gamma=1)
    +algorithm.fgrpo_threshold=0.5            # optional: a score >= 0.5 is correct
    algorithm.norm_adv_by_std_in_grpo=true    # verl's own key

A spec that is only a focal modifier (``focal:gamma=G``) applies to verl's GRPO advantage as
verl computes it: ``"verl"`` (Bessel std + 1e-6) or, with ``norm_adv_by_std_in_grpo=false``,
``"verl-dr-grpo"`` (Dr.GRPO); groups of one keep verl's rule (mean 0, std 1). A spec with an
advantage term (``maxrl``, ``verl-rloo+focal:gamma=0.5``, ...) is used as it is.

The score of a response is the sum of its ``token_level_rewards`` (one outcome reward). Scores
must be 0/1 or -1/+1 unless ``fgrpo_threshold`` is set; with ``use_kl_in_reward`` the rewards
carry the KL penalty, so set a threshold.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from .groups import correct_from_scores, grouped_advantages, trainer_scheme

__all__ = ["compute_fgrpo_advantage", "register", "ESTIMATOR_NAME", "scheme_for"]

#: The estimator name registered on import.
ESTIMATOR_NAME = os.environ.get("FGRPO_VERL_ESTIMATOR", "fgrpo")
#: The scheme when the config names none.
DEFAULT_SCHEME = "focal:gamma=1"


def _get(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    if isinstance(config, dict):
        return config.get(key, default)
    getter = getattr(config, "get", None)
    if getter is not None:
        return getter(key, default)
    return getattr(config, key, default)


def scheme_for(config: Any) -> Any:
    """The scheme the algorithm config asks for (see the module docstring)."""
    from ..schemes import parse_scheme

    spec = _get(config, "fgrpo_scheme", None) or DEFAULT_SCHEME
    scheme, has_base = trainer_scheme(str(spec), "algorithm.fgrpo_scheme")
    if has_base:
        return scheme
    norm = bool(_get(config, "norm_adv_by_std_in_grpo", True))
    base = "verl" if norm else "verl-dr-grpo"
    return parse_scheme(f"{base}+{spec}")


def compute_fgrpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl advantage estimator: the scheme's advantages of each group of responses (grouped
    by ``index``, verl's ``uid``), broadcast over the response tokens; returns
    ``(advantages, returns)``, both ``[batch, response_length]``."""
    if index is None:
        raise ValueError("index must be given (verl's uid, one per prompt); got None")
    scheme = scheme_for(config)
    threshold = _get(config, "fgrpo_threshold", None)
    threshold = None if threshold is None else float(threshold)
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        correct = correct_from_scores(scores, threshold, "scores (token_level_rewards summed)")
        adv = grouped_advantages(scheme, scores, index, correct)
        out = adv.unsqueeze(-1) * response_mask
    return out, out


def register(name: str = ESTIMATOR_NAME) -> None:
    """Register :func:`compute_fgrpo_advantage` in verl's estimator registry under ``name``."""
    from verl.trainer.ppo import core_algos

    current = core_algos.ADV_ESTIMATOR_REGISTRY.get(name)
    if current is compute_fgrpo_advantage:
        return
    core_algos.register_adv_est(name)(compute_fgrpo_advantage)


register()
