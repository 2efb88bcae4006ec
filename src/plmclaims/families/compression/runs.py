"""The compression family's rule bodies: compress one encoder with one method and setting, encode the STS sentences
with it and score them by cosine, in the STS score-run layout (so the verdicts pair it with the uncompressed run);
or (compress_glue) compress a fine-tuned classifier and score its GLUE task's dev split in the fine-tuning runs'
layout. metrics.json also records what the compression did: the sparsity reached, the heads masked, the size in MB."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ... import checkpoint, encoders, plan, runs
from ...data import seeded_subset, sts
from ...errors import UserError
from ...evaluation import senteval
from ...provenance import Run, atomic_save_npz
from ...tiers import Instance
from ..sts.runs import load_benchmarks, record_scores, union_sentences

log = logging.getLogger("plmclaims")


def compress(tier: dict, run_spec: plan.Run, data_root: str | None, resources: str, out: Path,
             threads: int | None = None) -> None:
    import torch

    if threads:
        torch.set_num_threads(threads)
    inst = Instance.parse(run_spec.instance, tier)
    section, enc = tier["compression"], tier.get("encode", {})
    datasets = load_benchmarks(tier, run_spec.evaluator, run_spec.form, data_root)
    config = {"run": run_spec.spec, "tier": tier["name"], "revision": runs.hub_revision(tier, run_spec.instance)}
    max_len = int(tier["assets"][inst.asset].get("max_length", enc.get("max_length", 128)))
    batch = int(enc.get("batch_size", 64))
    pooling = section.get("pooling", "mean")
    resume = checkpoint.for_run(run_spec)  # distillation trains a student
    with Run(out, config, seed=inst.seed) as run:
        model, tok, path = runs.load_encoder(tier, inst, resources)
        model.eval()
        encode, info = _compressed(run_spec, model, tok, tier, data_root, max_len, run, resume)
        run.values.update({"model": path, "pooling": pooling, **info})
        union = union_sentences(datasets)  # one pass over every benchmark's sentences, batched as every run batches
        log.info("compress %s %s %s: %d sentences of %d benchmarks", run_spec.instance, run_spec.method,
                 run_spec.setting, len(union), len(datasets))
        x = encoders.pool(encode(union, batch, max_len), pooling)
        preds = {d.name: senteval.pair_predictions(d, x, union) for d in datasets}
        run.values["union_sentences"] = len(union)
        record_scores(run, datasets, preds, out)
    resume.complete()


def _compressed(run_spec: plan.Run, model, tok, tier: dict, data_root: str | None, max_len: int, run: Run,
                resume=None):
    """(encode(sentences, batch_size, max_length) -> encode_layers output, what the compression did)."""
    from ...methods import magnitude_pruning, quantize

    method, params = run_spec.method, run_spec.params
    layers = encoders.encode_layers  # every method but the ONNX build keeps the model's own forward pass
    encode = lambda sents, b, n: layers(model, tok, sents, batch_size=b, max_length=n)  # noqa: E731
    info = {"size_mb_float32": quantize.serialized_mb(model)}
    if method == "uncompressed":
        return encode, info
    if method == "magnitude-pruning":
        info["sparsity"] = magnitude_pruning.magnitude_prune(model, float(params["fraction"]))
        return encode, info
    if method == "head-pruning":
        info.update(_mask_heads(model, tok, float(params["fraction"]), tier, run_spec, data_root, max_len, run))
        return encode, info
    if method == "distillation":
        student, record = _distil(model, tok, tier, run_spec, data_root, max_len, run, resume)
        info.update(record, size_mb=quantize.serialized_mb(student))
        return (lambda sents, b, n: layers(student, tok, sents, batch_size=b, max_length=n)), info  # noqa: E731
    if method == "truncation":  # distillation's student before any training step: what distilling adds is the gap
        from ...methods import distill

        student = distill.student_from_teacher(model)
        info.update(student_parameters=sum(p.numel() for p in student.parameters()),
                    teacher_parameters=sum(p.numel() for p in model.parameters()),
                    size_mb=quantize.serialized_mb(student), layers=distill.every_other_layer(model.config.num_hidden_layers))
        return (lambda sents, b, n: layers(student, tok, sents, batch_size=b, max_length=n)), info  # noqa: E731
    if method == "quantisation" and params.get("backend") == "torch":
        q = quantize.quantize_int8(model)
        info["size_mb"] = quantize.serialized_mb(q)
        # int8 kernels are CPU-only. Dynamic quantisation scales activations by the range of the whole batch (padding
        # and every other sentence in it), so in batches a sentence's vector moves with its neighbours: on the tiny
        # test sample one similarity moved by 0.11 between a benchmark encoded alone and in the union. One sentence a
        # batch makes each vector its sentence's own, as a deployed int8 encoder serves one request.
        info["batch_size"] = 1
        return (lambda sents, b, n: layers(q, tok, sents, batch_size=1, max_length=n, device="cpu")), info  # noqa: E731
    if method == "quantisation" and params.get("backend") == "onnx":
        onnx = quantize.onnx_int8_path()
        session = quantize.onnx_session(onnx)
        info["size_mb"] = onnx.stat().st_size / 2**20
        n = model.config.num_hidden_layers
        return (lambda sents, b, m: quantize.encode_layers_onnx(session, tok, sents, n, batch_size=b, max_length=m)), info
    raise UserError(f"compression method {method!r} with {params} unknown; allowed: uncompressed, magnitude-pruning "
                    "{fraction}, head-pruning {fraction}, quantisation {backend: torch|onnx}, distillation, truncation")


def _mask_heads(model, tok, fraction: float, tier: dict, run_spec: plan.Run, data_root: str | None, max_len: int,
                run: Run) -> dict:
    """Gate off the `fraction` least important heads (Michel et al. 2019: importance = accumulated |dL/d gate| on
    STS-B train pairs, L = squared error of the pair's cosine against its gold score / 5, normalised per layer).
    The gates stay on the model (its forward hooks) for the encoding that follows."""
    import torch

    from ...methods import head_gates

    section = tier["compression"]
    source = tier["data"][sts.SOURCE_OF_EVALUATOR[run_spec.evaluator]]
    train = sts.load(source, "STSBenchmark", run_spec.form, "train", data_root)
    run.data_files.update(train.files)
    keep = seeded_subset(len(train), section.get("importance_pairs"), 0)
    idx = range(len(train)) if keep is None else keep
    pairs = [(train.sentence1[i], train.sentence2[i], float(train.scores[i]) / 5.0) for i in idx]
    size = int(section.get("importance_batch", 32))
    batches = [pairs[i:i + size] for i in range(0, len(pairs), size)]

    def mean_pool(texts):
        b = tok(texts, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
        h = model(**{k: v for k, v in b.items() if k in ("input_ids", "attention_mask", "token_type_ids")}).last_hidden_state
        mask = b["attention_mask"].unsqueeze(-1).float()
        return (h * mask).sum(1) / mask.sum(1).clamp(min=1)

    def loss_fn(m, batch):
        a, b = mean_pool([p[0] for p in batch]), mean_pool([p[1] for p in batch])
        gold = torch.tensor([p[2] for p in batch])
        return ((torch.nn.functional.cosine_similarity(a, b) - gold) ** 2).mean()

    importance = head_gates.head_importance(model, batches, loss_fn)
    order = head_gates.mask_order(importance)
    n_mask = int(round(fraction * len(order)))
    gates = torch.ones(head_gates.gate_shape(model))
    for layer, head in order[:n_mask]:
        gates[layer, head] = 0.0
    head_gates.gate_heads(model, gates)  # hooks stay for the encoding that follows
    return {"heads_masked": n_mask, "heads_total": len(order), "importance_pairs": len(pairs),
            "masked": [list(h) for h in order[:n_mask]], "importance": np.round(importance.numpy(), 6).tolist()}


def _distil(model, tok, tier: dict, run_spec: plan.Run, data_root: str | None, max_len: int, run: Run, resume=None):
    """Distil a half-depth student (every other layer of `model`) on a seeded sample of the STS-B and SICK train
    sentences, never the test sets it is scored on: MSE to the teacher's vectors under the tier's pooling."""
    from ...methods import distill
    from .plan import DISTILL_SOURCES

    section = tier["compression"]
    budget = section["distill"]
    source = tier["data"][sts.SOURCE_OF_EVALUATOR[run_spec.evaluator]]
    sentences = []
    for name in DISTILL_SOURCES:
        train = sts.load(source, name, run_spec.form, "train", data_root)
        run.data_files.update(train.files)
        sentences += train.sentences()
    sentences = list(dict.fromkeys(sentences))
    keep = seeded_subset(len(sentences), budget.get("sentences"), int(budget["seed"]))
    if keep is not None:
        sentences = [sentences[i] for i in keep]
    student, record = distill.distill(model, tok, sentences, steps=int(budget["steps"]), batch_size=int(budget["batch_size"]),
                                      lr=float(budget["lr"]), seed=int(budget["seed"]), max_length=max_len,
                                      pooling=section.get("pooling", "mean"), resume=resume)
    return student, {"distill": record, "teacher_parameters": record["teacher_parameters"],
                     "student_parameters": record["student_parameters"],
                     "distill_sentences_from": [f"{n} train" for n in DISTILL_SOURCES]}


def compress_glue(tier: dict, run_spec: plan.Run, data_root: str | None, finetuned: Path, out: Path,
                  threads: int | None = None) -> None:
    """Compress the glue family's fine-tuned model (`finetuned`: its run's metrics.json; the model is in model/ beside
    it) with the run's method and setting, and score the task's dev split with the task's metric, writing per-item
    predictions in the fine-tuning runs' layout (training.finetune), so the verdicts pair every point on the same
    dev examples. At fraction 0 (and uncompressed) the scores are the fine-tuned run's own."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from ... import stats, training
    from ...evaluation import glue_metrics
    from ..glue.runs import load_glue

    hf_logging.set_verbosity_error()
    if threads:
        torch.set_num_threads(threads)
    model_dir = Path(finetuned).with_name("model")
    if not model_dir.is_dir():
        raise UserError(f"{model_dir}: no fine-tuned model; the glue family's 'finetuned' run saves it there (rerun it)")
    task, budget = run_spec.task, tier["finetune"]["budget"]
    dev = load_glue(tier, task, "dev", data_root)
    config = {"run": run_spec.spec, "tier": tier["name"], "finetuned": str(model_dir)}
    with Run(out, config, seed=run_spec.seed) as run:
        model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
        tok = AutoTokenizer.from_pretrained(model_dir)
        # a regression head predicts the target centred on the training mean (training.save_model)
        offset = float(getattr(model.config, "plmclaims_target_offset", 0.0) or 0.0)
        max_len = int(budget.get("max_length", 128))
        run.values["model"] = str(model_dir)
        predict_with, info = _compressed_classifier(run_spec, model, tok, tier, data_root, max_len, offset, run)
        run.values.update(info)
        pred = training.predict_dev(predict_with, tok, dev, max_len, offset)  # as the fine-tuning run predicts
        gold = np.asarray(dev.labels, dtype=np.float64)
        run.values["benchmarks"] = {task: {**glue_metrics.score(task, gold, pred), "examples": len(dev)}}
        degenerate = stats.degenerate(pred)
        if degenerate:
            run.values["degenerate"] = f"{task}: {degenerate}"
        run.data_files.update(dev.files)
        atomic_save_npz(out.with_name("predictions.npz"), **{
            f"{task}::pred": pred, f"{task}::gold": gold, f"{task}::subsets": np.asarray([task] * len(dev)),
            f"{task}::index": stats.document_index(dev.text_a, dev.text_b)})
    log.info("compress-glue %s %s %s %s: %s", run_spec.instance, task, run_spec.method, run_spec.setting,
             ", ".join(f"{k} {v:.2f}" for k, v in run.values["benchmarks"][task].items() if k != "examples"))


