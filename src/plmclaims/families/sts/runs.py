"""The STS family's rule bodies: encode (one forward pass per data source, instance and text form, keeping the layers
every pooling needs) and score (cosine per pair for one pooling and post-processing, on every benchmark)."""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np

from ... import encoders, plan, runs
from ...data import glue, seeded_subset, sts
from ...errors import UserError
from ...evaluation import senteval
from ...methods import flow, lexical, whitening
from ...provenance import Run, atomic_save_npz, atomic_write_json
from ...stats import degenerate as degenerate_reason, document_index
from ...tiers import Instance

log = logging.getLogger("plmclaims")


def load_benchmarks(tier: dict, evaluator: str, form: str, data_root: str | None) -> list[sts.StsData]:
    source = tier["data"][sts.SOURCE_OF_EVALUATOR[evaluator]]
    out = []
    for name in sts.BENCHMARKS:
        data = sts.load(source, name, form, sts.split_for(evaluator, name), data_root)
        out.append(_subsample(data, tier["data"].get("max_pairs")))
    return out


def union_sentences(datasets: list[sts.StsData]) -> list[str]:
    """Every sentence of the benchmarks once (STS-B's test sentences come from STS12-16: 26 139 sentences, not the
    28 570 of the seven benchmarks one by one), in one canonical order: longest first, ties by text. The encoders batch
    it in a stable sort of this order (by token count in encoders.encode_layers), so a sentence's batch is a function
    of the union alone, never of the order the benchmarks were read in or of which benchmark asks for it, and every run
    that encodes the union (encode, compress, contrastive) batches it alike."""
    return sorted({s for d in datasets for s in (*d.sentence1, *d.sentence2)}, key=lambda s: (-len(s), s))


def _subsample(data: sts.StsData, max_pairs: int | None) -> sts.StsData:
    """A seeded sample of pairs, for test budgets only (the full files were counted first)."""
    keep = seeded_subset(len(data), max_pairs, 0)
    if keep is None:
        return data
    pick = lambda xs: [xs[i] for i in keep]  # noqa: E731
    return sts.StsData(data.name, data.form, data.split, pick(data.sentence1), pick(data.sentence2), data.scores[keep],
                       pick(data.subsets), data.files, data.form_note + f"; sampled {max_pairs} of {len(data)} pairs")


def encode(tier: dict, instance: str, evaluator: str, form: str, data_root: str | None, resources: str, out: Path,
           threads: int | None = None) -> None:
    """One forward pass per benchmark, keeping every layer a pooling needs; writes vectors.npz."""
    import torch

    inst = Instance.parse(instance, tier)
    enc = tier.get("encode", {})
    if threads:
        torch.set_num_threads(threads)
    datasets = load_benchmarks(tier, evaluator, form, data_root)
    config = {"instance": instance, "evaluator": evaluator, "form": form, "encode": enc, "tier": tier["name"],
              "asset": tier["assets"][inst.asset], "revision": runs.hub_revision(tier, instance)}
    arrays, sentences, stats = {}, {}, {}
    with Run(out.with_name("metrics.json"), config, seed=inst.seed) as run:
        if inst.kind == "static-vectors":
            table = encoders.load_static_vectors(tier["assets"][inst.asset])
            for d in datasets:
                sents = d.sentences()
                arrays[f"{d.name}::static"], stats[d.name] = table.encode(sents)
                sentences[d.name] = sents
        else:
            model, tok, path = runs.load_encoder(tier, inst, resources)
            max_len = int(tier["assets"][inst.asset].get("max_length", enc.get("max_length", 128)))
            union = union_sentences(datasets)
            log.info("encode %s: %d sentences of %d benchmarks", instance, len(union), len(datasets))
            vecs = runs.encode_layers(tier, inst, model, tok, union, batch_size=int(enc.get("batch_size", 64)),
                                      max_length=max_len)
            row = {s: i for i, s in enumerate(union)}
            for d in datasets:  # each benchmark's rows, in its own sentence order (what score reads)
                sents = d.sentences()
                rows = np.fromiter((row[s] for s in sents), dtype=np.int64, count=len(sents))
                arrays.update({f"{d.name}::{k}": v if v.ndim == 0 else v[rows] for k, v in vecs.items()})
                sentences[d.name] = sents
                stats[d.name] = {"sentences": len(sents), "max_length": max_len}
            run.values["model"] = path
            run.values["union_sentences"] = len(union)
        for d in datasets:
            run.data_files.update(d.files)
        run.values["datasets"] = stats
        atomic_write_json(out.with_name("sentences.json"), sentences)
        atomic_save_npz(out, **arrays)


