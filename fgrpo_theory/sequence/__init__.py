"""The sequence rung: a decoder-only transformer over token sequences, on CPU.

A grid-route task family with a verifier and an exactly enumerable answer space
(:mod:`~fgrpo_theory.sequence.task`, NumPy only), a small transformer
(:mod:`~fgrpo_theory.sequence.model`), supervised training on a biased teacher
(:mod:`~fgrpo_theory.sequence.sft`), exact metrics by a prefix-tree walk
(:mod:`~fgrpo_theory.sequence.exact`) and an RL loop (:mod:`~fgrpo_theory.sequence.rl`).
Everything but the task needs PyTorch (the extra ``[torch]``); importing this package does not
import torch: the submodules that need it are imported when used. Importing it first pins torch's
CPU kernels to AVX2 (:mod:`~fgrpo_theory.sequence._isa`: the same numbers on every x86-64 machine;
``FGRPO_THEORY_TORCH_ISA=native`` keeps torch's own choice). docs/sequence.md describes the
task, the model and the settings.
"""

from __future__ import annotations

from . import _isa

_isa.pin()  # before any torch import: the same kernels, so the same numbers, on every x86-64

from .task import GridTask, Prompts, make_prompts  # noqa: E402

__all__ = ["GridTask", "Prompts", "make_prompts"]
