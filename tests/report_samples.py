"""A synthetic report: verdict rows of the shapes the verdict engine writes (plmclaims.verdicts), small enough to read,
with every marker a reader needs: twins and lexical floors, a margin, a curve with a degenerate point, fine-tuning
measurements without a score, contrastive runs with training histories. `models=True` adds a claim measured on two
models (a `models` section, headline_model, headline_note) and 'shown' check outcomes."""
from __future__ import annotations

import json
from pathlib import Path

STS = ["STS12", "STSBenchmark"]


def _per(value: float, targets: list[str], spread: float = 1.0) -> dict:
    return {t: {"measured": value, "ci_low": value - spread, "ci_high": value + spread, "seeds": [value]}
            for t in targets + ["avg"]}


def _floors(targets: list[str], **values: float) -> dict:
    return {name: {t: v for t in targets + ["avg"]} for name, v in values.items()}


def _m(label: str, value: float | None, targets: list[str], role: str = "raw-encoder", instances=("micro-bert.s1",),
       floors: dict | None = None, **extra) -> dict:
    m = {"label": label, "role": role, "method": extra.pop("method", "mean"), "postprocess": None, "status": "ok",
         "reason": "", "substitute_for": extra.pop("substitute_for", "bert-base-uncased"), "role_note": "",
         "instances": list(instances), "reported": extra.pop("reported", None), "measured": value,
         "ci_low": None if value is None else value - 1, "ci_high": None if value is None else value + 1,
         "seeds": [] if value is None else [value], "per_benchmark": {} if value is None else _per(value, targets)}
    if floors is not None:
        m["floors"] = floors
        if "random-weights" in floors:
            m["random_weights"] = {"measured": floors["random-weights"]["avg"]}
    m.update(extra)
    return m


def _check(description: str, outcome: str, reason: str = "", **extra) -> dict:
    return {"index": 0, "type": extra.pop("type", "greater"), "description": description, "scope": "mechanics",
            "outcome": outcome, "judged": outcome != "shown", "reason": reason,
            "details": [{"on": "avg", "outcome": outcome, "estimate": 1.5, "ci_low": 0.5, "ci_high": 2.5,
                         "reason": reason, "tasks": []}], **extra}


def _verdict(cid: str, verdict: str, note: str, family: str, benchmarks: list[str], measurements: dict, checks: list,
             metric: str = "spearman", scale: int = 100, claim: dict | None = None, **extra) -> dict:
    v = {"id": cid, "version": 1, "seed_point": "X1", "tier": "micro", "statement": f"The statement of {cid}.",
         "source": {"paper": f"Paper of {cid}", "arxiv": "2000.00001", "table": "Table 1"},
         "protocol": {"family": family, "benchmarks": benchmarks, "metric": metric, "scale": scale, "split": "test",
                      "evaluator": "senteval", "aggregation": "all", "text_form": "raw"},
         "verdict": verdict, "note": note, "expected": [], "matches_expected": None, "tier_note": "",
         "rehearsal": False, "measurements": measurements, "controls": {}, "checks": checks, "runs": [], **extra}
    if claim is not None:  # the claim as loaded, as the verdict's provenance records it
        v["provenance"] = {"config": {"claim": claim}}
    return v


def sts_claim() -> dict:
    floors = _floors(STS, chance=0.0, **{"random-weights": 48.0}, bow=52.0, tfidf=66.3)
    ms = {"whitened": _m("BERT whitened", 66.3, STS, floors=floors, reported=66.3),
          "cls": _m("BERT CLS-vector", 29.4, STS, floors=floors, reported=29.2, method="cls-before-pooler"),
          "glove": _m("Avg. GloVe", 44.2, STS, role="static-vectors", instances=("glove-6b-50d",),
                      floors=_floors(STS, chance=0.0, bow=52.0, tfidf=66.3), substitute_for="GloVe 840B-300d"),
          "released": _m("SimCSE (released)", None, STS, role="released-simcse", instances=(),
                         reason="role 'released-simcse': no released SimCSE checkpoint installs without the hub")}
    checks = [_check("whitened > cls on avg", "inconclusive", "only 0 of 2 tasks are informative at this budget "
                     "(at least 2 needed); uninformative: STS12, STSBenchmark")]
    return _verdict("sts/synthetic-whitening", "inconclusive", "whitened > cls on avg: only 0 of 2 tasks are "
                    "informative at this budget (at least 2 needed).", "sts", STS, ms, checks)


