"""The task head of a sequence-classification model, which every method trains."""
from __future__ import annotations


def head_names(model) -> list[str]:
    """Top-level module names of the classification head ('classifier'; 'score' of decoder models; T5's
    'classification_head'), plus BERT's 'bert.pooler'."""
    names = [n for n, _ in model.named_children() if n in ("classifier", "score", "classification_head")]
    base = getattr(model, "base_model_prefix", "")
    if base and getattr(getattr(model, base, None), "pooler", None) is not None:
        names.append(f"{base}.pooler")
    return names


def peft_modules_to_save(model) -> list[str]:
    """The head as peft's modules_to_save names it (suffixes), so every method trains the same head."""
    return [n.rsplit(".", 1)[-1] for n in head_names(model)]


def head_parameters(model) -> set[int]:
    """ids of the task head's parameters, the model wrapped by peft or not: a parameter is the head's when a
    component of its dotted name is a head module's name (peft's modules_to_save copies sit under that name too)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = {n.rsplit(".", 1)[-1] for n in head_names(base)}
    return {id(p) for n, p in model.named_parameters() if names & set(n.split("."))}
