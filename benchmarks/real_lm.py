"""What a real pre-trained LM adds to a tier: each new run kind's time and peak memory, the total, and fp32 vs bf16.

The new runs are those the test-only claims of tests/pretrained_lm_claims plan at the tier (every measurement the
role pretrained-lm takes, with its random-weights twin, and a causal LM's CKA), minus those the tier's own claims
(replications/) already plan: SmolLM2's full fine-tunings, GloVe's encode and the lexical controls are shared, not
added. By default one run of each class (run kind; probe method and task; score pooling and post-processing;
transfer task; trained or twin) goes through the workflow itself (Snakemake with those runs as targets, one job at a
time, so each is timed alone; its upstream runs come with it), and each class's time counts for its number of runs;
`--all` runs every new run. A run's cost is its process's CPU time (provenance cpu_s: what it costs on an idle core,
however loaded the machine is while it runs), else its wall time plus its start-up; its memory the process's peak
resident memory (provenance peak_rss_mb); a run that is several jobs (lm_train and lm_eval) adds them up. The tier's
added wall time is the job-seconds over the cores, which assumes the added jobs pack onto the cores as the rest of a
cold tier does: an estimate, stated as one. The load average at the start and the end is printed.

`--precision`: Gemma's encodes in float32 and in bf16 autocast (decoders.autocast) on a seeded sample of STS-B test
pairs (SentEval's tokenised text, as the claims read it) and of UD EWT dev sentences: each one's time, each pooling's
Spearman, the largest change of a pair's cosine, and how far the word vectors move (cosine between the two).

    python benchmarks/real_lm.py                   # micro: Gemma-3-270M, one run per class (about 40 minutes)
    python benchmarks/real_lm.py --smallest        # tiny tier, one class (2 jobs): seconds (the smoke test)
    python benchmarks/real_lm.py --all --cores 2   # every new run, as a cold tier runs them
    python benchmarks/real_lm.py --precision       # fp32 vs bf16 on Gemma (materialises it first if needed)
    python benchmarks/real_lm.py --transfer        # T4's seconds per step on Gemma and SmolLM2, and its options' costs

Writes the table as JSON to --out (default benchmarks/real_lm/<tier>.json; none with --smallest unless given).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
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
    """Seconds (wall + start-up), CPU seconds (None where a job did not record them) and peak memory (MiB) from the
    run's provenance, summed over its jobs."""
    folder = Path(run.dir(str(roots[run.layout().base])))
    seconds, cpu, peak, found = 0.0, 0.0, 0.0, False
    for f in sorted(folder.glob("*.json")):
        try:
            prov = json.loads(f.read_text()).get("provenance")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(prov, dict) and "wall_time_s" in prov:
            seconds += float(prov["wall_time_s"]) + float(prov.get("startup_s") or 0.0)
            cpu = None if cpu is None or prov.get("cpu_s") is None else cpu + float(prov["cpu_s"])
            peak = max(peak, float(prov.get("peak_rss_mb") or 0.0))
            found = True
    if not found:
        return None
    return {"seconds": round(seconds, 1), "cpu_s": None if cpu is None else round(cpu, 1), "peak_mb": round(peak, 1)}


