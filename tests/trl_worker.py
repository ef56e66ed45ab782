"""A tiny TRL GRPO run for tests/test_trl_integration.py (run with python or torchrun).

Usage: trl_worker.py OUTDIR SCALE_REWARDS:SCHEME [...]: one run per pair, into OUTDIR/0, /1, ...
(one process imports TRL once for several runs). Builds a random Qwen2 model (hidden size
16) and a word-level tokenizer locally (nothing downloaded), trains FGRPOTrainer a few steps on
CPU with two reward functions and evaluation, and records per rank: each reward call's prompts
and completion ids (call k), and each loss call's prompt, completion ids and the advantages the
loss received. The test recomputes the advantages from these records.
"""

from __future__ import annotations

import json
import os
import sys

import torch

torch.set_num_threads(1)

from datasets import Dataset  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from fgrpo_theory.integrations.trl import FGRPOTrainer, GroupLogCallback  # noqa: E402

RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
REC: dict[str, list] = {"rewards": [], "loss": []}
CALL = [0]


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    vocab.update({f"w{i}": i + 3 for i in range(40)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        model_input_names=["input_ids", "attention_mask"],
    )


def correct(prompts, completions, completion_ids, **kwargs):
    REC["rewards"].append(
        {"k": CALL[0], "prompts": list(prompts), "ids": [list(map(int, c)) for c in completion_ids]}
    )
    return [1.0 if sum(c) % 2 == 0 else 0.0 for c in completion_ids]


def fmt(prompts, completions, completion_ids, **kwargs):
    return [0.1 * (len(c) % 4) for c in completion_ids]


class Recording(FGRPOTrainer):
    def _generate_and_score_completions(self, inputs):
        CALL[0] += 1
        return super()._generate_and_score_completions(inputs)

    def _compute_loss(self, model, inputs):
        pm, cm = inputs["prompt_mask"].bool(), inputs["completion_mask"].bool()
        for i in range(inputs["advantages"].shape[0]):
            REC["loss"].append(
                {
                    "k": CALL[0],
                    "mode": "train" if self.model.training else "eval",
                    "prompt": self.processing_class.decode(inputs["prompt_ids"][i][pm[i]].tolist()),
                    "ids": inputs["completion_ids"][i][cm[i]].tolist(),
                    "adv": float(inputs["advantages"][i]),
                }
            )
        return super()._compute_loss(model, inputs)


def main(OUT: str, SCALE: str, SCHEME: str) -> None:
    REC["rewards"].clear()
    REC["loss"].clear()
    CALL[0] = 0
    tok = tokenizer()
    cfg = Qwen2Config(
        vocab_size=43,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    train = Dataset.from_dict({"prompt": [f"w{3 + i % 20} w{3 + i // 20} w5" for i in range(60)]})
    evald = Dataset.from_dict({"prompt": [f"w{30 + i} w38 w39" for i in range(6)]})
    args = GRPOConfig(
        output_dir=os.path.join(OUT, "run"),
        per_device_train_batch_size=3 if WORLD == 2 else 2,  # 2 processes: groups straddle
        gradient_accumulation_steps=2,
        num_generations=4,
        num_generations_eval=2,
        per_device_eval_batch_size=3 if WORLD == 2 else 4,
        num_iterations=2,
        max_completion_length=5,
        max_steps=5,  # generations at steps 0 and 4 (steps_per_generation 2 x num_iterations 2)
        learning_rate=1e-3,
        scale_rewards=SCALE,
        reward_weights=[1.0, 0.5],
        eval_strategy="steps",
        eval_steps=2,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        seed=0,
        save_strategy="no",
        dataloader_num_workers=0,
    )
    trainer = Recording(
        model=model,
        reward_funcs=[correct, fmt],
        args=args,
        train_dataset=train,
        eval_dataset=evald,
        processing_class=tok,
        scheme=SCHEME,
        correctness_reward="correct",
        callbacks=[GroupLogCallback(os.path.join(OUT, "groups.jsonl"))],
    )
    trainer.train()
    metrics = [h for h in trainer.state.log_history if any("fgrpo/" in k for k in h)]
    with open(os.path.join(OUT, f"rank{RANK}.json"), "w") as fh:
        json.dump({**REC, "world": WORLD, "metrics": metrics}, fh)


if __name__ == "__main__":
    for i, pair in enumerate(sys.argv[2:]):
        scale, scheme = pair.split(":", 1)
        out = os.path.join(sys.argv[1], str(i))
        os.makedirs(out, exist_ok=True)
        main(out, scale, scheme)
    # torchrun: Accelerate's gloo group, left open at exit, aborted a rank once in CI ("terminate
    # called without an active exception", exit code -6; it passed alone)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
