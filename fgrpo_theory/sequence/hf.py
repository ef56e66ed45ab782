"""The sequence model as a ``transformers`` causal LM, to run TRL's GRPOTrainer on the same model.

Used by the equivalence test (``tests/test_sequence_trl.py``: one step of
:func:`fgrpo_theory.sequence.rl.rl_step` against one step of ``trl.GRPOTrainer``) and the speed
benchmark (``benchmarks/bench_sequence_step.py``). Needs ``transformers`` (the ``[trl]`` extra);
the rest of :mod:`fgrpo_theory.sequence` never imports it.

- :func:`to_hf` wraps a :class:`~fgrpo_theory.sequence.model.TinyDecoder` as a
  ``PreTrainedModel`` that *shares* its embeddings, blocks and final LayerNorm (the same
  parameter tensors) and carries a full-vocabulary LM head: rows 0-3 (the moves) are copies of
  the decoder's 4-way head, every other row has weight 0 and bias :data:`MASKED_LOGIT`. In
  float32 ``exp(MASKED_LOGIT - max)`` is exactly 0, so the softmax over the vocabulary equals
  the decoder's softmax over the four moves and the masked rows get exactly zero gradient.
- :func:`make_tokenizer`: a word-level tokenizer whose ids are the task's token ids (moves
  ``U D L R``, ``<bos> <sep> <pad>``, count tokens ``A0..``, cell tokens ``C0..``);
  :func:`prompt_text` writes a prompt in it.
- :func:`reward_function`: TRL's reward-function signature over the task's verifier (reward 1
  for a correct answer, 0 otherwise; the dataset column ``pid`` names the prompt).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, CausalLMOutput

from .model import ModelConfig, TinyDecoder
from .task import BOS, MOVES, PAD, SEP, GridTask, Prompts

__all__ = ["TinyDecoderConfig", "TinyDecoderForCausalLM", "to_hf", "make_tokenizer",
           "prompt_text", "reward_function", "MASKED_LOGIT"]  # fmt: skip

#: Bias of the LM-head rows of non-move tokens: exp(-1e4) underflows to exactly 0 in float32.
MASKED_LOGIT = -1.0e4


class TinyDecoderConfig(PretrainedConfig):
    """The shape of a :class:`~fgrpo_theory.sequence.model.TinyDecoder` (its ModelConfig fields),
    the task's vocabulary size and the longest sequence."""

    model_type = "fgrpo-tiny-decoder"
    attribute_map = {"hidden_size": "d_model", "num_hidden_layers": "n_layers",
                     "num_attention_heads": "n_heads"}  # fmt: skip
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 0
    seed: int = 0
    vocab_size: int = 8
    max_len: int = 16
    bos_token_id: int | None = BOS
    eos_token_id: int | None = SEP  # never generated: its logit is MASKED_LOGIT
    pad_token_id: int | None = PAD
    tie_word_embeddings: bool = False
    use_cache: bool = False  # no key/value cache: generate() feeds the whole sequence

    @property
    def auto_map(self) -> dict:
        """No remote code: the model class is registered locally (:func:`register_auto`)."""
        return {}


class _Backbone(nn.Module):
    """Embeddings, blocks and final LayerNorm of a TinyDecoder: hidden states [B, T, d]."""

    def __init__(self, decoder: TinyDecoder) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        if attention_mask is not None and not bool(attention_mask.all()):
            raise ValueError(
                "attention_mask must be all ones: prompts and answers have fixed length"
            )
        d = self.decoder
        T = input_ids.shape[1]
        x = d.tok(input_ids) + d.pos(torch.arange(T, device=input_ids.device))
        for b in d.blocks:
            x, _ = b.full(x)
        return BaseModelOutput(last_hidden_state=d.ln_f(x))


class TinyDecoderForCausalLM(PreTrainedModel, GenerationMixin):
    """A TinyDecoder as a causal LM over the task's whole vocabulary (module doc)."""

    config_class = TinyDecoderConfig
    base_model_prefix = "backbone"
    main_input_name = "input_ids"
    _supports_cache_class = False

    def __init__(self, config: TinyDecoderConfig, decoder: TinyDecoder | None = None) -> None:
        super().__init__(config)
        if decoder is None:
            c = config
            mc = ModelConfig(d_model=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads,
                             d_ff=c.d_ff, seed=c.seed)  # fmt: skip
            decoder = TinyDecoder(mc, config.vocab_size, config.max_len)
        self.backbone = _Backbone(decoder)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size)
        with torch.no_grad():
            self.lm_head.weight.zero_()
            self.lm_head.bias.fill_(MASKED_LOGIT)
            self.lm_head.weight[:4] = decoder.head.weight
            self.lm_head.bias[:4] = decoder.head.bias
        self.post_init()  # transformers' bookkeeping; _init_weights leaves the weights alone

    @property
    def decoder(self) -> TinyDecoder:
        return self.backbone.decoder

    def _init_weights(self, module) -> None:  # weights come from the TinyDecoder
        pass

    def get_input_embeddings(self):
        return self.backbone.decoder.tok

    def get_output_embeddings(self):
        return self.lm_head

    def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):
        h = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return CausalLMOutput(logits=self.lm_head(h))

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
        return {"input_ids": input_ids, "attention_mask": attention_mask}


