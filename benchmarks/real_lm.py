"""What a real pre-trained LM adds to a tier: each new run kind's time and peak memory, the total, and fp32 vs bf16.

The new runs are those the test-only claims of tests/pretrained_lm_claims plan at the tier (every measurement the
role pretrained-lm takes, with its random-weights twin, and a causal LM's CKA), minus those the tier's own claims
(replications/) already plan: SmolLM2's full fine-tunings, GloVe's encode and the lexical controls are shared, not
added. By default one run of each class (run kind; probe method and task; score pooling and post-processing;
transfer task; trained or twin) goes through the workflow itself (Snakemake with those runs as targets, one job at a
time, so each is timed alone; its upstream runs come with it), and each class's time counts for its number of runs;
`--all` runs every new run. A run's time is its provenance's wall time plus its process's start-up (imports, model
loading), its memory the process's peak resident memory (provenance peak_rss_mb); a run that is several jobs (lm_train
and lm_eval) adds them up. The tier's added wall time is the job-seconds over the cores, which assumes the added jobs
pack onto the cores as the rest of a cold tier does: an estimate, stated as one. Timings on a shared machine are
noisy: the load average at the start and the end is printed.

`--precision`: Gemma's encodes in float32 and in bf16 autocast (decoders.autocast) on a seeded sample of STS-B test
pairs (SentEval's tokenised text, as the claims read it) and of UD EWT dev sentences: each one's time, each pooling's
Spearman, the largest change of a pair's cosine, and how far the word vectors move (cosine between the two).

    python benchmarks/real_lm.py                   # micro: Gemma-3-270M, one run per class (about 40 minutes)
    python benchmarks/real_lm.py --smallest        # tiny tier, one class (4 jobs): seconds (the smoke test)
    python benchmarks/real_lm.py --all --cores 2   # every new run, as a cold tier runs them
    python benchmarks/real_lm.py --precision       # fp32 vs bf16 on Gemma (materialises it first if needed)

Writes the table as JSON to --out (default benchmarks/real_lm/<tier>.json; none with --smallest unless given).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
CLAIMS = REPO / "tests" / "pretrained_lm_claims"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def class_of(run) -> tuple:
    """The class a run is timed for: its kind, what makes its work differ (a probe's method and task, a score's
    pooling and post-processing, a transfer's task), and whether it is a random-weights twin."""
    fields = run.spec["fields"]
    what = tuple(str(fields[k]) for k in ("method", "task", "post") if k in fields)
    return (run.kind, *what, "twin" if ".random-" in str(fields.get("instance", "")) else "model")


def new_runs(tier: dict) -> dict:
    """key -> run for every run the test claims plan (with their upstream runs) that the tier's own claims do not."""
    from plmclaims.claims import load_claims
    from plmclaims.plan import all_runs, plan_all

    ours = all_runs(r for p in plan_all(load_claims(CLAIMS), tier) for r in p.score_runs())
    theirs = all_runs(r for p in plan_all(load_claims(REPO / "replications"), tier) for r in p.score_runs())
    return {k: r for k, r in ours.items() if k not in theirs}


def pick(runs: dict) -> list:
    """One run per class: for a layer sweep, the middle layer (the runs of a class differ by layer only)."""
    by_class = defaultdict(list)
    for r in runs.values():
        by_class[class_of(r)].append(r)
    out = []
    for members in by_class.values():
        members.sort(key=lambda r: int(r.spec["fields"].get("layer", 0)))
        out.append(members[len(members) // 2])
    return out


def recorded(run, roots: dict) -> dict | None:
    """Seconds (wall + start-up, summed over the run's jobs) and peak memory (MiB) from the run's provenance."""
    folder = Path(run.dir(str(roots[run.layout().base])))
    seconds, peak, found = 0.0, 0.0, False
    for f in sorted(folder.glob("*.json")):
        try:
            prov = json.loads(f.read_text()).get("provenance")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(prov, dict) and "wall_time_s" in prov:
            seconds += float(prov["wall_time_s"]) + float(prov.get("startup_s") or 0.0)
            peak = max(peak, float(prov.get("peak_rss_mb") or 0.0))
            found = True
    return {"seconds": round(seconds, 1), "peak_mb": round(peak, 1)} if found else None


def snakemake(work: Path, tier_name: str, data_root: str, targets: list[str], cores: int) -> None:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(work),
           "--cores", str(cores), "--config", f"tier={tier_name}", f"data_root={data_root}", f"claims_dir={CLAIMS}",
           "--", *targets]
    env = {**os.environ, **OFFLINE,
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode:
        sys.exit(f"snakemake failed (exit {res.returncode}):\n{res.stderr[-4000:]}")


SMALLEST = ("score", "mean", "none", "model")  # --smallest: this class alone (the LM built, encoded, one score)


def measure_runs(tier: dict, work: Path, data_root: str, every: bool, cores: int, smallest: bool = False) -> dict:
    runs = new_runs(tier)
    chosen = list(runs.values()) if every else pick(runs)
    if smallest:
        chosen = [r for r in chosen if class_of(r) == SMALLEST]
    roots = {"results": work / "results" / tier["name"], "resources": work / "resources" / tier["name"]}
    load = os.getloadavg()[0]
    started = time.time()
    snakemake(work, tier["_path"], data_root, [r.path(f"{r.layout().base}/{tier['name']}") for r in chosen], cores)
    took = time.time() - started
    classes: dict[tuple, dict] = {}
    for r in runs.values():
        row = classes.setdefault(class_of(r), {"runs": 0, "measured": []})
        row["runs"] += 1
        if (m := recorded(r, roots)) is not None:
            row["measured"].append(m)
    table, total, unmeasured = [], 0.0, []
    for cls, row in sorted(classes.items()):
        if not row["measured"]:
            unmeasured.append(" ".join(cls))
            continue
        seconds = sum(m["seconds"] for m in row["measured"]) / len(row["measured"])
        table.append({"class": " ".join(cls), "runs": row["runs"], "measured_runs": len(row["measured"]),
                      "seconds_per_run": round(seconds, 1), "peak_mb": max(m["peak_mb"] for m in row["measured"]),
                      "job_seconds": round(seconds * row["runs"], 1)})
        total += seconds * row["runs"]
    return {"tier": tier["name"], "sampled": not every, "new_runs": len(runs), "ran_s": round(took, 1),
            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2), "classes": table,
            "unmeasured_classes": unmeasured, "job_seconds": round(total, 1),
            "wall_minutes_at_2_cores": round(total / 2 / 60, 1)}


def precision(tier: dict, work: Path, data_root: str, pairs: int, sentences: int) -> dict:
    """Gemma (the tier's pretrained-lm asset) in float32 and in bf16 autocast on the same samples."""
    import numpy as np
    import torch
    from scipy.stats import spearmanr

    from plmclaims import decoders, runs
    from plmclaims.data import seeded_subset, sts, ud
    from plmclaims.encoders import pool
    from plmclaims.plan import lm_model_run
    from plmclaims.tiers import Instance

    torch.set_num_threads(1)
    asset = tier["roles"]["pretrained-lm"]["asset"]
    resources = str(work / "resources" / tier["name"])
    model_run = lm_model_run(tier, asset)
    if model_run is not None and not Path(model_run.path(resources)).exists():
        snakemake(work, tier["_path"], data_root, [model_run.path(f"resources/{tier['name']}")], 1)
    model, tok, _ = runs.load_encoder(tier, Instance.parse(asset, tier), resources)
    data = sts.load(tier["data"]["sts"], "STSBenchmark", "tokenised", "test", data_root)
    keep = seeded_subset(len(data), pairs, 0)
    s1, s2 = [data.sentence1[i] for i in keep], [data.sentence2[i] for i in keep]
    gold = data.scores[keep]
    words = ud.load(data_root, "dev", tier["data"]["ud"]).sentences
    text = [words[i].words for i in seeded_subset(len(words), sentences, 0)]
    out, vecs, wordvecs = {}, {}, {}
    for prec in ("float32", "bf16"):
        start = time.perf_counter()
        v = decoders.encode_layers(model, tok, s1 + s2, batch_size=64, progress=False, precision=prec)
        out[f"{prec}_sts_s"] = round(time.perf_counter() - start, 2)
        start = time.perf_counter()
        wordvecs[prec], _ = decoders.encode_words(model, tok, text, batch_size=64, progress=False, precision=prec)
        out[f"{prec}_words_s"] = round(time.perf_counter() - start, 2)
        vecs[prec] = v
        for method in ("mean", "last-token"):
            x = pool(v, method)
            a, b = x[:len(s1)], x[len(s1):]
            cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
            out[f"{prec}_{method}_spearman"] = round(100 * spearmanr(cos, gold).statistic, 2)
            vecs[f"{prec}_{method}_cos"] = cos
    for method in ("mean", "last-token"):
        change = np.abs(vecs[f"float32_{method}_cos"] - vecs[f"bf16_{method}_cos"])
        out[f"{method}_max_abs_cosine_change"] = round(float(change.max()), 5)
    a, b = wordvecs["float32"], wordvecs["bf16"]
    cos = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    out["word_vector_cosine_fp32_bf16_min_by_layer"] = [round(float(c.min()), 4) for c in cos]
    out.update({"pairs": len(gold), "sentences": len(text), "asset": asset})
    return out


def main() -> None:
    from plmclaims.tiers import load_tier

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tier", default="micro")
    ap.add_argument("--smallest", action="store_true",
                    help="the tiny tier's 2-layer Gemma3, one class only (its LM built, encoded, scored): seconds")
    ap.add_argument("--all", action="store_true", help="run every new run, not one per class")
    ap.add_argument("--precision", action="store_true", help="compare float32 and bf16 autocast encodes instead")
    ap.add_argument("--pairs", type=int, default=500, help="STS-B test pairs for --precision")
    ap.add_argument("--sentences", type=int, default=200, help="UD EWT dev sentences for --precision")
    ap.add_argument("--cores", type=int, default=1, help="snakemake cores (1: each job timed alone)")
    ap.add_argument("--work", default=None, help="scratch folder for resources/ and results/ (default: a temp folder)")
    ap.add_argument("--data-root", default=os.environ.get("PLMCLAIMS_DATA_ROOT", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    tier = load_tier("tiny" if args.smallest else args.tier)
    work = Path(args.work or f"/tmp/plmclaims-real-lm-{tier['name']}")
    work.mkdir(parents=True, exist_ok=True)
    if args.precision:
        result = precision(tier, work, args.data_root, args.pairs, args.sentences)
    else:
        result = measure_runs(tier, work, args.data_root, args.all, args.cores, args.smallest)
        print(f"{'class':<44} {'runs':>5} {'s/run':>8} {'peak MB':>8} {'job-s':>9}")
        for row in result["classes"]:
            print(f"{row['class']:<44} {row['runs']:>5} {row['seconds_per_run']:>8} {row['peak_mb']:>8} "
                  f"{row['job_seconds']:>9}")
        print(f"{result['new_runs']} new runs at tier {result['tier']}: {result['job_seconds']:.0f} job-seconds, about "
              f"{result['wall_minutes_at_2_cores']} minutes of wall time on 2 cores; load {result['load_before']} -> "
              f"{result['load_after']}")
    print(json.dumps(result, indent=1) if args.precision else "")
    out = args.out or (None if args.smallest else str(REPO / "benchmarks" / "real_lm" /
                                                      f"{tier['name']}{'-precision' if args.precision else ''}.json"))
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
