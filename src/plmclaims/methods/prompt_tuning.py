"""Prompt tuning (Lester et al. 2021, arXiv 2104.08691) from `peft`: trained soft-prompt embeddings at the input only."""
from __future__ import annotations

from .heads import peft_modules_to_save


def prepare(model, params: dict):
    from peft import PromptTuningConfig, PromptTuningInit, TaskType, get_peft_model

    config = PromptTuningConfig(task_type=TaskType.SEQ_CLS, num_virtual_tokens=int(params.get("virtual_tokens", 20)),
                                prompt_tuning_init=PromptTuningInit.RANDOM)
    config.modules_to_save = peft_modules_to_save(model)  # classifier and pooler, as for every other method
    return get_peft_model(model, config)