def layers_claim() -> dict:
    """Anisotropy: single layers (no twin of their own) and the layers curve with the twin at every point."""
    curve = [{"x": x, "per_benchmark": _per(y, ["anisotropy"]),
              "floors": _floors(["anisotropy"], chance=0.0, **{"random-weights": rw})}
             for x, y, rw in [(0, 13.0, 36.0), (1, 11.0, 36.5), (2, 12.5, 36.6), (3, 18.5, 36.8), (4, 34.5, 37.0)]]
    ms = {"layer0": _m("embeddings (layer 0)", 13.0, ["anisotropy"], floors=_floors(["anisotropy"], chance=0.0),
                       reported=10.5, method="contextual-geometry"),
          "top": _m("last layer", 34.5, ["anisotropy"], floors=_floors(["anisotropy"], chance=0.0), reported=47.7,
                    method="contextual-geometry"),
          "layers": _m("every layer", None, ["anisotropy"], method="contextual-geometry", curve=curve,
                       reported_curve={"points": [0, 6, 12], "of": 12, "values": {"anisotropy": [10.5, 42.0, 47.7]}})}
    claim = {"measurements": {"layer0": {"params": {"layer": 0}}, "top": {"params": {"layer": "12/12"}},
                              "layers": {"params": {"layer": "all"}}},
             "checks": [{"type": "greater", "a": "top", "b": "layer0", "target": "anisotropy"}]}
    return _verdict("intrinsic/synthetic-anisotropy", "reproduced", "relations only: magnitudes are not judged.",
                    "intrinsic", ["anisotropy"], ms, [_check("top > layer0 on anisotropy", "holds")], metric="mean",
                    claim=claim)


def compression_claim() -> dict:
    """Heads masked along a fraction: the curve on the average, lexical floors, a judged point and its margin."""
    lexical = dict(chance=0.0, bow=52.0, tfidf=66.3)
    curve = [{"x": x, "per_benchmark": _per(y, STS), "floors": _floors(STS, **lexical)}
             for x, y in [(0.0, 78.9), (0.3, 79.0), (0.6, 75.3), (0.9, 69.7)]]
    enc = dict(role="compression-encoder", instances=("all-minilm-l6-v2",), substitute_for="")
    ms = {"all_heads": _m("all heads", 78.9, STS, floors=_floors(STS, **lexical), method="uncompressed", **enc),
          "masked_40": _m("40% of heads masked", 74.0, STS, floors=_floors(STS, **lexical), method="head-pruning",
                          **enc),
          "heads": _m("the curve", None, STS, method="head-pruning", curve=curve, **enc)}
    claim = {"measurements": {"all_heads": {"params": {"fraction": 0.0}}, "masked_40": {"params": {"fraction": 0.4}},
                              "heads": {"params": {"fraction": [0.0, 0.3, 0.6, 0.9]}}},
             "checks": [{"type": "non-inferior", "a": "masked_40", "b": "all_heads", "delta": 2.0, "target": "avg"}]}
    checks = [_check("masked_40 >= all_heads - 2.0 on avg", "contradicted", type="non-inferior")]
    return _verdict("compression/synthetic-heads", "not-reproduced",
                    "contradicted: masked_40 >= all_heads - 2.0 on avg (avg -4.90 [-5.40, -4.40]).", "compression", STS,
                    ms, checks, claim=claim)


def finetuning_claims() -> list[dict]:
    """Fine-tuning with parameter counts: a degenerate full fine-tuning, zero-shot, prefix tuning without a score;
    a seed grid whose first point is degenerate; a CKA curve near 100 with chance at 0."""
    tasks = ["MRPC", "SST-2"]
    chance = _floors(tasks, chance=59.6)
    ft = dict(role="peft-encoder-base", instances=("all-minilm-l6-v2",), substitute_for="roberta-base")
    peft = {"full_ft": _m("full fine-tuning", None, tasks, floors=chance, method="full-finetuning",
                          degenerate={"MRPC": "constant predictions (all 1)"}, trained_params=22.7e6,
                          total_params=22.7e6, trained_fraction=1.0, **ft),
            "zero_shot": _m("zero-shot", 62.0, tasks, floors=chance, method="zero-shot", trained_params=0.0,
                            total_params=22.7e6, trained_fraction=0.0, **ft),
            "adapters": _m("adapters", 78.7, tasks, floors=chance, method="adapter", trained_params=7.5e5,
                           total_params=23.3e6, trained_fraction=0.032, seeds=[78.0, 79.4], **ft),
            "prefix": _m("prefix tuning", None, tasks, floors=chance, method="prefix-tuning",
                         degenerate={"SST-2": "constant predictions (all 0)"}, trained_params=1.2e5, total_params=23e6,
                         trained_fraction=0.005, **ft)}
    checks = [_check("adapters >= full_ft - 2.0 on avg", "inconclusive", "1 degenerate run(s), left out of the "
                     "bootstrap: full_ft on MRPC: constant predictions (all 1)", type="non-inferior")]
    grid = [{"x": x, "per_benchmark": {"MRPC": {"measured": y, "ci_low": None if y is None else y - 2,
                                                "ci_high": None if y is None else y + 2}},
             "floors": {"chance": {"MRPC": 68.4}}} for x, y in [(0, None), (1, 69.0), (2, 70.5)]]
    cka = [{"x": x, "per_benchmark": {"SST-2": {"measured": y, "ci_low": y - 0.05, "ci_high": y + 0.05}},
            "floors": {"chance": {"SST-2": 0.0}}} for x, y in [(0, 99.9), (1, 99.6), (2, 98.5)]]
    return [_verdict("peft/synthetic-adapters", "inconclusive", "adapters >= full_ft - 2.0 on avg: 1 degenerate run(s)",
                     "glue", tasks, peft, checks, metric="accuracy"),
            _verdict("compression/synthetic-seed-grid", "inconclusive",
                     "grid spreads by more than 1.0 along seed on MRPC: the curve's best point: grid@2 70.50 on MRPC "
                     "is not above its chance floor 68.38.", "glue", ["MRPC"],
                     {"grid": _m("the seed grid", None, ["MRPC"], method="full-finetuning", curve=grid)},
                     [_check("grid spreads by more than 1.0 along seed on MRPC", "inconclusive", "the curve's best "
                             "point: grid@2 70.50 on MRPC is not above its chance floor 68.38")], metric="accuracy",
                     claim={"measurements": {"grid": {"params": {"seeds": "all"}}}}),
            _verdict("intrinsic/synthetic-cka", "not-run", "a semantic check; tier micro judges mechanics", "glue",
                     ["SST-2"], {"layers": _m("every layer", None, ["SST-2"], method="linear-cka", curve=cka)},
                     [_check("layers falls along layer on SST-2", "shown", "a semantic check; tier micro judges "
                             "mechanics", measured_outcome="holds")], metric="mean",
                     claim={"measurements": {"layers": {"params": {"layer": "all"}}}})]