def load_fit_sentences(spec: dict, tier: dict | None = None, data_root: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The unique sentences of a fit corpus, column after column in file order, then a seeded sample of
    max_sentences; and the files read. A tier fit_corpora entry: `use: hub` (id, revision, subset, split, columns)
    or `use: glue` (task: a local GLUE pair task's train sentences, text_a then text_b)."""
    import datasets

    from ... import hub

    if spec["use"] == "glue":
        data = glue.load_local(glue.local_root(tier["data"]["glue"], data_root), spec["task"], "train")
        sentences = list(dict.fromkeys(s for col in (data.text_a, data.text_b or []) for s in col if s.strip()))
        keep = seeded_subset(len(sentences), spec.get("max_sentences"), 0)
        return (sentences if keep is None else [sentences[i] for i in keep]), data.files

    local = hub.resolve(spec["id"], "dataset", revision=spec.get("revision"))
    repo, revision = (local, None) if local != spec["id"] else (spec["id"], spec.get("revision"))
    try:
        ds = datasets.load_dataset(repo, spec.get("subset"), split=spec.get("split", "train"), revision=revision)
    except Exception as err:  # noqa: BLE001 - any loader failure is one line naming the corpus
        raise UserError(f"fit corpus {spec['id']!r} (revision {spec.get('revision')}): could not load it through "
                        f"datasets: {type(err).__name__}: {str(err)[:200]}; prefetch it: {hub.prefetch_command()}") from None
    columns = spec.get("columns") or []
    missing = [c for c in columns if c not in ds.column_names]
    if not columns or missing:
        raise UserError(f"fit corpus {spec['id']!r}: field 'columns' must name text columns of {ds.column_names}; "
                        f"got {columns}")
    sentences = list(dict.fromkeys(s for c in columns for s in ds[c] if isinstance(s, str) and s.strip()))
    keep = seeded_subset(len(sentences), spec.get("max_sentences"), 0)
    if keep is not None:
        sentences = [sentences[i] for i in keep]
    files = {f"{spec['id']}@{spec.get('revision')}:{Path(f['filename']).name}": "" for f in ds.cache_files}
    return sentences, files


def fit_encode(tier: dict, instance: str, corpus: str, data_root: str | None, resources: str, out: Path,
               threads: int | None = None) -> None:
    """One forward pass of the model over a fit corpus's sentences; writes vectors.npz (the layers poolings need)."""
    import torch

    inst = Instance.parse(instance, tier)
    enc = tier.get("encode", {})
    if threads:
        torch.set_num_threads(threads)
    spec = tier["fit_corpora"][corpus]
    config = {"instance": instance, "corpus": corpus, "fit_corpus": spec, "encode": enc, "tier": tier["name"],
              "asset": tier["assets"][inst.asset], "revision": runs.hub_revision(tier, instance)}
    with Run(out.with_name("metrics.json"), config, seed=inst.seed) as run:
        sentences, files = load_fit_sentences(spec, tier, data_root)
        model, tok, path = runs.load_encoder(tier, inst, resources)
        max_len = int(tier["assets"][inst.asset].get("max_length", enc.get("max_length", 128)))
        log.info("encode %s on fit corpus %s: %d sentences", instance, corpus, len(sentences))
        vecs = runs.encode_layers(tier, inst, model, tok, sentences, batch_size=int(enc.get("batch_size", 64)),
                                   max_length=max_len)
        run.data_files.update(files)
        run.values = {"model": path, "fit_corpus": spec.get("id") or f"GLUE {spec.get('task')} train",
                      "sentences": len(sentences), "max_length": max_len}
        atomic_save_npz(out, **vecs)


def _vectors_for(npz, name: str) -> dict[str, np.ndarray]:
    prefix = f"{name}::"
    return {k[len(prefix):]: npz[k] for k in npz.files if k.startswith(prefix)}


# ---------------------------------------------------------------- score

def sentence_vectors(vecs: dict[str, np.ndarray], method: str) -> np.ndarray:
    return vecs["static"] if method == "static-average" else encoders.pool(vecs, method)


def _fit_post(post: str, tier: dict, seed: int, fit: np.ndarray) -> tuple:
    """Whitening or BERT-flow fitted on `fit` (a benchmark's own sentence vectors for '<name>-target', else a hub
    corpus's vectors of the same model and pooling): (the map to apply, what to record). The flow's settings are the
    tier's postprocess.flow over flow.DEFAULTS, seeded with the instance's seed."""
    name, _, rest = post.partition("-")
    fit_on, _, k = rest.partition("-k")
    if name not in ("whitening", "flow") or not fit_on or (k and name == "flow"):
        raise UserError(f"post-processing {post!r} unknown; allowed values: none, whitening-<corpus>[-k<dim>], "
                        "flow-<corpus>, with <corpus> 'target' or a hub fit corpus of the tier")
    info = {"fit_on": fit_on, "fit_sentences": int(len(fit))}
    if name == "whitening":
        mu, w = whitening.fit(fit, int(k) if k else None)
        return (lambda x: whitening.apply(x, mu, w)), info
    settings = {**flow.DEFAULTS, **tier.get("postprocess", {}).get("flow", {})}
    start = time.perf_counter()
    fitted = flow.fit(fit, seed=seed, **settings)
    return fitted.forward, {**info, "flow_steps": fitted.steps, "flow_nll_per_dim": fitted.mean_nll,
                            "train_wall_s": round(time.perf_counter() - start, 2)}


def score(tier: dict, run_spec: plan.Run, data_root: str | None, vectors: Path | None, out: Path,
          fit_vectors: Path | None = None) -> None:
    """Cosine per pair for one (instance, form, method, post) on every benchmark; writes metrics.json + predictions.npz.
    With `fit_vectors` (a fitencode run's vectors.npz) the post-processing is fitted once on those, pooled the same way."""
    datasets = load_benchmarks(tier, run_spec.evaluator, run_spec.form, data_root)
    config = {"run": run_spec.__dict__, "tier": tier["name"]}
    inst = Instance.parse(run_spec.instance, tier)
    with Run(out, config, seed=inst.seed) as run:
        npz = np.load(vectors) if vectors is not None else None
        sentence_lists = json.loads(vectors.with_name("sentences.json").read_text()) if vectors is not None else {}
        mteb_inputs, preds, extras = [], {}, {}
        post = None  # a hub-corpus fit is the same for every benchmark: fitted once, here
        if run_spec.post != "none" and not run_spec.post.partition("-")[2].startswith("target"):
            if fit_vectors is None:
                raise UserError(f"post-processing {run_spec.post!r} is fitted on a hub corpus: pass its fitencode run's "
                                "vectors.npz with --fit-vectors (the workflow does)")
            with np.load(fit_vectors) as fz:
                fit = sentence_vectors({k: fz[k] for k in fz.files}, run_spec.method)
            post = _fit_post(run_spec.post, tier, inst.seed or 0, fit)
        for d in datasets:
            if run_spec.method in ("bow-cosine", "tfidf-cosine"):
                preds[d.name] = lexical.cosine_scores(d.sentence1, d.sentence2, run_spec.method.split("-")[0])
                continue
            sents = sentence_lists[d.name]
            x = sentence_vectors(_vectors_for(npz, d.name), run_spec.method)
            if run_spec.post != "none":
                apply, extras[d.name] = post or _fit_post(run_spec.post, tier, inst.seed or 0, x)
                x = apply(x)
            preds[d.name] = senteval.pair_predictions(d, x, sents)
            mteb_inputs.append((d, x, sents))
        values = record_scores(run, datasets, preds, out, extras)
        if run_spec.evaluator == "mteb":
            _add_mteb_scores(run_spec, mteb_inputs, values)


def record_scores(run: Run, datasets: list[sts.StsData], preds: dict[str, np.ndarray], out: Path,
                  extras: dict[str, dict] | None = None) -> dict:
    """Write one pair-scoring run's results as verdicts read them: metrics.json values per benchmark (via `run`) and
    predictions.npz with each benchmark's predictions, gold scores, subsets and document index (runs are paired
    on it). A constant or NaN similarity marks the run degenerate, so verdicts keep it out of the bootstrap."""
    arrays, values = {}, {}
    for d in datasets:
        run.data_files.update(d.files)
        pred = preds[d.name]
        arrays.update({f"{d.name}::pred": pred, f"{d.name}::gold": d.scores, f"{d.name}::subsets": np.asarray(d.subsets),
                       f"{d.name}::index": document_index(d.sentence1, d.sentence2)})
        values[d.name] = {**senteval.score(pred, d), **(extras or {}).get(d.name, {}), "text_form_note": d.form_note}
    run.values = {**run.values, "benchmarks": values}
    degenerate = [f"{d.name}: {why}" for d in datasets if (why := degenerate_reason(preds[d.name]))]
    if degenerate:
        run.values["degenerate"] = "; ".join(degenerate)
    atomic_save_npz(out.with_name("predictions.npz"), **arrays)
    return values


def _add_mteb_scores(run_spec: plan.Run, inputs: list, values: dict) -> None:
    """Score the same vectors through mteb.evaluate and record both numbers and their difference."""
    from ...evaluation import mteb_sts

    for d, x, sents in inputs:
        index = {s: i for i, s in enumerate(sents)}
        name = f"{run_spec.instance}-{run_spec.form}-{run_spec.method}-{run_spec.post}-{d.name}"
        model = mteb_sts.VectorEncoder(name, lambda texts, x=x, index=index: x[[index[t] for t in texts]], x.shape[1])
        res = mteb_sts.evaluate(model, [d])[d.name]
        values[d.name]["mteb_main_score"] = res["main_score"]
        values[d.name]["mteb_minus_own"] = res["main_score"] - values[d.name]["all"]
