"""The transfer family's rule body: one frozen-transformer run on one generated task (per-item predictions in the
score-run layout, so the verdict bootstraps accuracy over the test items, paired across runs)."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ... import checkpoint, plan, runs
from ...data import synthetic
from ...errors import UserError
from ...provenance import Run, atomic_save_npz
from ...stats import degenerate, document_index
from ...tiers import Instance

log = logging.getLogger("plmclaims")


def transfer(tier: dict, run_spec: plan.Run, resources: str, out: Path, threads: int | None = None) -> None:
    import torch

    from ...methods import frozen_transfer

    if threads:
        torch.set_num_threads(threads)
    section, task = tier["transfer"], run_spec.task
    budget = section["budget"]
    given = section.get("tasks", {}).get(task)
    budget = {**budget, "steps": (given or {}).get("steps", budget["steps"])}
    data_seed = int(section.get("data_seed", 0))
    inst = Instance.parse(run_spec.instance, tier)
    config = {"run": run_spec.spec, "key": run_spec.key, "tier": tier["name"]}
    resume = checkpoint.for_run(run_spec)
    with Run(out, config, seed=run_spec.seed) as run:
        train = synthetic.generate(task, int(budget["train_examples"]), data_seed, "train", given)
        test = synthetic.generate(task, int(budget["test_examples"]), data_seed, "test", given)
        body, _, path = runs.load_encoder(tier, inst, resources)
        if "lr" not in run_spec.params:
            raise UserError(f"{tier['_path']}: field 'transfer.methods.frozen-transfer.lr' missing; the frozen "
                            "transfer needs a learning rate (the paper: 1e-3)")
        autocast = None
        if inst.kind == "causal-lm":  # a decoder's forward passes at its asset's precision (decoders.autocast)
            from functools import partial

            from ...decoders import autocast as decoder_autocast
            from ...encoders import best_device

            autocast = partial(decoder_autocast, best_device(), tier["assets"][inst.asset].get("precision"))
        values, arrays = frozen_transfer.train_and_score(body, train, test, budget, float(run_spec.params["lr"]),
                                                        int(run_spec.seed), autocast, resume)
        why = degenerate(arrays["pred"], arrays["losses"])
        run.values = {"benchmarks": {task: {"accuracy": values["accuracy"], "examples": values["items"]}},
                      "parameters": values.pop("parameters"), "model": path, **values}
        if why:  # constant predictions or a diverged loss: the verdict keeps the run out of the bootstrap
            run.values["degenerate"] = why
        n = len(arrays["gold"])
        atomic_save_npz(out.with_name("predictions.npz"), **{
            f"{task}::pred": arrays["pred"], f"{task}::gold": arrays["gold"],
            f"{task}::index": document_index(synthetic.item_ids(test, data_seed)), f"{task}::subsets": np.full(n, task)})
    resume.complete()
    p = run.values["parameters"]
    log.info("transfer %s %s seed %d: accuracy %.3f on %d items (loss %.3f -> %.3f); trained %d of %d parameters",
             run_spec.instance, task, run_spec.seed, values["accuracy"], n, values["loss_first"], values["loss_last"],
             p["trainable"], p["total"])
