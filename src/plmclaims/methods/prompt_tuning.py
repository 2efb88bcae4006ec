"""Prompt tuning (Lester et al. 2021, arXiv 2104.08691): trained soft-prompt embeddings at the input only.

Encoder models take `peft`'s prompt tuning. An encoder-decoder (T5, the paper's own model) cannot: peft passes
`inputs_embeds` in place of `input_ids`, and T5ForSequenceClassification needs `input_ids` (it builds the decoder's
input from them and reads the decoder's state at their last </s>), so it refuses. There the soft prompt is
prepended to the encoder's input as in the paper, by a hook on the encoder-decoder's forward: the text's ids still
reach the decoder and the head, and the encoder (and the decoder's cross-attention) sees [prompt; text].
"""
from __future__ import annotations

from .heads import head_names, peft_modules_to_save


def prepare(model, params: dict):
    virtual_tokens = int(params.get("virtual_tokens", 20))
    if getattr(model.config, "is_encoder_decoder", False):
        return _encoder_prompt(model, virtual_tokens)
    from peft import PromptTuningConfig, PromptTuningInit, TaskType, get_peft_model

    config = PromptTuningConfig(task_type=TaskType.SEQ_CLS, num_virtual_tokens=virtual_tokens,
                                prompt_tuning_init=PromptTuningInit.RANDOM)
    config.modules_to_save = peft_modules_to_save(model)  # classifier and pooler, as for every other method
    return get_peft_model(model, config)


def _encoder_prompt(model, virtual_tokens: int):
    """`model` with a trained soft prompt (model.soft_prompt, initialised as peft's RANDOM init: nn.Embedding's
    N(0, 1)) before the encoder's input; everything else frozen but the classification head."""
    import torch

    base = getattr(model, model.base_model_prefix)  # T5ForSequenceClassification.transformer: a T5Model
    model.soft_prompt = torch.nn.Embedding(virtual_tokens, base.get_input_embeddings().embedding_dim)
    heads = head_names(model)
    for name, p in model.named_parameters():
        p.requires_grad = name.startswith("soft_prompt.") or any(name.startswith(h + ".") for h in heads)

    def prepend(module, args, kwargs):
        input_ids = args[0] if args else kwargs.get("input_ids")
        if input_ids is None or kwargs.get("encoder_outputs") is not None:
            return None
        embeds = module.get_input_embeddings()(input_ids)
        prompt = model.soft_prompt.weight.to(embeds.dtype).unsqueeze(0).expand(len(input_ids), -1, -1)
        mask = kwargs.get("attention_mask")
        mask = torch.ones_like(input_ids) if mask is None else mask
        ones = torch.ones(len(input_ids), virtual_tokens, dtype=mask.dtype, device=mask.device)
        # decoder_input_ids were already built from the text's ids by the caller; the longer mask also reaches the
        # decoder's cross-attention over the encoder's [prompt; text] states
        return (), {**kwargs, "input_ids": None, "inputs_embeds": torch.cat([prompt, embeds], 1),
                    "attention_mask": torch.cat([ones, mask], 1)}

    base.register_forward_pre_hook(prepend, with_kwargs=True)
    return model
