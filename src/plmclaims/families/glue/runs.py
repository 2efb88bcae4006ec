"""The GLUE family's rule body: fine-tune one instance with one method on one task for one seed, score the dev split."""
from __future__ import annotations

import logging
from pathlib import Path

from ... import plan, runs
from ...data import glue
from ...errors import UserError
from ...provenance import Run, atomic_save_npz

log = logging.getLogger("plmclaims")


def load_glue(tier: dict, task: str, split: str, data_root: str | None) -> glue.GlueData:
    """A GLUE split from the tier's source (local layout or the hub); dev is sampled only in test budgets."""
    source = tier["data"].get("glue")
    if source is None:
        raise UserError(f"{tier['_path']}: field 'data.glue' missing; the glue family needs a GLUE source (local or hub)")
    if source["source"] == "hub":
        data = glue.load_hub(task, split)
    else:
        root = str(glue.local_root(source, data_root))  # the folder data.verify checked
        data = glue.load_local(root, task, split)
    if split == "dev":
        from ...training import sample

        # the same dev examples for every run (seed 0), so runs stay paired for the bootstrap
        data = sample(data, tier.get("finetune", {}).get("budget", {}).get("max_dev"), 0)
    return data


def finetune(tier: dict, run_spec: plan.Run, params: dict, data_root: str | None, resources: str, out: Path,
             threads: int | None = None, save_model: bool = False) -> None:
    """Fine-tune one instance with one method on one GLUE task for one seed; score the dev split. With save_model
    (a `finetuned` run), also save the trained model in model/ beside metrics.json (training.save_model)."""
    import torch

    from ... import training

    if threads:
        torch.set_num_threads(threads)
    budget = tier["finetune"]["budget"]
    train = load_glue(tier, run_spec.task, "train", data_root)
    dev = load_glue(tier, run_spec.task, "dev", data_root)
    model_path = runs.pretrained_path(tier, run_spec.instance, resources)
    config = {"run": run_spec.__dict__, "params": params, "budget": budget, "tier": tier["name"], "model": model_path,
              "revision": runs.hub_revision(tier, run_spec.instance)}
    with Run(out, config, seed=run_spec.seed) as run:
        values, preds = training.finetune(model_path, run_spec.method, params, train, dev, budget, run_spec.seed,
                                          save_to=out.with_name("model") if save_model else None)
        run.values = values
        run.data_files.update({**train.files, **dev.files})
        atomic_save_npz(out.with_name("predictions.npz"), **preds)
    b = values["benchmarks"][run_spec.task]
    log.info("finetune %s %s %s seed %d: %s; trained %d of %d parameters (%.2f%%)", run_spec.instance, run_spec.method,
             run_spec.task, run_spec.seed, ", ".join(f"{k} {v:.2f}" for k, v in b.items() if k != "examples"),
             values["parameters"]["trainable"], values["parameters"]["total"], 100 * values["parameters"]["fraction"])
