"""The contrastive family's rule body: train one objective on the tier's corpus (plmclaims.methods.contrastive.train,
one loop for every objective), select the checkpoint on STS-B dev, and score the STS test sets with it in the sts
family's score-run layout (metrics.json per benchmark, predictions.npz per pair), so verdicts pair it with any score
run of the same sentences. The training record (the STS-B dev history, the selected step, steps per second, peak
memory, sentences seen, the budget) sits beside the scores in metrics.json."""
from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from ... import checkpoint, plan, runs
from ...data import sts
from ...errors import UserError
from ...evaluation import senteval
from ...provenance import Run
from ...tiers import Instance
from ..sts.runs import _subsample, load_benchmarks, record_scores, union_sentences

log = logging.getLogger("plmclaims")
EVALUATOR = "senteval"
# recipe parameters that name a tier asset (the plan's generator_view and base_encoder_view put it in the run's view):
# the run hands the objective that asset's folder
ASSET_PARAMS = ("generator", "base_encoder")


def schedule(budget: dict, corpus, objective: str) -> dict:
    """The budget in the steps the training loop counts: `epochs` over the corpus's training examples (sentences, or
    documents for an objective that reads documents; the last short batch of an epoch is dropped, as train.batches
    does) and `steps` as a cap where both are given; `warmup_ratio` of those steps as `warmup`."""
    from ...methods.contrastive import get

    out = dict(budget)
    epochs = out.pop("epochs", None)
    if epochs is not None:
        n = len(corpus.documents if get(objective).INPUT == "documents" else corpus.sentences)
        steps = int(epochs) * max(1, n // int(out["batch_size"]))
        out["steps"] = min(steps, int(out["steps"])) if "steps" in out else steps
    ratio = out.pop("warmup_ratio", None)
    if ratio is not None:
        out["warmup"] = int(round(float(ratio) * out["steps"]))
    return out


def load_dev(tier: dict, form: str, data_root: str | None) -> sts.StsData:
    """STS-B dev in the claim's text form (checkpoint selection; never a test set), sampled like the test sets."""
    source = tier["data"][sts.SOURCE_OF_EVALUATOR[EVALUATOR]]
    return _subsample(sts.load(source, "STSBenchmark", form, "dev", data_root), tier["data"].get("max_pairs"))


def transductive_corpus(datasets: list[sts.StsData]):
    """ConSERT's transductive setting: the unlabelled sentences of the STS test sets themselves (gold never read)."""
    from ...data.sentences import Corpus

    sents = list(dict.fromkeys(s for d in datasets for s in d.sentences()))
    return Corpus(sentences=sents, documents=[sents], provenance={"source": "STS test sentences (transductive)",
                                                                  "sentences": len(sents)})


def model_path(tier: dict, inst: Instance, resources: str, scratch: Path) -> tuple[str, bool]:
    """Where the objective loads its encoder from, and whether to draw random weights. A micro-BERT twin has no
    checkpoint of its own: its folder is the asset's architecture (from the tier) beside its tokenizer."""
    path = runs.model_source(tier, inst, resources)
    if not (inst.kind == "pretrain-mlm" and inst.random):
        return path, inst.random
    from transformers import AutoTokenizer

    from ...models.microbert import bert_config

    tok = AutoTokenizer.from_pretrained(path)
    tok.save_pretrained(scratch)
    bert_config(tier["assets"][inst.asset]["model"], len(tok)).save_pretrained(scratch)
    return str(scratch), True


def _corpus(tier: dict, datasets: list[sts.StsData], transductive: bool):
    from ...data.sentences import load_corpus

    if transductive:
        return transductive_corpus(datasets)
    try:
        return load_corpus(tier["contrastive"]["corpus"])
    except KeyError as err:
        raise UserError(f"{tier['_path']}: field 'contrastive.corpus': {err.args[0]}") from None


def evaluate_released(objective: str, path: str, params: dict, dev: sts.StsData, budget: dict) -> dict:
    """A released checkpoint with its objective's test pooling: no training step, the STS-B dev score recorded like a
    trained run's step 0 (so the figure and the verdict read it alike)."""
    from ...methods.contrastive import get
    from ...methods.contrastive.train import dev_spearman

    model = get(objective).Objective(path, params, 0).eval()
    rho = dev_spearman(model, dev, max(64, budget["batch_size"]), budget.get("eval_max_length", budget["max_length"]))
    return {"objective": objective, "history": [{"step": 0, "stsb_dev_spearman": rho}], "best_step": 0,
            "best_spearman": rho, "sentences_seen": 0, "budget": {**budget, "steps": 0},
            "objective_params": model.params, "model": model}


def contrastive(tier: dict, run_spec: plan.Run, data_root: str | None, resources: str, out: Path,
                threads: int | None = None) -> None:
    import torch

    from ...encoders import best_device
    from ...methods.contrastive import train as contrastive_train

    if threads:
        torch.set_num_threads(threads)
    section = tier["contrastive"]
    inst = Instance.parse(run_spec.instance, tier)
    params = dict(run_spec.params)
    released, transductive, lr = params.pop("released", False), params.pop("transductive", False), params.pop("lr", None)
    named = {k: params[k] for k in ASSET_PARAMS if params.get(k)}
    for key, asset in named.items():  # DiffCSE's generator, RankEncoder's base encoder: where the tier loads them from
        params[key] = runs.model_source(tier, Instance.parse(asset, tier), resources)
    budget = {**section["budget"], **({"lr": float(lr)} if lr is not None else {})}
    config = {"run": run_spec.spec, "key": run_spec.key, "tier": tier["name"]}
    resume = checkpoint.for_run(run_spec)
    with Run(out, config, seed=run_spec.seed) as run, tempfile.TemporaryDirectory() as scratch:
        datasets = load_benchmarks(tier, EVALUATOR, run_spec.form, data_root)
        dev = load_dev(tier, run_spec.form, data_root)
        path, random = model_path(tier, inst, resources, Path(scratch))
        try:
            if released:
                result = evaluate_released(run_spec.method, path, params, dev, budget)
            else:
                corpus = _corpus(tier, datasets, transductive)
                budget = schedule(budget, corpus, run_spec.method)
                result = contrastive_train.train(run_spec.method, path, params, corpus, dev, budget,
                                                 int(run_spec.seed), best_device(), random_weights=random,
                                                 desc=f"{run_spec.method} {run_spec.instance} s{run_spec.seed}",
                                                 resume=resume)
                # the corpus's own checksums (package text, not release data files) stay in its provenance
                run.values["corpus"] = corpus.provenance
        except KeyError as err:  # a setting the objective's recipe (its DEFAULTS) does not have
            raise UserError(f"{tier['_path']}: field 'contrastive.methods.{run_spec.method}': {err.args[0]}") from None
        model = result.pop("model")
        # the test sets at the sts family's encode length (training cuts at the budget's, as the recipes do)
        enc = tier.get("encode", {})
        test_len = int(tier["assets"][inst.asset].get("max_length", enc.get("max_length", 128)))
        batch = int(enc.get("batch_size", 64))
        # a prompt objective (PromptBERT) wraps the cut sentence in its template, which must still fit the position
        # table: the sentence gets what the template leaves
        extra = max((len(t.head) + len(t.tail) for t in getattr(model, "templates", [])), default=0)
        if extra:
            test_len = min(test_len, int(model.encoder.config.max_position_embeddings) - extra)
        union = union_sentences(datasets)  # one pass over every benchmark's sentences, batched as every run batches
        vectors = model.embed(union, batch, test_len)
        # the objective's own test-time score (RankEncoder's is not plain cosine)
        preds = {d.name: senteval.pair_predictions(d, vectors, union, model.similarity) for d in datasets}
        run.data_files.update(dev.files)
        record_scores(run, datasets, preds, out)
        losses = result.get("losses") or []
        run.values.update({
            # where the weights come from (a random twin's scratch folder would differ run to run: same seed, same bytes)
            "model": runs.model_source(tier, inst, resources), "random_weights": random,
            "score": model.SCORE, "released": bool(released), "transductive": bool(transductive),
            # the assets a recipe names, and the commits they were read at (the encoder's own: nothing to add)
            **{key: {"asset": asset, "model": params[key], "revision": runs.hub_revision(tier, asset)}
               for key, asset in named.items()},
            "dev": {"benchmark": "STSBenchmark", "split": "dev", "pairs": len(dev)},
            "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
            **{k: result[k] for k in ("history", "best_step", "best_spearman", "steps_per_second", "peak_memory_mb",
                                      "sentences_seen", "budget", "objective_params") if k in result},
        })
    resume.complete()
    log.info("contrastive %s %s seed %d: best STS-B dev %.3f at step %s; %.2f steps/s", run_spec.method,
             run_spec.instance, run_spec.seed, result["best_spearman"], result["best_step"],
             result.get("steps_per_second") or 0.0)