def to_hf(decoder: TinyDecoder) -> TinyDecoderForCausalLM:
    """The ``transformers`` model that shares ``decoder``'s parameters (module doc)."""
    c = decoder.config
    cfg = TinyDecoderConfig(d_model=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads,
                            d_ff=c.d_ff, seed=c.seed, vocab_size=decoder.vocab,
                            max_len=decoder.max_len)  # fmt: skip
    return TinyDecoderForCausalLM(cfg, decoder)


def token_names(task: GridTask) -> list[str]:
    """The name of every token id of ``task`` (ids are list positions)."""
    names = [*MOVES, "<bos>", "<sep>", "<pad>"]
    names += [f"A{a}" for a in range(task.L + 1)]
    names += [f"C{i}" for i in range((task.L + 1) ** 2)]
    assert len(names) == task.vocab
    return names


def make_tokenizer(task: GridTask):
    """A ``PreTrainedTokenizerFast`` whose ids are the task's token ids (words split on spaces)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {n: i for i, n in enumerate(token_names(task))}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<bos>", eos_token="<sep>",
                                   pad_token="<pad>", unk_token="<pad>")  # fmt: skip


def prompt_text(prompts: Prompts, pid: int) -> str:
    """Prompt ``pid`` written in :func:`make_tokenizer`'s words."""
    names = token_names(prompts.task)
    return " ".join(names[int(t)] for t in prompts.tokens[pid])


def reward_function(prompts: Prompts):
    """A TRL reward function: 1.0 for a correct answer to prompt ``pid`` (a dataset column)."""
    import numpy as np

    L = prompts.task.L

    def correct(completion_ids=None, pid=None, **kwargs):
        out = []
        for ids, p in zip(completion_ids, pid, strict=True):
            mv = np.asarray(ids, dtype=np.int64)
            ok = len(mv) == L and bool((mv < 4).all())
            out.append(float(prompts.rewards(np.array([p]), mv[None])[0]) if ok else 0.0)
        return out

    correct.__name__ = "correct"
    return correct


def register_auto() -> None:
    """Register the config and model with ``transformers``' Auto classes (so that a saved
    checkpoint loads by path, as TRL loads its reference model when ``beta > 0``)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        AutoConfig.register(TinyDecoderConfig.model_type, TinyDecoderConfig)
        AutoModelForCausalLM.register(TinyDecoderConfig, TinyDecoderForCausalLM)
    except ValueError:  # already registered
        pass


def grpo_trainer(
    model: TinyDecoderForCausalLM,
    prompts: Prompts,
    ids,
    N: int,
    *,
    moves=None,
    output_dir: str,
    **config,
):
    """A ``trl.GRPOTrainer`` on ``model`` whose one batch is the prompts ``ids`` x ``N``
    completions: the dataset holds exactly these prompts, in order, unshuffled, so TRL's step
    sees the groups of :func:`fgrpo_theory.sequence.rl.rl_step` in the same order. With
    ``moves`` [B, N, L] (or a function returning them, called at every generation) the
    completions are these (TRL's ``rollout_func``), else TRL generates them itself
    (``model.generate``, temperature 1). ``config``: GRPOConfig fields (learning rate,
    ``loss_type``, ``scale_rewards``, ``beta``, ...). TRL's default ``bf16=True`` autocast is
    turned off (``bf16=False``): both sides compute in float32."""
    import numpy as np
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    ids = [int(i) for i in np.asarray(ids)]
    B, L = len(ids), prompts.task.L
    ds = Dataset.from_dict({"prompt": [prompt_text(prompts, i) for i in ids], "pid": ids})
    base = dict(
        per_device_train_batch_size=B * N, num_generations=N, max_completion_length=L,
        max_steps=1, report_to="none", use_cpu=True, shuffle_dataset=False, logging_steps=1,
        save_strategy="no", gradient_checkpointing=False, max_grad_norm=0.0, seed=0,
        disable_tqdm=True, temperature=1.0, top_k=0, dataloader_num_workers=0, bf16=False,
    )  # fmt: skip
    base.update(config)
    args = GRPOConfig(output_dir=output_dir, **base)
    rollout = None
    if moves is not None:
        want = [prompt_text(prompts, i) for i in ids for _ in range(N)]
        ptok = [[int(t) for t in prompts.tokens[i]] for i in ids for _ in range(N)]

        def rollout(texts, trainer):  # noqa: ARG001
            if list(texts) != want:
                raise ValueError("TRL asked for other prompts than the ones sampled")
            m = moves() if callable(moves) else moves
            return {"prompt_ids": ptok, "completion_ids": m.reshape(B * N, L).tolist(),
                    "logprobs": None}  # fmt: skip

    from transformers import PrinterCallback

    tr = GRPOTrainer(model=model, reward_funcs=reward_function(prompts), args=args,
                     train_dataset=ds, processing_class=make_tokenizer(prompts.task),
                     rollout_func=rollout)  # fmt: skip
    tr.remove_callback(PrinterCallback)  # no metrics dict printed at every log
    return tr