def snakemake(work: Path, tier_name: str, data_root: str, targets: list[str], cores: int) -> None:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(work),
           "--cores", str(cores), "--config", f"tier={tier_name}", f"data_root={data_root}", f"claims_dir={CLAIMS}",
           "--", *targets]
    env = {**os.environ, **OFFLINE,
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode:
        sys.exit(f"snakemake failed (exit {res.returncode}):\n{res.stderr[-4000:]}")


SMALLEST = ("transfer", "bit-xor", "model")  # --smallest: this class alone (the LM built, one run on it measured)


def measure_runs(tier: dict, work: Path, data_root: str, every: bool, cores: int, smallest: bool = False,
                 skip: tuple = ()) -> dict:
    runs = {k: r for k, r in new_runs(tier).items() if r.kind not in skip}
    chosen = list(runs.values()) if every else pick(runs)
    if smallest:
        chosen = [r for r in chosen if class_of(r) == SMALLEST]
    if not chosen:  # no targets would make Snakemake run the claims' whole DAG
        sys.exit(f"no new run to measure at tier {tier['name']}"
                 + (f" in class {' '.join(SMALLEST)}" if smallest else ""))
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
        cpus = [m["cpu_s"] for m in row["measured"]]
        cpu = None if None in cpus else sum(cpus) / len(cpus)
        cost = seconds if cpu is None else cpu  # CPU time where recorded: what the job costs on an idle machine
        table.append({"class": " ".join(cls), "runs": row["runs"], "measured_runs": len(row["measured"]),
                      "seconds_per_run": round(seconds, 1), "cpu_s_per_run": None if cpu is None else round(cpu, 1),
                      "peak_mb": max(m["peak_mb"] for m in row["measured"]),
                      "job_seconds": round(cost * row["runs"], 1)})
        total += cost * row["runs"]
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


def price_transfer(tier: dict, work: Path, data_root: str) -> dict:
    """CPU seconds per training step of the frozen-transformer transfer (T4) on the tier's pretrained-lm and causal-lm
    assets, per task, precision and batch size (median of 3 timed steps after a warm-up, one thread), and what each
    option costs for the model and its twin: steps x seconds per step, plus scoring the test items."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    from plmclaims import decoders
    from plmclaims.data import synthetic
    from plmclaims.methods import frozen_transfer
    from plmclaims.plan import lm_model_run
    from plmclaims.runs import pretrained_path

    torch.set_num_threads(1)
    resources = str(work / "resources" / tier["name"])
    section = tier["transfer"]
    rates = []
    for role in ("pretrained-lm", "causal-lm"):
        asset = tier["roles"][role]["asset"]
        made = lm_model_run(tier, asset)
        if made is not None and not Path(made.path(resources)).exists():
            snakemake(work, tier["_path"], data_root, [made.path(f"resources/{tier['name']}")], 1)
        for task in synthetic.TASKS:
            given = section.get("tasks", {}).get(task)
            train = synthetic.generate(task, 64, 0, "train", given)
            test = synthetic.generate(task, int(section["budget"]["test_examples"]), 0, "test", given)
            for prec in ("float32", "bf16"):
                for batch in (32, 16):
                    body, _ = decoders.load_decoder(pretrained_path(tier, asset, resources))
                    model, _ = frozen_transfer.build(body, train, 0)
                    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
                    times = []
                    for _ in range(4):
                        x, mask, y = frozen_transfer._tensors(train, np.arange(batch))
                        start = time.process_time()  # CPU time of this one-thread process: load-independent
                        with decoders.autocast("cpu", prec):
                            logits = model(x, mask)
                        loss = F.cross_entropy(logits.float().reshape(-1, train.classes), y.reshape(-1))
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                        times.append(time.process_time() - start)
                    start = time.process_time()
                    with torch.inference_mode(), decoders.autocast("cpu", prec):
                        for i in range(0, len(test), 256):
                            model(*frozen_transfer._tensors(test, np.arange(i, min(i + 256, len(test))))[:2])
                    rates.append({"asset": asset, "task": task, "precision": prec, "batch": batch,
                                  "s_per_step": round(float(np.median(times[1:])), 3),
                                  "test_s": round(time.process_time() - start, 1), "tokens": int(train.x.shape[1])})
                    print(rates[-1], flush=True)
    options = []
    for asset in sorted({r["asset"] for r in rates}):
        for prec in ("float32", "bf16"):
            for batch in (32, 16):
                for steps in (int(section["budget"]["steps"]), 100):
                    for tasks in (tuple(synthetic.TASKS), ("bit-memory", "listops")):
                        rows = [r for r in rates if (r["asset"], r["precision"], r["batch"]) == (asset, prec, batch)
                                and r["task"] in tasks]
                        seconds = 2 * sum(steps * r["s_per_step"] + r["test_s"] for r in rows)  # the model and its twin
                        options.append({"asset": asset, "precision": prec, "batch": batch, "steps": steps,
                                        "tasks": list(tasks), "job_seconds": round(seconds),
                                        "core_minutes": round(seconds / 60, 1)})
    return {"tier": tier["name"], "load": round(os.getloadavg()[0], 2), "rates": rates,
            "options": sorted(options, key=lambda o: o["job_seconds"])}


def main() -> None:
    from plmclaims.tiers import load_tier

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tier", default="micro")
    ap.add_argument("--smallest", action="store_true",
                    help="the tiny tier's 2-layer Gemma3, one class only (its LM built, one transfer run): seconds")
    ap.add_argument("--all", action="store_true", help="run every new run, not one per class")
    ap.add_argument("--precision", action="store_true", help="compare float32 and bf16 autocast encodes instead")
    ap.add_argument("--transfer", action="store_true", help="price the frozen transfer (T4): seconds per step per "
                    "model, task, precision and batch size, and each option's cost for the model and its twin")
    ap.add_argument("--pairs", type=int, default=500, help="STS-B test pairs for --precision")
    ap.add_argument("--sentences", type=int, default=200, help="UD EWT dev sentences for --precision")
    ap.add_argument("--skip", nargs="*", default=[],
                    help="run kinds to leave out (e.g. transfer, priced by --transfer)")
    ap.add_argument("--cores", type=int, default=1, help="snakemake cores (1: each job timed alone)")
    ap.add_argument("--work", default=None, help="scratch folder for resources/ and results/ (default: a temp folder)")
    ap.add_argument("--data-root", default=os.environ.get("PLMCLAIMS_DATA_ROOT", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    tier = load_tier("tiny" if args.smallest else args.tier)
    # --smallest in a fresh folder, deleted at exit: the smoke test runs its jobs, never finds them done before
    scratch = tempfile.TemporaryDirectory(prefix="plmclaims-real-lm-") if args.smallest and not args.work else None
    work = Path(args.work or (scratch.name if scratch else f"/tmp/plmclaims-real-lm-{tier['name']}"))
    work.mkdir(parents=True, exist_ok=True)
    if args.precision:
        result = precision(tier, work, args.data_root, args.pairs, args.sentences)
    elif args.transfer:
        result = price_transfer(tier, work, args.data_root)
    else:
        result = measure_runs(tier, work, args.data_root, args.all, args.cores, args.smallest, tuple(args.skip))
        print(f"{'class':<44} {'runs':>5} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'job-s':>9}")
        for row in result["classes"]:
            print(f"{row['class']:<44} {row['runs']:>5} {row['seconds_per_run']:>8} {str(row['cpu_s_per_run']):>8} "
                  f"{row['peak_mb']:>8} {row['job_seconds']:>9}")
        print(f"{result['new_runs']} new runs at tier {result['tier']}: {result['job_seconds']:.0f} job-seconds, about "
              f"{result['wall_minutes_at_2_cores']} minutes of wall time on 2 cores; load {result['load_before']} -> "
              f"{result['load_after']}")
    print(json.dumps(result, indent=1) if args.precision or args.transfer else "")
    suffix = "-precision" if args.precision else "-transfer" if args.transfer else ""
    out = args.out or (None if args.smallest else str(REPO / "benchmarks" / "real_lm" / f"{tier['name']}{suffix}.json"))
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
