"""The intrinsic family's rule body: geometry (one layer of the probing family's word vectors; per-item values in
the score-run layout, so the verdict engine bootstraps their mean against the chance floor 0)."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ... import plan
from ...data import ud
from ...methods import geometry as G
from ...provenance import Run, atomic_save_npz
from ...stats import degenerate as degenerate_reason, document_index

log = logging.getLogger("plmclaims")
PARTS = ("train", "eval")  # the parts of the probing encode: both are the corpus (nothing is fitted)


def measure(vectors: np.ndarray, words: list[str], occurrence: np.ndarray, settings: dict) -> tuple[dict, dict]:
    """The three benchmarks on one layer: vectors (n, d), each row's word form and identity (one string per row, for
    the item index). Returns (values per benchmark, items per benchmark: pred, index)."""
    seed = int(settings.get("seed", 0))
    min_occ = int(settings.get("min_occurrences", 5))
    forms, ids = np.unique(np.asarray(words), return_inverse=True)
    i, j = G.different_word_pairs(ids, int(settings.get("pairs", 1000)), seed)
    cos = G.pair_cosines(vectors, i, j)
    aniso = float(cos.mean())
    selfsim = G.adjusted_self_similarity(vectors, ids, aniso, min_occ)
    if not selfsim:
        raise ValueError(f"no word occurs {min_occ} times in the sample; lower intrinsic.min_occurrences or sample more "
                         "sentences (probing.train_sentences, probing.eval_sentences)")
    mev = G.adjusted_explainable_variance(vectors, ids, min_occ, int(settings.get("baseline_sets", 5)), seed)
    kept = sorted(selfsim)
    word_index = document_index([forms[w] for w in kept])
    adj_mev = np.array([mev[w][0] - mev[w][1] for w in kept])
    items = {"anisotropy": {"pred": cos, "index": document_index(occurrence[i], occurrence[j])},
             "self-similarity": {"pred": np.array([selfsim[w] for w in kept]), "index": word_index},
             "explainable-variance": {"pred": adj_mev, "index": word_index}}
    adj_self = float(np.mean(items["self-similarity"]["pred"]))
    values = {"anisotropy": {"mean": aniso, "examples": int(len(cos))},
              "self-similarity": {"mean": adj_self, "examples": len(kept), "unadjusted": adj_self + aniso},
              "explainable-variance": {"mean": float(adj_mev.mean()), "examples": len(kept),
                                       "unadjusted": float(np.mean([mev[w][0] for w in kept])),
                                       "baseline": float(np.mean([mev[w][1] for w in kept]))}}
    counts = np.bincount(ids)
    values["self-similarity"]["most_frequent"] = [str(forms[w]) for w in sorted(kept, key=lambda w: -counts[w])[:10]]
    return values, items


def geometry(tier: dict, run_spec: plan.Run, data_root: str | None, vectors: Path, out: Path,
             threads: int | None = None) -> None:
    """One layer's geometry from the probing encode; writes metrics.json and predictions.npz (per benchmark: pred,
    gold 0 everywhere: the isotropic expectation, which the metric ignores, subsets, index)."""
    from threadpoolctl import threadpool_limits

    settings, layer = tier["intrinsic"], int(run_spec.layer)
    config = {"run": run_spec.spec, "key": run_spec.key, "settings": settings, "tier": tier["name"]}
    with Run(out, config, seed=int(settings.get("seed", 0))) as run:
        npz = np.load(vectors)
        rows, words, vecs = [], [], []
        for part, split in zip(PARTS, ("train", run_spec.split)):
            data = ud.load(data_root, split, tier["data"]["ud"])
            run.data_files.update(data.files)
            for s in npz[f"{part}::sentences"]:
                sent = data.sentences[int(s)]
                words += sent.words
                rows += [f"{split}\x1f{sent.sent_id}\x1f{k}" for k in range(len(sent))]
            vecs.append(npz[f"{part}::layer{layer}"].astype(np.float32))
        x = np.concatenate(vecs)
        assert len(x) == len(words), f"{vectors}: {len(x)} vectors for {len(words)} words"
        # BLAS threads beyond the job's own fight the other jobs for the cores
        with threadpool_limits(threads or 1):
            values, items = measure(x, words, np.asarray(rows), settings)
        run.values = {"benchmarks": values, "layer": layer, "tokens": int(len(x)), "word_types": len(set(words))}
        arrays, bad = {}, []
        for b, it in items.items():
            n = len(it["pred"])
            arrays.update({f"{b}::pred": it["pred"], f"{b}::gold": np.zeros(n), f"{b}::index": it["index"],
                           f"{b}::subsets": np.full(n, f"ewt-{run_spec.split}")})
            why = degenerate_reason(it["pred"])
            if why:
                bad.append(f"{b}: {why}")
        if bad:  # constant values (a collapsed layer): the verdict keeps them out of the bootstrap
            run.values["degenerate"] = "; ".join(bad)
        atomic_save_npz(out.with_name("predictions.npz"), **arrays)
    log.info("geometry %s layer %d: anisotropy %.3f, adjusted self-similarity %.3f, adjusted MEV %.3f (%d words)",
             run_spec.instance, layer, *(values[b]["mean"] for b in items), values["self-similarity"]["examples"])
