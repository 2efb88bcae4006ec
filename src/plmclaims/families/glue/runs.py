"""The GLUE family's rule bodies: fine-tune one instance with one method on one task for one seed, score the dev split
(and keep the model: `finetuned`); linear CKA per layer between a pre-trained and a fine-tuned encoder (`cka`), and
one layer of it in the score-run layout (`cka-layer`)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ... import checkpoint, plan, runs
from ...data import glue, verify
from ...errors import UserError
from ...provenance import Run, atomic_save_npz
from ...stats import degenerate as degenerate_reason, document_index
from ...tiers import Instance

if TYPE_CHECKING:  # numpy is imported where the vectors are made, not when the rules load
    import numpy as np

log = logging.getLogger("plmclaims")


def load_glue(tier: dict, task: str, split: str, data_root: str | None) -> glue.GlueData:
    """A GLUE split from the task's source (the local layout, or the hub for a hub source or a task in its
    `hub_tasks`: verify.glue_source); dev is sampled only in test budgets."""
    source = verify.glue_source(tier, task)
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
    resume = checkpoint.for_run(run_spec)
    with Run(out, config, seed=run_spec.seed) as run:
        values, preds = training.finetune(model_path, run_spec.method, params, train, dev, budget, run_spec.seed,
                                          save_to=out.with_name("model") if save_model else None, resume=resume)
        run.values = values
        run.data_files.update({**train.files, **dev.files})
        atomic_save_npz(out.with_name("predictions.npz"), **preds)
    resume.complete()
    b = values["benchmarks"][run_spec.task]
    log.info("finetune %s %s %s seed %d: %s; trained %d of %d parameters (%.2f%%)", run_spec.instance, run_spec.method,
             run_spec.task, run_spec.seed, ", ".join(f"{k} {v:.2f}" for k, v in b.items() if k != "examples"),
             values["parameters"]["trainable"], values["parameters"]["total"], 100 * values["parameters"]["fraction"])


def copy_saved_twin(tier: dict, run_spec: plan.Run, twin: Path, resources: str, out: Path) -> None:
    """A finetune run whose `finetuned` twin (plan.saved_twin: the same spec, the same training, keeping its model) the
    workflow also runs: the twin's dev scores and predictions are this run's (test_peft_family checks that the two
    runs write the same ones), so they are copied rather than trained again. metrics.json is written as the run
    would write it, its provenance naming the twin it was copied from (`copied_from`)."""
    import json
    import shutil

    from ...provenance import atomic_write_json

    doc = json.loads(Path(twin).read_text())
    recorded = doc["provenance"]["config"]
    spec = recorded.get("run", {}).get("spec", {})
    if spec.get("kind") != "finetuned" or {k: v for k, v in spec.items() if k != "kind"} != {
            k: v for k, v in run_spec.spec.items() if k != "kind"}:
        raise UserError(f"{twin}: not the finetuned run of {run_spec!r} (another spec); rerun without --copy-of")
    config = {"run": run_spec.__dict__, "params": run_spec.params, "budget": tier["finetune"]["budget"],
              "tier": tier["name"], "model": runs.pretrained_path(tier, run_spec.instance, resources),
              "revision": runs.hub_revision(tier, run_spec.instance)}
    with Run(None, config, seed=run_spec.seed) as run:  # written below, with the twin named in its provenance
        run.data_files.update(doc["provenance"]["data_sha256"])
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name("predictions.npz.tmp")
        shutil.copyfile(Path(twin).with_name("predictions.npz"), tmp)
        tmp.replace(out.with_name("predictions.npz"))
    copied = {"run": str(twin), "key": Path(twin).parent.name, "wall_time_s": doc["provenance"].get("wall_time_s")}
    atomic_write_json(out, {"values": doc["values"], "provenance": {**run.provenance(), "copied_from": copied}})
    log.info("finetune %s %s %s seed %d: copied from its finetuned twin %s", run_spec.instance, run_spec.method,
             run_spec.task, run_spec.seed, twin)


def token_states(model_path: str, tokenizer, dev: glue.GlueData, max_length: int,
                 prompts: list[str] | None = None) -> tuple[list, "np.ndarray"]:
    """Every layer's vectors (embeddings = 0 to the top) of every non-padding token of the dev examples, encoded as
    fine-tuning saw them (pairs joined by the tokenizer, cut at the budget's max_length; for a causal LM its `prompts`,
    the lm-eval contexts it was trained on, without special tokens and cut from the left as lm.train cuts them): a
    list of (tokens, d) float32 arrays, one per layer, and each token's example index."""
    import numpy as np
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(model_path).eval()
    room = int(getattr(model.config, "max_position_embeddings", max_length) or max_length)
    if prompts is not None:
        tokenizer.truncation_side, tokenizer.padding_side = "left", "right"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
    layers, groups = None, []
    with torch.inference_mode():
        for start in range(0, len(dev), 32):
            idx = range(start, min(start + 32, len(dev)))
            a = [dev.text_a[i] for i in idx]
            b = [dev.text_b[i] for i in idx] if dev.text_b is not None else None
            if prompts is not None:
                enc = tokenizer([prompts[i] for i in idx], padding=True, truncation=True, add_special_tokens=False,
                                max_length=min(max_length, room), return_tensors="pt")
            else:
                enc = tokenizer(a, b, padding=True, truncation=True, max_length=min(max_length, room),
                                return_tensors="pt")
            hidden = model(**enc, output_hidden_states=True).hidden_states
            keep = enc["attention_mask"].bool()
            rows = [h[keep].float().numpy() for h in hidden]
            layers = [[r] for r in rows] if layers is None else [acc + [r] for acc, r in zip(layers, rows)]
            groups.append(np.repeat(np.fromiter(idx, int), keep.sum(1).numpy()))
    return [np.concatenate(rs) for rs in layers], np.concatenate(groups)