def _compressed_classifier(run_spec: plan.Run, model, tok, tier: dict, data_root: str | None, max_len: int,
                           offset: float, run: Run):
    """(the model to predict with, what the compression did): the same methods as _compressed, on a classifier. The
    task head (classifier, pooler) and the embeddings stay dense and float32: only the encoder's layers compress."""
    import torch

    from ...methods import head_gates, magnitude_pruning, quantize

    method, params = run_spec.method, run_spec.params
    info = {"size_mb_float32": quantize.serialized_mb(model)}
    if method == "uncompressed":
        return model, info
    if method == "magnitude-pruning":
        info["sparsity"] = magnitude_pruning.magnitude_prune(model, float(params["fraction"]))
        return model, info
    if method == "truncation":  # distillation's student before any training step: what distilling adds is the gap
        from ...methods import distill

        student = distill.student_from_teacher(model)
        info.update(student_parameters=sum(p.numel() for p in student.parameters()),
                    teacher_parameters=sum(p.numel() for p in model.parameters()),
                    size_mb=quantize.serialized_mb(student), layers=distill.every_other_layer(model.config.num_hidden_layers))
        return student, info  # the task head is copied whole with the embeddings: it predicts as the teacher's does
    if method == "quantisation" and params.get("backend") == "torch":
        q = quantize.quantize_int8(model)
        info["size_mb"] = quantize.serialized_mb(q)
        return q, info
    if method == "head-pruning":
        from ...training import _batches, sample
        from ..glue.runs import load_glue

        # Michel et al.: importance from the task's loss on training examples (a seeded sample, the tier's
        # compression.importance_pairs), through the fine-tuned model's own head
        train = sample(load_glue(tier, run_spec.task, "train", data_root), tier["compression"].get("importance_pairs"), 0)
        run.data_files.update(train.files)
        size = int(tier["compression"].get("importance_batch", 32))
        batches = list(_batches(tok, train, np.arange(len(train)), size, max_len, offset))
        importance = head_gates.head_importance(model, batches, lambda m, b: m(**b).loss)
        order = head_gates.mask_order(importance)
        n_mask = int(round(float(params["fraction"]) * len(order)))
        gates = torch.ones(head_gates.gate_shape(model))
        for layer, head in order[:n_mask]:
            gates[layer, head] = 0.0
        head_gates.gate_heads(model, gates)  # hooks stay for the predictions that follow
        info.update({"heads_masked": n_mask, "heads_total": len(order), "importance_examples": len(train),
                     "masked": [list(h) for h in order[:n_mask]], "importance": np.round(importance.numpy(), 6).tolist()})
        return model, info
    raise UserError(f"compression method {method!r} with {params} unknown on a GLUE task; allowed: uncompressed, "
                    "magnitude-pruning {fraction}, head-pruning {fraction}, quantisation {backend: torch}, truncation")
