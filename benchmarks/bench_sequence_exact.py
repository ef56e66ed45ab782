"""Benchmark: exact evaluation of the sequence policy by the prefix-tree walk (issue 24).

Measured in the same run, one torch thread, the quick preset's model shape (width 64, 2 layers,
4 heads; untrained weights, which cost the same) on prompts of the default task (L = 7: 16,384
answers per prompt):

* tree walk: :func:`fgrpo_theory.sequence.exact.answer_logprobs` (prompt keys/values once, one
  token per prefix node, 5,461 nodes per prompt);
* reference: :func:`~fgrpo_theory.sequence.exact.answer_logprobs_bruteforce`, every answer scored
  by its own causal forward pass of prompt + answer (batches of 4,096 sequences).

Target: the tree walk >= 20x faster (CPU time per prompt, best of repeats; wall time shown too).
The two must agree (largest |difference| of log-probabilities is printed). Run with
``python benchmarks/bench_sequence_exact.py``; needs torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, header, measure, print_table  # noqa: E402

TARGET = 20.0
PROMPTS = 2


def main() -> int:
    import torch

    from fgrpo_theory.sequence.exact import answer_logprobs, answer_logprobs_bruteforce
    from fgrpo_theory.sequence.model import build_model
    from fgrpo_theory.sequence.run import PRESETS
    from fgrpo_theory.sequence.task import make_prompts

    torch.set_num_threads(1)
    cfg = PRESETS["quick"]
    task = cfg.task
    prompts = make_prompts(task)
    tok = torch.from_numpy(prompts.tokens[:PROMPTS])
    model = build_model(cfg.model, task.vocab, task.prompt_len + task.L)
    header(f"exact evaluation of {PROMPTS} prompts x {task.n_answers:,} answers (torch 1 thread)")
    tree = measure(lambda: answer_logprobs(model, tok, task.L), repeats=5)
    ref = measure(lambda: answer_logprobs_bruteforce(model, tok, task.L), repeats=2)
    diff = answer_logprobs(model, tok, task.L) - answer_logprobs_bruteforce(model, tok, task.L)
    ratio_cpu = ref.cpu / tree.cpu
    rows = [
        Row("tree walk, per prompt (cpu / wall)", f"{tree.cpu / PROMPTS * 1e3:.0f} / "
            f"{tree.wall / PROMPTS * 1e3:.0f} ms"),
        Row("forward pass per answer, per prompt (cpu / wall)", f"{ref.cpu / PROMPTS:.2f} / "
            f"{ref.wall / PROMPTS:.2f} s"),
        Row("speed-up (cpu time)", f"{ratio_cpu:.1f}x", f">= {TARGET:g}x",
            f"wall {ref.wall / tree.wall:.1f}x", ratio_cpu >= TARGET),
        Row("max |log p difference|", f"{float(diff.abs().max()):.1e}"),
    ]  # fmt: skip
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
