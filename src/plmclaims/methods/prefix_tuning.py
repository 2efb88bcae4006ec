"""Prefix tuning (Li & Liang 2021, arXiv 2101.00190) from `peft`: trained key/value prefixes at every layer.

peft 0.21 injects the prefixes through the model's `past_key_values` argument. Causal LMs (the
method's original setting, GPT-2) still take it; BERT-style encoders in transformers 5 renamed it
to `cache`, and peft then refuses them. For encoders we stop with that reason instead of silently
running another method; the prefix-tuning claim runs on the causal-LM variant.
"""
from __future__ import annotations

import inspect

from ..errors import UserError
from .heads import peft_modules_to_save


def prepare(model, params: dict):
    from peft import PrefixTuningConfig, TaskType, get_peft_model

    task = TaskType.SEQ_CLS if hasattr(model, "classifier") or hasattr(model, "score") else TaskType.CAUSAL_LM
    backbone = getattr(model, getattr(model, "base_model_prefix", ""), model)
    accepts = lambda m: "past_key_values" in inspect.signature(m.forward).parameters  # noqa: E731
    if task == TaskType.SEQ_CLS and not accepts(model) and not accepts(backbone):  # peft's own check, made explicit
        raise UserError(f"prefix tuning: peft injects prefixes through past_key_values, which {type(backbone).__name__} "
                        "does not accept in this transformers version; run prefix tuning on a causal LM (lm-tasks family)")
    config = PrefixTuningConfig(task_type=task, num_virtual_tokens=int(params.get("virtual_tokens", 10)),
                                prefix_projection=bool(params.get("projection", False)),
                                encoder_hidden_size=int(params.get("projection_hidden", model.config.hidden_size)))
    if task == TaskType.SEQ_CLS:
        config.modules_to_save = peft_modules_to_save(model)
    return get_peft_model(model, config)
