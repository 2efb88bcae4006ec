"""Adapting a causal LM to a GLUE task on the same prompts lm-eval scores, deterministic for a seed.

The loss is the causal-LM loss on the target tokens only (the verbalised gold choice, with lm-eval's
leading delimiter); prompt and padding positions are masked with -100. The prompt/target split is
tokenised the way lm-eval's "hf" model does it (encode prompt + target, then prompt; the target is the
tail of the whole encoding, no special tokens), so training and scoring see the same tokens, except that
in training prompts longer than the budget's ``max_length`` are cut from the left (the target is always
kept) while lm-eval scores the whole prompt.

Methods (peft for all but full fine-tuning; the peft configs are built here for TaskType.CAUSAL_LM):
  prefix-tuning   ``virtual_tokens`` (10): key/value prefixes at every layer (methods.prefix_tuning)
  prompt-tuning   ``virtual_tokens`` (20): soft prompt at the input; random init by default, or
                  ``init_text`` (a string) to initialise from its token embeddings (Lester et al. 2021)
  lora            ``r`` (8), ``alpha`` (16), ``dropout`` (0.1), ``target_modules`` (q_proj,v_proj for
                  Llama-like models, c_attn for GPT-2)
  full-finetuning every weight
``lr`` in the method params overrides the budget's. PEFT methods save the adapter (peft's
save_pretrained, loadable by lm-eval with peft=<dir>); full fine-tuning saves model + tokenizer.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .. import methods
from ..data.glue import GlueData
from ..errors import UserError
from ..provenance import atomic_dir
from .tasks import training_examples

METHODS = ("prefix-tuning", "prompt-tuning", "lora", "full-finetuning")
LORA_TARGETS = {"gpt2": ["c_attn"], "gpt_neox": ["query_key_value"], "opt": ["q_proj", "v_proj"]}


def _prepare(model, method: str, params: dict, model_path: str):
    from peft import LoraConfig, PromptTuningConfig, PromptTuningInit, TaskType, get_peft_model

    if method == "full-finetuning":
        return model
    if method == "prefix-tuning":
        return methods.prepare("prefix-tuning", model, params)  # picks CAUSAL_LM for a model without a head
    if method == "prompt-tuning":
        text = params.get("init_text")
        config = PromptTuningConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=int(params.get("virtual_tokens", 20)),
                                    prompt_tuning_init=PromptTuningInit.TEXT if text else PromptTuningInit.RANDOM,
                                    prompt_tuning_init_text=text or None,
                                    tokenizer_name_or_path=model_path if text else None)
        return get_peft_model(model, config)
    if method == "lora":
        model_type = model.config.model_type
        targets = list(params.get("target_modules", LORA_TARGETS.get(model_type, ["q_proj", "v_proj"])))
        config = LoraConfig(task_type=TaskType.CAUSAL_LM, r=int(params.get("r", 8)), lora_alpha=int(params.get("alpha", 16)),
                            lora_dropout=float(params.get("dropout", 0.1)), target_modules=targets,
                            fan_in_fan_out=model_type == "gpt2")
        return get_peft_model(model, config)
    raise UserError(f"lm training method {method!r} unknown; allowed values: {', '.join(METHODS)}")


def encode(tokenizer, prompt: str, target: str, max_length: int) -> tuple[list[int], list[int]]:
    """(input ids, labels) for one example, split as lm-eval splits context and continuation."""
    n_spaces = len(prompt) - len(prompt.rstrip())  # lm-eval moves trailing context spaces to the target
    if n_spaces:
        prompt, target = prompt[:-n_spaces], prompt[-n_spaces:] + target
    # lm-eval's hf model encodes causal-LM requests without special tokens; so do we
    whole = tokenizer(prompt + target, add_special_tokens=False)["input_ids"]
    ctx = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    cont = whole[len(ctx):]
    if not cont:
        raise UserError(f"target {target!r} encodes to no tokens after prompt; check the task template")
    keep = max(max_length - len(cont), 1)
    ctx = ctx[-keep:]
    return ctx + cont, [-100] * len(ctx) + cont


def _batch(pairs, pad_id: int):
    import torch

    width = max(len(ids) for ids, _ in pairs)
    ids = torch.full((len(pairs), width), pad_id, dtype=torch.long)
    labels = torch.full((len(pairs), width), -100, dtype=torch.long)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for row, (x, y) in enumerate(pairs):
        ids[row, :len(x)] = torch.tensor(x)
        labels[row, :len(y)] = torch.tensor(y)
        mask[row, :len(x)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def train(model_path: str, method: str, params: dict, train: GlueData, budget: dict, seed: int, out_dir: Path,
          progress: bool = True, resume=None) -> dict:
    """Train `method` on `train` under `budget` (epochs, batch_size, lr, max_length, max_train, and the recipe's
    optimizer, weight_decay, warmup_ratio and schedule: training.train_epochs); save to `out_dir`. `resume`: the
    run's resume state (checkpoint.Resume; training.train_epochs)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from ..training import peak_memory_mb, sample, train_epochs  # here, so importing METHODS stays light (no scipy)

    if method not in METHODS:
        raise UserError(f"lm training method {method!r} unknown; allowed values: {', '.join(METHODS)}")
    hf_logging.set_verbosity_error()
    torch.manual_seed(seed)
    np.random.seed(seed)
    t0 = time.time()
    train = sample(train, budget.get("max_train"), seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad_id is None:
        raise UserError(f"{model_path}: tokenizer has neither a pad nor an eos token; set one in the model folder")
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    model.config.use_cache = False  # no KV cache in training; peft's prefixes come in as past_key_values
    model = _prepare(model, method, params, model_path)
    counts = methods.count_parameters(model)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    bs, epochs, max_len = int(budget.get("batch_size", 8)), int(budget.get("epochs", 1)), int(budget.get("max_length", 128))
    lr = float(params.get("lr", budget.get("lr", 1e-3 if method != "full-finetuning" else 2e-5)))
    examples = [encode(tokenizer, p, t, max_len) for p, t in training_examples(train, train.task)]
    steps = epochs * -(-len(examples) // bs)

    def batches(order):
        for start in range(0, len(order), bs):
            yield _batch([examples[i] for i in order[start:start + bs]], pad_id)

    losses = train_epochs(model, batches, len(examples), epochs, steps, lr, seed, device,
                          f"{method} {train.task} seed {seed}", progress, recipe=budget, resume=resume)
    train_wall = time.time() - t0
    out_dir = Path(out_dir)
    with atomic_dir(out_dir) as tmp:
        if method == "full-finetuning":
            model.config.use_cache = True
            tokenizer.save_pretrained(str(tmp))
        model.save_pretrained(str(tmp))
    peak = peak_memory_mb(device)
    return {"parameters": counts, "train_examples": len(examples), "steps": steps, "lr": lr,
            "loss_last": float(np.mean(losses[-20:])) if losses else float("nan"), "loss_history": losses,
            "peak_memory_mb": round(peak, 1), "train_wall_s": round(train_wall, 2),
            "saved": "model" if method == "full-finetuning" else "adapter", "device": device, "out_dir": str(out_dir)}
