"""Zero-shot multiple-choice scoring of a causal LM (optionally with a peft adapter) with lm-evaluation-harness.

Offline by construction: the hub/transformers/datasets offline switches are set before lm-eval or
`datasets` is imported, the tasks come from `tasks.write_tasks` (local JSON files, their `datasets`
cache next to them), and the task manager is given only that folder (no built-in task index).
The per-document predictions are recovered from lm-eval's logged samples (argmax of the per-choice
log-likelihoods), so the paired bootstrap can use them; their accuracy is checked against the
harness's own ``acc``.

Soft prompts (peft prompt tuning) make the model return logit rows for the virtual tokens too;
lm-eval's "hf" model already offsets its continuation slice by the extra rows (checked in the tests
against a hand-computed log-likelihood), so every adapter runs through lm-eval's own "hf" model.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..stats import degenerate
from .tasks import read_docs, task_name

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1"}


def set_offline() -> None:
    """Switch the hub libraries to offline mode for the rest of this process (a workflow job's CLI process)."""
    os.environ.update(OFFLINE_ENV)


@contextlib.contextmanager
def offline():
    """Offline for the duration of one evaluation, then as before: a caller's process (a test session, a notebook)
    keeps its own settings. Libraries already imported read their flag at import time, so those are switched too."""
    import sys

    saved_env = {k: os.environ.get(k) for k in OFFLINE_ENV}
    flags = [(sys.modules.get("huggingface_hub.constants"), "HF_HUB_OFFLINE"),
             (sys.modules.get("datasets.config"), "HF_HUB_OFFLINE"),
             (sys.modules.get("datasets.config"), "HF_DATASETS_OFFLINE")]
    saved_flags = [(m, name, getattr(m, name)) for m, name in flags if m is not None and hasattr(m, name)]
    os.environ.update(OFFLINE_ENV)
    for m, name, _ in saved_flags:
        setattr(m, name, True)
    try:
        yield
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for m, name, v in saved_flags:
            setattr(m, name, v)


def _adapter_type(adapter: str) -> str:
    path = Path(adapter) / "adapter_config.json"
    if not path.exists():
        raise UserError(f"{path}: not found; `adapter` must be a folder written by peft's save_pretrained")
    return json.loads(path.read_text()).get("peft_type", "")


def evaluate(model_path: str, task_dir: Path, tasks: list[str], adapter: str | None = None, batch_size: int = 16,
             limit: int | None = None) -> tuple[dict, dict]:
    """Run lm-eval on the GLUE `tasks` written in `task_dir`; return (values, predictions) in doc order."""
    with offline():
        return _evaluate(model_path, task_dir, tasks, adapter, batch_size, limit)


def _evaluate(model_path: str, task_dir: Path, tasks: list[str], adapter: str | None, batch_size: int,
              limit: int | None) -> tuple[dict, dict]:
    import torch
    import lm_eval
    from lm_eval.tasks import TaskManager

    task_dir = Path(task_dir)
    names = {task: task_name(task) for task in tasks}
    for task, name in names.items():
        if not (task_dir / f"{name}.yaml").exists():
            raise UserError(f"{task_dir / (name + '.yaml')}: lm task not found; write it first (write_tasks)")
    model_args = {"pretrained": str(model_path), "dtype": "float32"}
    if adapter:
        _adapter_type(adapter)  # a clear error for a folder that is not a peft adapter
        model_args["peft"] = str(adapter)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    manager = TaskManager(include_path=str(task_dir), include_defaults=False)
    results = lm_eval.simple_evaluate(model="hf", model_args=model_args, tasks=list(names.values()), num_fewshot=0,
                                      batch_size=batch_size, device=device, limit=limit, log_samples=True,
                                      task_manager=manager, bootstrap_iters=0, verbosity="WARNING")
    version = getattr(lm_eval, "__version__", None)
    if version is None:
        from importlib.metadata import version as _v
        version = _v("lm_eval")
    benchmarks, predictions, doc_index, degenerate_tasks = {}, {}, {}, []
    for task, name in names.items():
        samples = sorted(results["samples"][name], key=lambda s: s["doc_id"])
        docs = read_docs(task_dir, task)
        pred = np.asarray([int(np.argmax([ll for ll, _ in s["filtered_resps"]])) for s in samples], dtype=np.float64)
        gold = np.asarray([int(s["target"]) for s in samples], dtype=np.float64)
        for s, g in zip(samples, gold):
            if docs[s["doc_id"]]["label"] != int(g) or docs[s["doc_id"]]["idx"] != s["doc"]["idx"]:
                raise RuntimeError(f"{name}: lm-eval doc {s['doc_id']} does not match {task_dir}/{name}.jsonl")
        acc = float(np.mean(pred == gold))
        harness = float(results["results"][name]["acc,none"])
        if abs(acc - harness) > 1e-9:
            raise RuntimeError(f"{name}: accuracy from logged samples {acc} != lm-eval acc {harness}")
        benchmarks[task] = {"accuracy": acc, "examples": len(samples), "lm_eval_acc": harness, "lm_eval_version": version}
        doc_index[task] = [int(s["doc"]["idx"]) for s in samples]
        predictions[f"{task}::pred"] = pred
        predictions[f"{task}::gold"] = gold
        predictions[f"{task}::subsets"] = np.asarray([task] * len(samples))
        predictions[f"{task}::index"] = np.asarray(doc_index[task], dtype=np.int64)  # verdicts pair runs on GLUE's idx
        why = degenerate(pred)  # e.g. a zero-shot model that always answers the same label
        if why:
            degenerate_tasks.append(f"{task}: {why}")
    cfg = results.get("config", {})
    keep = ("model", "model_args", "model_num_parameters", "model_dtype", "batch_size", "device", "limit",
            "random_seed", "numpy_seed", "torch_seed", "fewshot_seed")
    config = {k: cfg[k] for k in keep if k in cfg}
    config["tasks"] = {name: results.get("configs", {}).get(name, {}) for name in names.values()}
    config["n-shot"] = {name: results.get("n-shot", {}).get(name) for name in names.values()}
    values = {"benchmarks": benchmarks, "lm_eval_config": config, "doc_index": doc_index}
    if degenerate_tasks:
        values["degenerate"] = "; ".join(degenerate_tasks)
    return values, predictions