def contrastive_claim(root: Path) -> dict:
    """Two objectives trained here (a seed each, and each from random weights), their histories on disk."""
    runs = []
    for method, start in (("simcse", 0.30), ("declutr", 0.55)):
        for inst, random in ((f"micro-bert.s1", False), (f"micro-bert.random-s1", True)):
            path = root / "runs" / "contrastive" / inst / method / "s1" / "metrics.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            history = [{"step": s, "stsb_dev_spearman": start + (0.0 if random else 0.001 * s), "uniformity": -0.5,
                        "alignment": 0.1} for s in (0, 50, 100)]
            path.write_text(json.dumps({"values": {"history": history, "random_weights": random}}))
            runs.append(str(path))
    floors = _floors(STS, chance=0.0, **{"random-weights": 45.0}, bow=52.0, tfidf=66.3)
    budget = lambda inst: {"instance": inst, "seed": 1, "steps": 100, "batch_size": 8, "max_length": 32,  # noqa: E731
                           "lr": 3e-5, "sentences_seen": 800, "best_step": 100, "best_dev": 40.0,
                           "steps_per_second": 2.0, "peak_memory_mb": 900.0}
    ms = {name: _m(name, value, STS, floors=floors, method=name, training=[budget("micro-bert"), budget("micro-bert")])
          for name, value in (("simcse", 22.2), ("declutr", 53.0))}
    return _verdict("contrastive/synthetic-objectives", "inconclusive",
                    "simcse > declutr on avg: only 0 of 2 tasks are informative at this budget (at least 2 needed).",
                    "contrastive", STS, ms,
                    [_check("simcse > declutr on avg", "inconclusive", "only 0 of 2 tasks are informative at this "
                            "budget (at least 2 needed)")], runs=runs)


def models_claim() -> dict:
    """A claim measured on two models: the headline model (a decoder) reproduces, the other is inconclusive."""
    floors = _floors(STS, chance=0.0, **{"random-weights": 40.0}, tfidf=66.3)
    lm = {"avg": _m("mean pooling", 70.0, STS, role="pretrained-lm", instances=("gemma-3-270m",), floors=floors,
                    substitute_for=""),
          "cls": _m("last token", 50.0, STS, role="pretrained-lm", instances=("gemma-3-270m",), floors=floors,
                    method="last-token", substitute_for="")}
    enc = {"avg": _m("mean pooling", 45.5, STS, floors=floors), "cls": _m("CLS vector", 44.0, STS, floors=floors,
                                                                          method="cls-before-pooler")}
    lm_checks = [_check("avg > cls on avg", "holds"),
                 _check("avg > 0 by construction", "shown", measured_outcome="holds")]
    enc_checks = [_check("avg > cls on avg", "inconclusive", "avg 45.50 on avg is not above its tfidf floor 66.30")]
    models = {"raw-encoder": {"verdict": "inconclusive", "note": "avg > cls on avg: avg 45.50 on avg is not above its "
                              "tfidf floor 66.30.", "checks": enc_checks, "measurements": enc,
                              "stands_for": "micro-BERT stands for BERT-base"},
              "pretrained-lm": {"verdict": "reproduced", "note": "relations only.", "checks": lm_checks,
                                "measurements": lm, "stands_for": "Gemma 3 270M, a raw decoder"}}
    return _verdict("sts/synthetic-two-models", "reproduced", "relations only.", "sts", STS, lm, lm_checks,
                    models=models, headline_model="pretrained-lm",
                    headline_note="The headline is the decoder: the encoder at this tier is a 4-layer stand-in.")


def report(root: Path, models: bool = False) -> list[dict]:
    verdicts = [sts_claim(), layers_claim(), compression_claim(), *finetuning_claims(), contrastive_claim(root)]
    return sorted(verdicts + ([models_claim()] if models else []), key=lambda v: v["id"])


TIER = {"name": "micro", "description": "A synthetic tier.", "scope": "This tier judges mechanics only.",
        "bootstrap": {"confidence": 0.95}}
