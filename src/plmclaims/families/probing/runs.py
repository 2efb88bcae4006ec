"""The probing family's rule bodies: probe_encode (word vectors of every layer for a seeded UD EWT sample, one forward
pass per instance and scored split) and probe (one probe on one layer; per-item predictions in the score-run layout,
so the verdict engine judges them as accuracy with its chance and random-weights floors)."""
from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

import numpy as np

from ... import plan, runs
from ...data import seeded_subset, ud
from ...errors import UserError
from ...provenance import Run, atomic_save_npz
from ...stats import degenerate as degenerate_reason, document_index
from ...tiers import Instance
from . import SHIFTED_WORDS

log = logging.getLogger("plmclaims")
PARTS = ("train", "eval")  # the probe's training sample and the scored split's sample


def load_split(tier: dict, split: str, data_root: str | None) -> ud.UdData:
    """One UD split, its release counts asserted; parsed once per process and file version (a test that runs many
    probes in one process would otherwise parse EWT train, 200k words, for each)."""
    source = tier["data"]["ud"]
    (path,) = ud.local_files(ud.local_root(source, data_root), split)
    stat = path.stat() if path.exists() else None  # a missing file fails in ud.load, with its message
    return _load(data_root, split, json.dumps(source, sort_keys=True), stat and (stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4)
def _load(data_root, split: str, source: str, version) -> ud.UdData:
    return ud.load(data_root, split, json.loads(source))


def sample(data: ud.UdData, k: int | None, max_words: int | None, seed: int) -> np.ndarray:
    """Indices of a seeded sample of k sentences (of at most max_words words, where a budget asks for short ones)."""
    ok = np.array([i for i, s in enumerate(data.sentences) if len(s) >= 2 and (not max_words or len(s) <= max_words)])
    keep = seeded_subset(len(ok), k, seed)
    return ok if keep is None else ok[keep]


def encode(tier: dict, instance: str, split: str, data_root: str | None, resources: str, out: Path,
           threads: int | None = None, step: int | None = None, words: str | None = None) -> None:
    """Word vectors (sub-word tokens averaged per UD word) of every hidden-state layer; writes words.npz with, per
    part, the kept sentence indices and one (n_words, d) float16 array per layer. `step`: the weights pre-training
    saved at that step instead of its final ones. `words='bigram-shift'`: the sample's sentences with two adjacent
    words swapped in a seeded half (ud.bigram_shift_task, seeded by probing.seed), and per part `swaps`, the
    position swapped in each kept sentence (-1: none), from which the probe rebuilds the labels of what was encoded."""
    if words not in (None, SHIFTED_WORDS):
        raise ValueError(f"probe-encode words={words!r}; allowed: {SHIFTED_WORDS!r} or none")
    import torch

    if threads:
        torch.set_num_threads(threads)
    pr, inst = tier["probing"], Instance.parse(instance, tier)
    enc = tier.get("encode", {})
    max_len = int(tier["assets"][inst.asset].get("max_length", enc.get("max_length", 128)))
    config = {"instance": instance, "split": split, "probing": {k: pr.get(k) for k in ("train_sentences", "eval_sentences", "max_words", "seed")},
              "tier": tier["name"], "asset": tier["assets"][inst.asset],
              "revision": runs.hub_revision(tier, instance, step),
              "step": step, "words": words}
    arrays, stats = {}, {}
    with Run(out.with_name("metrics.json"), config, seed=inst.seed) as run:
        model, tok, path = runs.load_encoder(tier, inst, resources, step)
        for part, name, k in (("train", "train", pr.get("train_sentences")), ("eval", split, pr.get("eval_sentences"))):
            data = load_split(tier, name, data_root)
            ids = sample(data, k, pr.get("max_words"), int(pr.get("seed", 0)))
            text = [data.sentences[i].words for i in ids]
            if words == SHIFTED_WORDS:
                shifted = ud.bigram_shift_task([data.sentences[i] for i in ids], seed=int(pr.get("seed", 0)))
                text = shifted.words
            vecs, kept = runs.encode_words(tier, inst, model, tok, text, batch_size=int(enc.get("batch_size", 64)),
                                          max_length=max_len)
            arrays[f"{part}::sentences"] = ids[kept]
            if words == SHIFTED_WORDS:  # a swap keeps the sub-word count, so `kept` is the originals' too
                arrays[f"{part}::swaps"] = shifted.swaps[kept]
            arrays.update({f"{part}::layer{l}": v.astype(np.float16) for l, v in enumerate(vecs)})
            stats[part] = {"split": name, "sentences": int(kept.sum()), "words": int(vecs.shape[1]),
                           "left_out_too_long": int((~kept).sum())}
            run.data_files.update(data.files)
            log.info("probe-encode %s %s: %d sentences, %d words, %d left out (over %d sub-words)", instance, name,
                     kept.sum(), vecs.shape[1], (~kept).sum(), max_len)
        run.values = {"parts": stats, "layers": int(len(vecs)), "max_length": max_len, "model": path}
        atomic_save_npz(out, **arrays)


def _per_sentence(flat: np.ndarray, sentences: list[ud.Sentence]) -> list[np.ndarray]:
    ends = np.cumsum([len(s) for s in sentences])
    return np.split(flat.astype(np.float32), ends[:-1])


def _features(task: ud.ProbeTask, vecs: list[np.ndarray]) -> np.ndarray:
    """A word's vector; an arc's head and dependent vectors side by side; a sentence's mean word vector."""
    idx = task.index
    if idx.shape[1] == 1:
        return np.stack([vecs[s].mean(0) for s in idx[:, 0]])
    if idx.shape[1] == 2:
        return np.stack([vecs[s][i] for s, i in idx])
    return np.stack([np.concatenate([vecs[s][h], vecs[s][d]]) for s, h, d in idx])


def build_task(task_name: str, sentences: list[ud.Sentence], npz, part: str) -> ud.ProbeTask:
    """One part's examples of a linear task. Bigram shift's labels are rebuilt from the swaps its encode recorded, so
    they describe exactly the sentences that were encoded."""
    if task_name == "bigram-shift":
        if f"{part}::swaps" not in npz.files:
            raise UserError(f"bigram-shift needs the encode of the shifted sentences (run parameter words: "
                            f"{SHIFTED_WORDS}); this words.npz has no {part}::swaps: rerun the workflow, which plans it")
        return ud.bigram_shift_task(sentences, swaps=npz[f"{part}::swaps"])
    # universal relations only (nmod:poss -> nmod): a label set the probe can learn from a small sample
    kwargs = {"subtypes": False} if task_name == "dependency" else {}
    return ud.TASKS[task_name.replace("-", "_")](sentences, **kwargs)


def sentence_groups(eval_: list[ud.Sentence], index: np.ndarray) -> np.ndarray:
    """Each item's sentence (a hash of its sent_id): the unit a bootstrap over sentences resamples."""
    return document_index([eval_[s].sent_id for s in index[:, 0]])


def linear(t_train: ud.ProbeTask, t_eval: ud.ProbeTask, eval_, train_vecs, eval_vecs, settings: dict,
           seed: int) -> tuple[dict, dict]:
    """A standardised logistic regression on train, predicted on the scored split; labels as class ids."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    classes = np.unique(np.concatenate([t_train.labels, t_eval.labels]))
    y_train, y_eval = np.searchsorted(classes, t_train.labels), np.searchsorted(classes, t_eval.labels)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=float(settings.get("c", 1.0)),
                                                               max_iter=int(settings.get("max_iter", 1000)), random_state=seed))
    model.fit(_features(t_train, train_vecs), y_train)
    pred = model.predict(_features(t_eval, eval_vecs))
    ids = [eval_[s].sent_id for s in t_eval.index[:, 0]]
    index = document_index(ids, *[t_eval.index[:, c] for c in range(1, t_eval.index.shape[1])])
    majority = np.bincount(y_train, minlength=len(classes)).argmax()
    values = {"accuracy": float(np.mean(pred == y_eval)), "examples": int(len(y_eval)), "train_examples": int(len(y_train)),
              "classes": classes.tolist(), "train_majority_baseline": float(np.mean(y_eval == majority))}
    return values, {"pred": pred.astype(np.int64), "gold": y_eval.astype(np.int64), "index": index,
                    "groups": sentence_groups(eval_, t_eval.index)}


def structural(train, eval_, train_vecs, eval_vecs, settings: dict, seed: int) -> tuple[dict, dict]:
    """Hewitt & Manning's structural probe; one item per gold undirected edge (punctuation left out): gold its length
    in words, prediction that length where the predicted distances' minimum spanning tree has the edge, else 0."""
    from ...methods import probes

    gold_train = [probes.tree_distances(s.heads) for s in train]
    b = probes.fit_structural_probe(train_vecs, gold_train, rank=int(settings.get("rank", 64)),
                                    epochs=int(settings.get("epochs", 10)), lr=float(settings.get("lr", 1e-3)),
                                    batch_size=int(settings.get("batch_size", 20)), seed=seed)
    predicted = probes.predict_distances(b, eval_vecs)
    gold = [probes.tree_distances(s.heads) for s in eval_]
    keep = [probes.punctuation_mask(s.xpos) for s in eval_]
    rows = []
    for s, (p, g, k) in enumerate(zip(predicted, gold, keep)):
        found = probes.mst_edges(p, k)
        rows += [(s, i, j, j - i, (j - i) * ((i, j) in found)) for i, j in sorted(probes.mst_edges(g, k))]
    sent, i, j, length, pred = map(np.asarray, zip(*rows))
    ids = [eval_[s].sent_id for s in sent]
    values = {"accuracy": float(np.mean(pred == length)), "examples": int(len(rows)),
              "uuas": probes.uuas(predicted, gold, keep), "distance_spearman": probes.distance_spearman(predicted, gold),
              "adjacent_chain_uuas": float(np.mean(length == 1)), "rank": int(b.shape[0])}
    return values, {"pred": pred.astype(np.int64), "gold": length.astype(np.int64), "index": document_index(ids, i, j),
                    "groups": sentence_groups(eval_, sent[:, None])}


def probe(tier: dict, run_spec: plan.Run, data_root: str | None, vectors: Path, out: Path, threads: int | None = None) -> None:
    """Fit one probe on one layer's train vectors and score the split; writes metrics.json and predictions.npz."""
    import torch
    from threadpoolctl import threadpool_limits

    if threads:
        torch.set_num_threads(threads)
    pr = tier["probing"]
    seed = int(pr.get("seed", 0))
    method, task, layer = run_spec.method, run_spec.task, int(run_spec.layer)
    settings = pr.get("linear" if method == "probe-linear" else "structural", {})
    config = {"run": run_spec.spec, "key": run_spec.key, "settings": settings, "tier": tier["name"]}
    with Run(out, config, seed=seed) as run:
        npz = np.load(vectors)
        train, eval_ = load_split(tier, "train", data_root), load_split(tier, run_spec.split, data_root)
        run.data_files.update({**train.files, **eval_.files})
        sents = {p: [d.sentences[i] for i in npz[f"{p}::sentences"]] for p, d in (("train", train), ("eval", eval_))}
        vecs = {p: _per_sentence(npz[f"{p}::layer{layer}"], sents[p]) for p in PARTS}
        # BLAS threads beyond the job's own fight the other jobs for the cores: a small fit then takes 30x longer
        with threadpool_limits(threads or 1):
            if method == "probe-linear":
                tasks = [build_task(task, sents[p], npz, p) for p in PARTS]
                values, items = linear(*tasks, sents["eval"], vecs["train"], vecs["eval"], settings, seed)
            else:
                values, items = structural(sents["train"], sents["eval"], vecs["train"], vecs["eval"], settings, seed)
        values["layer"] = layer
        run.values = {"benchmarks": {task: values}}
        why = degenerate_reason(items["pred"])
        if why:  # one class everywhere: the verdict keeps it out of the bootstrap
            run.values["degenerate"] = f"{task}: {why}"
        atomic_save_npz(out.with_name("predictions.npz"), **{f"{task}::pred": items["pred"], f"{task}::gold": items["gold"],
                                                              f"{task}::subsets": np.full(len(items["gold"]), f"ewt-{run_spec.split}"),
                                                              f"{task}::index": items["index"],
                                                              f"{task}::groups": items["groups"]})
    log.info("probe %s %s %s layer %d: accuracy %.4f on %d items", run_spec.instance, method, task, layer,
             values["accuracy"], values["examples"])