def cka(tier: dict, run_spec: plan.Run, data_root: str | None, resources: str, finetuned: Path, out: Path,
        threads: int | None = None) -> None:
    """Linear CKA per layer between the pre-trained instance and the model its `finetuned` run saved (model/ beside
    `finetuned`, its metrics.json), over the tokens of the task's scored dev examples; per-example jackknife
    pseudo-values (methods.cka.jackknife) in cka.npz beside metrics.json."""
    import json

    import numpy as np
    import torch
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from ...methods.cka import jackknife

    hf_logging.set_verbosity_error()
    if threads:
        torch.set_num_threads(threads)
    tuned = finetuned.with_name("model")
    if not (tuned / "config.json").exists():
        raise UserError(f"{tuned}: no saved model; the finetuned run that writes it ({finetuned}) did not finish: rerun it")
    causal = Instance.parse(run_spec.instance, tier).kind == "causal-lm"
    prompts = None
    if causal:  # fine-tuned by the lm-tasks family: its budget, and the dev sample lm-eval scored (lm.tasks)
        from ...lm.tasks import render
        from ...training import sample

        budget = tier["lm"]["budget"]
        dev = sample(glue.load_local(glue.local_root(tier["data"]["glue"], data_root), run_spec.task, "dev"),
                     tier["lm"].get("eval_limit"), 0)
        prompts = [render(run_spec.task, a, dev.text_b[i] if dev.text_b is not None else None)
                   for i, a in enumerate(dev.text_a)]
    else:
        budget = tier["finetune"]["budget"]
        dev = load_glue(tier, run_spec.task, "dev", data_root)
    pretrained = runs.pretrained_path(tier, run_spec.instance, resources)
    config = {"run": run_spec.spec, "key": run_spec.key, "tier": tier["name"], "pretrained": pretrained,
              "finetuned": str(tuned)}
    with Run(out, config, seed=run_spec.seed) as run:
        tokenizer = AutoTokenizer.from_pretrained(tuned)  # the pre-trained tokenizer, saved with the model
        max_length = int(budget.get("max_length", 128))
        before, groups = token_states(pretrained, tokenizer, dev, max_length, prompts)
        after, groups_after = token_states(str(tuned), tokenizer, dev, max_length, prompts)
        assert len(before) == len(after) and np.array_equal(groups, groups_after), "the two encoders differ in shape"
        arrays, layers = {"index": document_index(dev.text_a, dev.text_b)}, {}
        for layer, (x, y) in enumerate(zip(before, after)):
            full, _, pseudo = jackknife(x, y, groups)
            arrays[f"layer{layer}::pseudo"] = pseudo
            layers[layer] = {"cka": full, "jackknife": float(np.mean(pseudo))}
        tuned_values = json.loads(finetuned.read_text())["values"]
        run.values = {"layers": layers, "examples": len(dev), "tokens": int(len(groups)),
                      "finetuned_dev": tuned_values["benchmarks"], "finetuned_key": finetuned.parent.name}
        run.data_files.update(dev.files)
        atomic_save_npz(out.with_name("cka.npz"), **arrays)
    log.info("cka %s %s seed %d: %s", run_spec.instance, run_spec.task, run_spec.seed,
             " ".join(f"l{k} {v['cka']:.3f}" for k, v in layers.items()))


def cka_layer(tier: dict, run_spec: plan.Run, cka_metrics: Path, out: Path) -> None:
    """One layer of a cka run as a score run: pred = the examples' jackknife pseudo-values, gold 0 (the metric
    `mean` reads pred only), so the verdict bootstraps the jackknife estimate, paired across layers and runs."""
    import numpy as np

    layer, task = int(run_spec.layer), run_spec.task
    npz = np.load(cka_metrics.with_name("cka.npz"))
    name = f"layer{layer}::pseudo"
    if name not in npz.files:
        raise UserError(f"{cka_metrics.with_name('cka.npz')}: no layer {layer}; the encoder has layers 0-"
                        f"{sum(f.endswith('::pseudo') for f in npz.files) - 1}")
    pred = npz[name]
    config = {"run": run_spec.spec, "key": run_spec.key, "tier": tier["name"]}
    with Run(out, config, seed=run_spec.seed) as run:
        import json

        whole = json.loads(cka_metrics.read_text())["values"]["layers"][str(layer)]
        run.values = {"benchmarks": {task: {"mean": float(np.mean(pred)), "cka": whole["cka"], "examples": len(pred)}},
                      "layer": layer}
        why = degenerate_reason(pred)
        if why:
            run.values["degenerate"] = f"{task}: {why}"
        atomic_save_npz(out.with_name("predictions.npz"), **{
            f"{task}::pred": pred, f"{task}::gold": np.zeros(len(pred)), f"{task}::index": npz["index"],
            f"{task}::subsets": np.full(len(pred), task)})
