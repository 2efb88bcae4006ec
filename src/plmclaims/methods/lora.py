"""LoRA (Hu et al. 2021, arXiv 2106.09685) from `peft`: low-rank updates B A on the attention projections.

Defaults follow the paper's GLUE setup: rank 8, alpha 16 (peft scales by alpha / r), on query and value.
The classification head is trained as well (peft's modules_to_save for sequence classification).
"""
from __future__ import annotations

from .heads import peft_modules_to_save


def prepare(model, params: dict):
    from peft import LoraConfig, TaskType, get_peft_model

    config = LoraConfig(task_type=TaskType.SEQ_CLS, r=int(params.get("r", 8)), lora_alpha=int(params.get("alpha", 16)),
                        lora_dropout=float(params.get("dropout", 0.1)),
                        target_modules=list(params.get("target_modules", ["query", "value"])))
    config.modules_to_save = peft_modules_to_save(model)  # classifier and pooler, as for every other method
    return get_peft_model(model, config)
