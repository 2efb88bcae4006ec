"""The intrinsic family's rule bodies: geometry (one layer of the probing family's word vectors), attention_maps (one
eager-attention pass per sentence of the split's sample, every layer) and attention (one layer of the maps). Scored
runs write per-item values in the score-run layout, so the verdict engine bootstraps their mean against the chance
floor 0."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from ... import plan
from ...data import ud
from ...errors import UserError
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
             # the same words before the adjustment: a fall in the adjusted value that only mirrors a rise in
             # anisotropy shows here as no fall (the claim judges both)
             "self-similarity-raw": {"pred": np.array([selfsim[w] for w in kept]) + aniso, "index": word_index},
             "explainable-variance": {"pred": adj_mev, "index": word_index}}
    adj_self = float(np.mean(items["self-similarity"]["pred"]))
    values = {"anisotropy": {"mean": aniso, "examples": int(len(cos))},
              "self-similarity": {"mean": adj_self, "examples": len(kept), "unadjusted": adj_self + aniso},
              "self-similarity-raw": {"mean": adj_self + aniso, "examples": len(kept), "adjusted": adj_self},
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
    log.info("geometry %s layer %d: anisotropy %.3f, self-similarity %.3f (adjusted %.3f), adjusted MEV %.3f (%d words)",
             run_spec.instance, layer, *(values[b]["mean"] for b in ("anisotropy", "self-similarity-raw",
                                                                    "self-similarity", "explainable-variance")),
             values["self-similarity"]["examples"])


# ---------------------------------------------------------------- attention to special tokens (Clark et al. 2019)

PUNCTUATION = (".", ",")
MASK_RATE = 0.15  # BERT's masking rate, for the MLM loss whose gradient is taken
BATCH = 32  # sentences per padded forward pass (padding gets no attention: the values do not depend on it)


def load_attention_model(tier: dict, inst, resources: str, gradient: bool):
    """The instance with eager attention (sdpa returns no weights), with its MLM head when `gradient`; a random-weights
    twin is the same architecture from its config, seeded. Refuses a checkpoint without the head it was planned with."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from ...models.microbert import bert_config
    from ...runs import model_source

    hf_logging.set_verbosity_error()  # an encoder-only load reports the unused head; the check below speaks for it
    if inst.kind == "causal-lm":  # a decoder's body: no MLM head (the plan takes no gradient), eager attention
        from ...decoders import load_decoder
        from ...runs import pretrained_path

        path = pretrained_path(tier, inst.name, resources)
        return (*load_decoder(path, seed=inst.seed or 0, random_weights=inst.random, attention="eager"), path)
    path = model_source(tier, inst, resources)
    cls = AutoModelForMaskedLM if gradient else AutoModel
    torch.manual_seed(inst.seed or 0)
    try:
        tok = AutoTokenizer.from_pretrained(path)
        if inst.random:
            config = (bert_config(tier["assets"][inst.asset]["model"], len(tok)) if inst.kind == "pretrain-mlm"
                      else AutoConfig.from_pretrained(path))
            model = cls.from_config(config, attn_implementation="eager")
        else:
            model, info = cls.from_pretrained(path, attn_implementation="eager", output_loading_info=True)
            if gradient and any(k.startswith("cls.predictions.transform") for k in info["missing_keys"]):
                raise UserError(f"model {path!r} (asset '{inst.asset}') has no masked-LM head, though the plan takes "
                                "the MLM loss's gradient (families/intrinsic/plan.py: mlm_head_missing)")
    except OSError as err:
        raise UserError(f"model {path!r} for asset '{inst.asset}' could not be loaded ({str(err).splitlines()[0]}); "
                        "with HF_HUB_OFFLINE=1 it must be prefetched first") from None
    return model.eval(), tok, path


