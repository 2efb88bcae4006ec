"""The lm-tasks family's rule bodies: generate the lm-eval tasks from the local GLUE files, train a causal LM with one
method on one task, and score it (or the base model, zero-shot) with lm-eval."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ... import checkpoint, plan, runs
from ...data import glue
from ...errors import UserError
from ...provenance import Run, atomic_save_npz
from ...stats import degenerate as degenerate_reason
from ..glue.runs import load_glue
from .plan import lm_tasks_dir


def lm_tasks(tier: dict, tasks: list[str], data_root: str | None, out_dir: Path) -> None:
    """Write lm-eval task YAMLs and their JSONL docs from the local GLUE dev files (nothing is fetched)."""
    from ...lm import tasks as lm_tasks_mod

    source = tier["data"].get("glue", {})
    if source.get("source") != "local":
        raise UserError(f"{tier['_path']}: field 'data.glue.source': the lm-eval tasks are generated from local GLUE "
                        "files; allowed values: local")
    root = str(glue.local_root(source, data_root))  # the folder data.verify checked
    with Run(out_dir / "tasks.json", {"tasks": tasks, "eval_limit": tier["lm"].get("eval_limit"), "tier": tier["name"]}) as run:
        info = lm_tasks_mod.write_tasks(root, tasks, out_dir, limit=tier["lm"].get("eval_limit"), seed=0)
        run.values = info
        run.data_files.update(info.get("sources", {}))


def lm_train(tier: dict, run_spec: plan.Run, params: dict, data_root: str | None, resources: str, out_dir: Path,
             threads: int | None = None) -> None:
    """PEFT (or full fine-tuning) of the causal LM on one task's train split, in the lm-eval prompt format."""
    import torch

    from ...lm import train as lm_train_mod

    if threads:
        torch.set_num_threads(threads)
    budget = tier["lm"]["budget"]
    train = load_glue(tier, run_spec.task, "train", data_root)
    model_path = runs.pretrained_path(tier, run_spec.instance, resources)
    config = {"run": run_spec.__dict__, "params": params, "budget": budget, "tier": tier["name"], "model": model_path,
              "revision": runs.hub_revision(tier, run_spec.instance)}
    resume = checkpoint.for_run(run_spec)
    with Run(out_dir.with_name("train.json"), config, seed=run_spec.seed) as run:
        run.values = lm_train_mod.train(model_path, run_spec.method, params, train, budget, run_spec.seed, out_dir,
                                        resume=resume)
        run.data_files.update(train.files)
    resume.complete()


def lm_eval(tier: dict, run_spec: plan.Run, resources: str, results: str, out: Path, threads: int | None = None) -> None:
    """Score the base model, or the base model with a trained adapter (peft=), with lm-eval on one generated task."""
    import torch

    from ...lm import evaluate as lm_evaluate

    if threads:
        torch.set_num_threads(threads)
    base = runs.pretrained_path(tier, run_spec.instance, resources)
    trained = Path(run_spec.dir(results)) / "model"
    train_info = {}
    model_path, adapter = base, None
    if run_spec.method != "zero-shot":
        train_info = json.loads(trained.with_name("train.json").read_text())["values"]
        if train_info.get("saved") == "model":
            model_path = str(trained)
        else:
            adapter = str(trained)
    task_dir = Path(lm_tasks_dir(results, run_spec))
    config = {"run": run_spec.__dict__, "model": model_path, "adapter": adapter, "tier": tier["name"],
              "eval_limit": tier["lm"].get("eval_limit"), "revision": runs.hub_revision(tier, run_spec.instance)}
    with Run(out, config, seed=run_spec.seed) as run:
        values, preds = lm_evaluate.evaluate(model_path, task_dir, [run_spec.task], adapter=adapter,
                                             batch_size=int(tier["lm"].get("eval_batch_size", 16)))
        for row in values["benchmarks"].values():
            row["accuracy"] *= 100  # the scale of every other run's metrics.json; lm_eval_acc stays the harness's own
        if run_spec.method == "zero-shot":
            values["parameters"] = _zero_shot_counts(model_path)
        else:
            values["parameters"] = train_info["parameters"]
            values.update({k: train_info[k] for k in ("train_examples", "steps", "loss_last", "peak_memory_mb", "train_wall_s")
                           if k in train_info})
            losses = train_info.get("loss_history") or []
            why = degenerate_reason(preds[f"{run_spec.task}::pred"], losses) if losses else None
            if why and not values.get("degenerate"):  # NaN or diverged training: verdicts keep the run out
                values["degenerate"] = f"{run_spec.task}: {why}"
        run.values = values
        run.data_files.update(json.loads((task_dir / "tasks.json").read_text())["provenance"]["data_sha256"])
        atomic_save_npz(out.with_name("predictions.npz"), **preds)


def _zero_shot_counts(model_path: str) -> dict:
    """A zero-shot run trains nothing: 0 of the model's parameters."""
    from safetensors import safe_open

    files = sorted(Path(model_path).glob("*.safetensors"))
    if not files:
        raise UserError(f"{model_path}: no *.safetensors weights to count; the model must be a local folder "
                        "(prefetch hub models with 'plmclaims prefetch')")
    total = 0
    for f in files:
        with safe_open(str(f), "pt") as st:
            for k in st.keys():
                total += int(np.prod(st.get_slice(k).get_shape()))
    return {"trainable": 0, "total": total, "fraction": 0.0}
