"""Benchmark: one RL step of the sequence rung's loop against one step of TRL's GRPOTrainer
(issue 24 step 6).

The same model (the quick preset's shape: width 64, 2 layers, 4 heads; seeded untrained
weights, which cost what trained ones do), the same batch (B = 8 prompts x N = 8 completions of
L = 7 moves), AdamW, one torch thread, float32 on both sides:

* ours: :func:`fgrpo_theory.sequence.rl.rl_step` (sampling: each prompt prefilled once, its
  rollouts decoded against a key/value buffer; verifier, ``trl`` advantages, the log-prob
  surrogate over packed groups (each prompt once, then its N answers), backward, fused AdamW);
* TRL, its own generation: ``trl.GRPOTrainer`` (``loss_type="dapo"``, ``scale_rewards="group"``,
  ``beta=0``, ``bf16=False``) on the same TinyDecoder wrapped as a ``transformers`` model that
  shares its parameters (:mod:`fgrpo_theory.sequence.hf`), completions from ``model.generate``
  (the wrapper has no key/value cache, as a plain ``transformers`` model without one);
* TRL, our sampler: the same trainer with our sampler as its ``rollout_func``, so that the
  generation cost is equal and the row measures TRL's training machinery (tokenization,
  rewards, advantages, log-probs, loss, backward, optimizer, bookkeeping).

One step of TRL is the time between its ``on_step_begin`` and ``on_step_end`` callbacks, in a
``trainer.train()`` of ``STEPS`` steps; one of our steps runs inside each ``on_step_end``
(interleaved, so both see the same background load). Best of the steps after the first two
(CPU time; wall time too). Target: ours >= 5x faster than TRL's step, CPU time, in the same
run. Without TRL (``pip install -e ".[trl]"``) the TRL rows are skipped with a note. Run with
``python benchmarks/bench_sequence_step.py``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, Timing, header, print_table  # noqa: E402

TARGET = 5.0
STEPS = 12
WARMUP = 2


def _ours_step(model, opt, prompts, ids, cfg, gen):
    from fgrpo_theory.sequence.rl import rl_step

    c0, t0 = time.process_time(), time.perf_counter()
    rl_step(model, opt, prompts, ids, cfg, gen)
    return Timing(time.perf_counter() - t0, time.process_time() - c0)


def _trl_run(own_generation: bool):
    """Per-step timings of TRL's trainer and of our loop, interleaved (module doc)."""
    import copy

    import numpy as np
    import torch
    from transformers import TrainerCallback

    from fgrpo_theory.sequence.hf import grpo_trainer, to_hf
    from fgrpo_theory.sequence.model import build_model
    from fgrpo_theory.sequence.rl import RLConfig, make_optimizer, sample_answers
    from fgrpo_theory.sequence.run import PRESETS
    from fgrpo_theory.sequence.task import make_prompts

    cfg = PRESETS["quick"]
    task = cfg.task
    prompts = make_prompts(task)
    rl = RLConfig(B=8, N=8, scheme="trl", lr=3e-4)
    ids = np.arange(rl.B)
    base = build_model(cfg.model, task.vocab, task.prompt_len + task.L)
    ours_model = copy.deepcopy(base)
    ours_opt = make_optimizer(ours_model, rl)
    ours_gen = torch.Generator().manual_seed(0)
    theirs = copy.deepcopy(base)
    gen = torch.Generator().manual_seed(1)
    ptok = torch.from_numpy(prompts.tokens[ids])
    moves = None if own_generation else (lambda: sample_answers(theirs, ptok, rl.N, task.L, gen)[0])
    with tempfile.TemporaryDirectory() as tmp:
        tr = grpo_trainer(to_hf(theirs), prompts, ids, rl.N, moves=moves, output_dir=tmp,
                          max_steps=STEPS, learning_rate=rl.lr, lr_scheduler_type="constant",
                          logging_steps=10**6)  # fmt: skip
        trl_t: list[Timing] = []
        ours_t: list[Timing] = []

        class Clock(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                self.c0, self.t0 = time.process_time(), time.perf_counter()

            def on_step_end(self, args, state, control, **kw):
                trl_t.append(Timing(time.perf_counter() - self.t0, time.process_time() - self.c0))
                ours_t.append(_ours_step(ours_model, ours_opt, prompts, ids, rl, ours_gen))

        tr.add_callback(Clock())
        tr.train()
    best = lambda ts: Timing(min(t.wall for t in ts[WARMUP:]), min(t.cpu for t in ts[WARMUP:]))  # noqa: E731
    return best(trl_t), best(ours_t)


def main() -> int:
    # before torch: the CPU kernels a fgrpo-theory run uses (fgrpo_theory.sequence._isa)
    isa = importlib.import_module("fgrpo_theory.sequence._isa")
    import torch

    torch.set_num_threads(1)
    print(f"# torch CPU kernels: {isa.label()} (both sides)")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    header("one RL step, quick preset's model, B = 8 x N = 8, L = 7 (torch 1 thread, float32)")
    if importlib.util.find_spec("trl") is None:
        print("# TRL is not installed (pip install -e '.[trl]'): the TRL rows are skipped")
        return 0
    import transformers
    import trl

    print(f"# trl {trl.__version__}, transformers {transformers.__version__}, "
          f"torch {torch.__version__}")  # fmt: skip
    import logging

    transformers.logging.set_verbosity_error()
    logging.getLogger("trl").setLevel(logging.ERROR)
    rows = []
    for own, label in ((True, "TRL generating"), (False, "TRL on our sampler")):
        theirs, ours = _trl_run(own)
        r = theirs.cpu / ours.cpu
        rows += [
            Row(f"{label}: TRL step (cpu / wall)",
                f"{theirs.cpu * 1e3:.0f} / {theirs.wall * 1e3:.0f} ms"),
            Row(f"{label}: our step (cpu / wall)",
                f"{ours.cpu * 1e3:.1f} / {ours.wall * 1e3:.1f} ms"),
            Row(f"{label}: speed-up (cpu time)", f"{r:.1f}x", f">= {TARGET:g}x",
                f"wall {theirs.wall / ours.wall:.1f}x", r >= TARGET),
        ]  # fmt: skip
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