def token_types(tok, input_ids: np.ndarray, decoder: bool = False) -> dict[str, np.ndarray]:
    """Key masks of one tokenised sequence: [SEP], [CLS] (an encoder's), the first token, and periods and commas (as
    whole tokens; a decoder's carry the space before them, Gemma's '▁.' and GPT-2's 'Ġ,')."""
    pieces = np.array([p.lstrip("▁Ġ") for p in tok.convert_ids_to_tokens(input_ids.tolist())])
    first = np.arange(len(input_ids)) == 0
    if decoder:
        return {"first": first, "punctuation": np.isin(pieces, PUNCTUATION)}
    return {"sep": input_ids == tok.sep_token_id, "cls": input_ids == tok.cls_token_id, "first": first,
            "punctuation": np.isin(pieces, PUNCTUATION)}


def attention_maps(tier: dict, run_spec: plan.Run, data_root: str | None, resources: str, out: Path,
                   threads: int | None = None) -> None:
    """Per sentence of the split's sample and per layer: the attention shares on each token type and uniform's, and
    with an MLM head the gradient on [SEP]. Writes attention.npz (sentences, sent_ids, tokens; <type>::share (n,
    layers), <type>::uniform (n,), sep::gradient (n, layers)) and metrics.json beside it."""
    import torch

    from ...decoders import autocast, word_alignment
    from ...encoders import best_device
    from ...methods import attention as A
    from ...tiers import Instance
    from ..probing.runs import sample

    if threads:
        torch.set_num_threads(threads)
    pr, seed = tier["probing"], int(tier["intrinsic"].get("seed", 0))
    inst = Instance.parse(run_spec.instance, tier)
    decoder = inst.kind == "causal-lm"
    gradient = bool(run_spec.params.get("gradient"))
    max_len = int(tier["assets"][inst.asset].get("max_length", tier.get("encode", {}).get("max_length", 128)))
    config = {"run": run_spec.spec, "key": run_spec.key, "tier": tier["name"], "mask_rate": MASK_RATE}
    with Run(out.with_name("metrics.json"), config, seed=seed) as run:
        model, tok, path = load_attention_model(tier, inst, resources, gradient)
        model.to(best_device())
        data = ud.load(data_root, run_spec.split, tier["data"]["ud"])
        run.data_files.update(data.files)
        kept, sent_ids, seqs, masks = [], [], [], []
        for s in sample(data, pr.get("eval_sentences"), pr.get("max_words"), int(pr.get("seed", 0))):
            sent = data.sentences[int(s)]
            if decoder:  # the running text, as the LM reads it (<bos> first where its tokenizer adds one)
                enc = {"input_ids": word_alignment(tok, sent.words)[0]}
            else:
                enc = tok(sent.words, is_split_into_words=True, truncation=False)
            if len(enc["input_ids"]) > max_len:
                continue
            kept.append(int(s))
            sent_ids.append(sent.sent_id)
            seqs.append(np.asarray(enc["input_ids"]))
            if gradient:  # seeded per sentence: its mask does not depend on which other sentences were kept
                words = np.flatnonzero([w is not None for w in enc.word_ids()])
                masks.append(A.mask_positions(words, MASK_RATE, np.random.default_rng((seed, int(s)))))
        shares = {t: [] for t in (("first", "punctuation") if decoder else ("sep", "cls", "first", "punctuation"))}
        uniform = {t: [] for t in shares}
        grads = []
        chance = A.causal_uniform_share if decoder else A.uniform_share
        for start in range(0, len(seqs), BATCH):
            part = seqs[start:start + BATCH]
            with autocast(best_device(), tier["assets"][inst.asset].get("precision") if decoder else "float32"):
                maps, grad = A.forward(model, part, masks[start:start + BATCH] if gradient else None, tok.mask_token_id,
                                       tok.pad_token_id or 0)
            for i, (ids, attn) in enumerate(zip(part, maps)):
                types = token_types(tok, ids, decoder)
                for t, keys in types.items():
                    shares[t].append(A.attention_share(attn, keys))
                    uniform[t].append(chance(keys))
                if gradient:
                    grads.append(A.gradient_magnitude(grad[i], types["sep"]))
        lengths = [len(q) for q in seqs]
        if not kept:
            raise ValueError(f"no sentence of the {run_spec.split} sample fits in {max_len} tokens")
        arrays = {"sentences": np.array(kept), "sent_ids": np.array(sent_ids), "tokens": np.array(lengths)}
        for t in shares:
            arrays[f"{t}::share"] = np.stack(shares[t]).astype(np.float32)
            arrays[f"{t}::uniform"] = np.array(uniform[t], np.float32)
        if gradient:
            arrays["sep::gradient"] = np.stack(grads).astype(np.float32)
        run.values = {"sentences": len(kept), "mean_tokens": float(np.mean(lengths)), "layers": int(attn.shape[0]),
                      "heads": int(attn.shape[1]), "model": path, "gradient": gradient,
                      "share_per_layer": {t: arrays[f"{t}::share"].mean(0).round(4).tolist() for t in shares}}
        if gradient:
            run.values["sep_gradient_per_layer"] = arrays["sep::gradient"].mean(0).tolist()
        atomic_save_npz(out, **arrays)
    key = "first" if decoder else "sep"
    log.info("attention-maps %s %s: %d sentences; %s share per layer %s", run_spec.instance, run_spec.split,
             len(kept), key, run.values["share_per_layer"][key])


