"""TRL: ``FGRPOTrainer`` (a ``trl.GRPOTrainer`` subclass) and ``GroupLogCallback``.

``FGRPOTrainer(..., scheme="focal:gamma=1", correctness_reward="accuracy")`` works on whole
groups as TRL itself does: TRL gathers every process's rewards before it normalizes them per
group (a group of ``num_generations`` completions may straddle processes); this trainer takes the
same gathered rewards, computes the scheme on whole groups and keeps its process's slice.

- A spec that is only a focal modifier (``focal:gamma=G``) multiplies TRL's own advantages (any
  ``scale_rewards``, any ``multi_objective_aggregation``, several reward functions with their
  ``reward_weights``) by each group's weight g = (1 - X/N)^G (P-12, P-13).
- A spec with an advantage term (``trl+focal:gamma=0.5``, ``maxrl``, ``pkpo:k=4``, ...) replaces
  TRL's advantages by the scheme's, computed from the weighted sum of the rewards (TRL's
  ``sum_then_normalize`` reward) and each completion's correctness.

X (the correct completions of a group) is counted from the reward function named
``correctness_reward`` (a completion is correct when that reward is >= ``correctness_threshold``,
default 0.5); with a single reward function it is that one. It is never read from the signs of
advantages. Groups have ``num_generations`` completions in training and ``num_generations_eval``
in evaluation; ``steps_per_generation``, ``num_iterations`` and gradient accumulation reuse the
generation batch this trainer weighted once.

Metrics (in TRL's logs): ``fgrpo/weight_mean`` (mean focal weight over the groups),
``fgrpo/frac_downweighted`` (share of groups with g < 1). The completions table's advantages
are the weighted ones. ``GroupLogCallback(path)`` writes one JSON line per group
(``prompt, step, n, n_correct, weight, mode, scheme``) that ``fgrpo-theory diagnose --from trl``
reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from .._validate import fail
from .groups import focal_weights, trainer_scheme

__all__ = ["FGRPOTrainer", "GroupLogCallback"]


class GroupLogCallback(TrainerCallback):
    """Writes one JSON line per group to ``path`` (main process only), flushed at each log and
    at the end of training; each line is complete, so a crashed run leaves a readable file."""

    def __init__(self, path: str | Path, *, include_eval: bool = False) -> None:
        self.path = Path(path)
        self.include_eval = include_eval
        self._rows: list[dict[str, Any]] = []
        self._main = True

    def add_rows(self, rows: list[dict[str, Any]], is_main_process: bool) -> None:
        self._main = is_main_process
        if is_main_process:
            self._rows.extend(r for r in rows if self.include_eval or r["mode"] == "train")

    def flush(self) -> None:
        if not self._main or not self._rows:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self._rows)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(text)
        self._rows.clear()

    def on_log(self, args, state, control, **kwargs):  # noqa: D102
        self.flush()

    def on_train_end(self, args, state, control, **kwargs):  # noqa: D102
        self.flush()


def _prompt_id(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)


class FGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose advantages follow a scheme of :mod:`fgrpo_theory.schemes`.

    Parameters (besides GRPOTrainer's)
    ----------
    scheme : str
        Scheme spec (default ``"focal:gamma=1"``); see the module docstring.
    correctness_reward : str, optional
        Name of the reward function (its ``__name__``, as in TRL's ``rewards/<name>`` metrics)
        that decides correctness; required when there are several reward functions.
    correctness_threshold : float
        A completion is correct when that reward is >= this (default 0.5).
    """

    def __init__(
        self,
        *args: Any,
        scheme: str = "focal:gamma=1",
        correctness_reward: str | None = None,
        correctness_threshold: float = 0.5,
        **kwargs: Any,
    ) -> None:
        self.fgrpo_scheme, self._fgrpo_has_base = trainer_scheme(scheme)
        self.fgrpo_threshold = float(correctness_threshold)
        super().__init__(*args, **kwargs)
        names = list(self.reward_func_names)
        if correctness_reward is None:
            if len(names) != 1:
                fail(
                    "correctness_reward",
                    None,
                    "the name of one reward function when there are several (" + ", ".join(names)
                    + ")",
                )  # fmt: skip
            correctness_reward = names[0]
        if correctness_reward not in names:
            fail("correctness_reward", correctness_reward, "one of " + ", ".join(names))
        self.fgrpo_correct_index = names.index(correctness_reward)
        self._fgrpo_rewards: torch.Tensor | None = None
        self._fgrpo_logs = [
            cb for cb in self.callback_handler.callbacks if isinstance(cb, GroupLogCallback)
        ]

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        self._fgrpo_rewards = rewards_per_func  # gathered over every process, as TRL uses them
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        n = self.num_generations if mode == "train" else self.num_generations_eval
        rpf = self._fgrpo_rewards
        self._fgrpo_rewards = None
        local = out["advantages"].shape[0]
        if rpf is None or rpf.shape[0] % n or out["advantages"].dim() != 1:
            fail("rewards", None if rpf is None else rpf.shape[0], f"whole groups of {n}")
        start = self.accelerator.process_index * local
        score = rpf[:, self.fgrpo_correct_index]
        correct = torch.nan_to_num(score, nan=-torch.inf) >= self.fgrpo_threshold
        grouped_correct = correct.view(-1, n)
        if self._fgrpo_has_base:
            weights = self.reward_weights.to(rpf.device, rpf.dtype)
            rewards = (rpf * weights.unsqueeze(0)).nansum(dim=1).view(-1, n)
            adv_all = self.fgrpo_scheme.advantages(rewards, correct=grouped_correct)
            adv_all = adv_all.reshape(-1).to(out["advantages"].dtype)
            g = focal_weights(grouped_correct, self.fgrpo_scheme.gamma)
            new_local = adv_all[start : start + local]
            w = None
        else:
            g = focal_weights(grouped_correct, self.fgrpo_scheme.gamma)
            w = g.to(out["advantages"].dtype).repeat_interleave(n)
            new_local = out["advantages"] * w[start : start + local]
            adv_all = None
        out["advantages"] = new_local
        self._fgrpo_metrics(mode, g, rpf.shape[0], w, adv_all)
        self._fgrpo_group_rows(mode, inputs, n, grouped_correct, g)
        return out

    def _fgrpo_metrics(self, mode, g, total, w_all, adv_all) -> None:
        """TRL metrics of the weights; the completions table's advantages replaced by the new."""
        self._metrics[mode]["fgrpo/weight_mean"].append(float(g.float().mean().item()))
        self._metrics[mode]["fgrpo/frac_downweighted"].append(float((g < 1).float().mean().item()))
        logged = self._logs.get("advantages") if isinstance(self._logs, dict) else None
        if logged is None or len(logged) < total:
            return
        tail = list(logged)[-total:]
        if w_all is not None:
            new = [a * float(w) for a, w in zip(tail, w_all.tolist(), strict=True)]
        else:
            new = adv_all.tolist()
        for _ in range(total):
            logged.pop()
        logged.extend(new)

    def _fgrpo_group_rows(self, mode, inputs, n, grouped_correct, g) -> None:
        if not self._fgrpo_logs:
            return
        from accelerate.utils import gather_object

        prompts = gather_object([_prompt_id(x["prompt"]) for x in inputs])
        x = grouped_correct.sum(dim=1).tolist()
        gs = g.tolist()
        rows = [
            dict(
                prompt=prompts[i * n],
                step=int(self.state.global_step),
                n=int(n),
                n_correct=int(x[i]),
                weight=float(gs[i]),
                mode=mode,
                scheme=self.fgrpo_scheme.spec,
            )
            for i in range(len(x))
        ]
        for cb in self._fgrpo_logs:
            cb.add_rows(rows, self.accelerator.is_main_process)
