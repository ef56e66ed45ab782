"""Shipped trainer integrations (issue 23): TRL and verl.

- :mod:`.trl`: ``FGRPOTrainer``, a ``trl.GRPOTrainer`` subclass that applies a scheme of
  :mod:`fgrpo_theory.schemes` to whole groups (also when a group straddles processes), and
  ``GroupLogCallback``, which writes the per-group log ``fgrpo-theory diagnose --from trl`` reads.
- :mod:`.verl`: registers an advantage estimator (``algorithm.adv_estimator=fgrpo``) in verl's
  registry; loaded in verl's workers by ``VERL_USE_EXTERNAL_MODULES=fgrpo_theory.integrations.verl``
  or the ``verl.plugins`` entry point this package installs.
- :mod:`.groups` (no trainer import): grouping by prompt id with unequal groups, correctness from
  rewards, the scheme's advantages on whole groups.

Nothing here is imported by ``import fgrpo_theory``; the trainer modules import torch and the
trainer when they are imported. Tested versions: see docs/integrations.md.
"""