def _mean(v: np.ndarray) -> float | None:
    return float(v.mean()) if len(v) else None  # no sentence with such a token: no number


def attention(tier: dict, run_spec: plan.Run, maps: Path, out: Path) -> None:
    """One layer's benchmarks from the maps: metrics.json and predictions.npz (per benchmark pred, gold 0, subsets,
    index: one item per sentence). Shares are in excess of uniform attention; for punctuation only sentences with a
    period or comma count. Without an MLM head the gradient benchmark is absent, and metrics.json says why."""
    from . import GRADIENT, SHARES

    layer = int(run_spec.layer)
    config = {"run": run_spec.spec, "key": run_spec.key, "tier": tier["name"]}
    with Run(out, config) as run:
        npz = np.load(maps)
        upstream = json.loads(maps.with_name("metrics.json").read_text())
        run.data_files.update(upstream.get("provenance", {}).get("data_sha256", {}))
        n_layers = npz["punctuation::share"].shape[1]
        if not 1 <= layer <= n_layers:
            raise ValueError(f"{maps}: attention layers are 1-{n_layers}, not {layer}")
        index = document_index(npz["sent_ids"])
        items, values = {}, {}
        for bench, t in SHARES.items():
            if f"{t}::share" not in npz.files:  # a decoder has no [SEP] or [CLS]; maps written before 'first'
                continue
            share, uni = npz[f"{t}::share"][:, layer - 1].astype(np.float64), npz[f"{t}::uniform"].astype(np.float64)
            keep = uni > 0  # the sentence has such a token (always for [SEP] and [CLS])
            items[bench] = {"pred": share[keep] - uni[keep], "index": index[keep]}
            values[bench] = {"mean": _mean(share[keep] - uni[keep]), "examples": int(keep.sum()),
                             "share": _mean(share[keep]), "uniform": _mean(uni[keep])}
        if "sep::gradient" in npz.files:
            g = npz["sep::gradient"][:, layer - 1].astype(np.float64)
            items[GRADIENT] = {"pred": g, "index": index}
            values[GRADIENT] = {"mean": float(g.mean()), "examples": int(len(g))}
        else:
            run.values["not_run"] = {GRADIENT: "the model was loaded without a masked-LM head (plan: mlm_head_missing)"}
        run.values.update({"benchmarks": values, "layer": layer, "sentences": int(len(index))})
        arrays = {}
        for b, it in items.items():
            n = len(it["pred"])
            arrays.update({f"{b}::pred": it["pred"], f"{b}::gold": np.zeros(n), f"{b}::index": it["index"],
                           f"{b}::subsets": np.full(n, f"ewt-{run_spec.split}")})
            # per benchmark, not run-wide: a constant share (no punctuation) must not void the [SEP] values
            why = degenerate_reason(it["pred"]) if n else "no sentence has such a token"
            if why:
                values[b]["degenerate"] = why
        atomic_save_npz(out.with_name("predictions.npz"), **arrays)
    log.info("attention %s layer %d: %s", run_spec.instance, layer,
             ", ".join(f"{b} {v['mean']:.4f}" for b, v in values.items() if v["mean"] is not None))
