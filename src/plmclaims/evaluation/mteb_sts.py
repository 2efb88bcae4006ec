"""MTEB-protocol STS through the `mteb` package, with our own (local or hub) data injected.

MTEB scores each task as one correlation over all its pairs (the 'all' aggregation), on raw
text, with cosine similarity; its SICK-R is all 9927 pairs. We hand mteb the task object with its
dataset already loaded, so it never reaches for the hub, and pass `cache=None`: a result cache keyed
by model name is how one model's score gets returned for another.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..data.sts import StsData

MTEB_TASK_NAMES = {"STS12": "STS12", "STS13": "STS13", "STS14": "STS14", "STS15": "STS15", "STS16": "STS16",
                   "STSBenchmark": "STSBenchmark", "SICK-R": "SICK-R"}


class VectorEncoder:
    """An mteb encoder that returns vectors from a function of a list of texts.

    The name must be unique per (model, pooling, post-processing): mteb identifies results by it.
    """

    def __init__(self, name: str, encode_fn: Callable[[list[str]], np.ndarray], dim: int):
        from mteb.models.model_meta import ModelMeta, ScoringFunction

        self.encode_fn = encode_fn
        self.mteb_model_meta = ModelMeta.create_empty(
            {"name": f"plmclaims/{name}", "revision": "local", "embed_dim": dim, "framework": ["PyTorch"],
             "similarity_fn_name": ScoringFunction.COSINE, "modalities": ["text"]})

    def encode(self, inputs, *, task_metadata=None, hf_split=None, hf_subset=None, prompt_type=None, **kwargs) -> np.ndarray:
        texts = [t for batch in inputs for t in batch["text"]]
        return np.asarray(self.encode_fn(texts), dtype=np.float32)

    def similarity(self, a, b):
        import torch

        a, b = torch.as_tensor(np.asarray(a)), torch.as_tensor(np.asarray(b))
        return torch.nn.functional.normalize(a, dim=-1) @ torch.nn.functional.normalize(b, dim=-1).T

    def similarity_pairwise(self, a, b):
        import torch

        a, b = torch.as_tensor(np.asarray(a)), torch.as_tensor(np.asarray(b))
        return torch.nn.functional.cosine_similarity(a, b, dim=-1)


def task_with_data(data: StsData):
    """The mteb task for `data.name`, its test split replaced by our loaded pairs."""
    import mteb
    from datasets import Dataset, DatasetDict

    task = mteb.get_task(MTEB_TASK_NAMES[data.name])
    ds = Dataset.from_dict({"sentence1": data.sentence1, "sentence2": data.sentence2, "score": data.scores.tolist()})
    task.dataset = DatasetDict({"test": ds})
    task.data_loaded = True
    return task


def evaluate(model, datasets: list[StsData], batch_size: int = 64, progress: bool = False) -> dict[str, dict]:
    """Run mteb.evaluate on the injected tasks; returns per-benchmark main score (cosine Spearman) x 100."""
    import mteb

    tasks = [task_with_data(d) for d in datasets]
    result = mteb.evaluate(model, tasks, cache=None, encode_kwargs={"batch_size": batch_size},
                           show_progress_bar=progress, overwrite_strategy="always")
    out = {}
    for task_result, data in zip(result.task_results, datasets):
        scores = task_result.scores["test"][0]
        out[data.name] = {"cosine_spearman": float(scores["cosine_spearman"]) * 100,
                          "main_score": float(scores["main_score"]) * 100, "pairs": len(data)}
    return out
