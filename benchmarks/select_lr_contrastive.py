"""Choose the micro tier's contrastive learning rate per objective on STS-B dev, as SimCSE chose its own.

SimCSE (Gao et al. 2021, Appendix A) grid-searched the learning rate on the STS-B development set, and every method of
the family selects its checkpoint there; the test sets are never read. This script trains each objective through the
family's own loop (plmclaims.methods.contrastive.train) at the micro tier's budget, corpus, recipe parameters and
pre-trained micro-BERT, once per learning rate and seed, each run in its own process on one thread (as the workflow
runs its jobs), and prints the best STS-B dev Spearman each reached (the checkpoint the loop would keep) and its step.
The chosen rate is the best mean over the seeds, but only where it beats the rate the tier trains the objective at by
more than the seeds disagree (the larger of the two rates' seed ranges); otherwise the tier's rate stays (the best
mean outright when the tier's rate is not among those tried). Note what low rates win by: an
objective whose training lowers STS-B dev is best at the rate that moves the model least, and the table's "step 0"
column (the untrained encoder under the objective's test pooling) shows where that is the case.

The micro-BERT must have been pre-trained by the micro tier (`snakemake --config data_root=...` or
`plmclaims run pretrain`) under --resources.

    python benchmarks/select_lr_contrastive.py --data-root ../shared/data [--lrs 1e-5 3e-5 1e-4] [--seeds 1 2] \\
        [--objectives simcse declutr ...] [--jobs 2] [--json rows.json]
    python benchmarks/select_lr_contrastive.py --rows benchmarks/select_lr_contrastive.json   # the committed table
    python benchmarks/select_lr_contrastive.py --smallest   # SimCSE, one rate, one step of 4 sentences (the micro-BERT
                                                            # if pre-trained, else a random one of its shape)
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from plmclaims.methods.contrastive import OBJECTIVES  # noqa: E402  (the names only: no torch)

SMALLEST = {"steps": 1, "eval_every": 1, "batch_size": 4, "max_length": 16}  # --smallest's budget


def micro_bert_path(resources: str, scratch: str, smallest: bool) -> str:
    """The pre-trained micro-BERT (seed 1) under `resources`; with --smallest, a random network of its shape when the
    tier has not pre-trained it (benchmarks/bench_contrastive.py's fallback)."""
    from plmclaims import runs
    from plmclaims.tiers import Instance, load_tier

    tier = load_tier("micro")
    path = runs.model_source(tier, Instance.parse("micro-bert.s1", tier), resources)
    if (Path(path) / "config.json").is_file():
        return path
    if not smallest:
        raise SystemExit(f"{path}: the micro-BERT is not pre-trained; run the micro tier's pretrain rule first")
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_contrastive import micro_bert

    return micro_bert(Path(resources), Path(scratch))[0]


def one(job: tuple) -> dict:
    """Train one (objective, lr, seed) in this worker process; its dev history and best checkpoint."""
    name, lr, seed, data_root, path, small = job
    import torch

    from plmclaims.data.sentences import load_corpus
    from plmclaims.families.contrastive.runs import load_dev
    from plmclaims.methods.contrastive.train import train
    from plmclaims.tiers import load_tier, with_overrides

    torch.set_num_threads(1)
    tier = load_tier("micro")
    if small:  # --smallest: a few sentences and dev pairs, one step
        tier = with_overrides(tier, {"data.max_pairs": 16, "contrastive.corpus.max_sentences": 64,
                                     "contrastive.budget": {**tier["contrastive"]["budget"], **SMALLEST}})
    section = tier["contrastive"]
    params = {k: v for k, v in section.get("methods", {}).get(name, {}).items() if k != "lr"}
    budget = {**section["budget"], "lr": lr}
    dev = load_dev(tier, "tokenised", data_root)
    start = time.perf_counter()
    res = train(name, path, params, load_corpus(section["corpus"]), dev, budget, seed, "cpu", progress=False)
    return row(name, lr, seed, res, seconds=time.perf_counter() - start)


def row(objective: str, lr: float, seed: int, result: dict, **extra) -> dict:
    """One table row from a training result or a finished run's metrics values (they share these keys), x 100."""
    return {"objective": objective, "lr": lr, "seed": seed, "best_step": result["best_step"],
            "best": 100 * result["best_spearman"], "start": 100 * result["history"][0]["stsb_dev_spearman"],
            "history": [(h["step"], 100 * h["stsb_dev_spearman"]) for h in result["history"]], **extra}


def tier_rates(tier: dict) -> dict:
    """objective -> the rate the tier trains it at (contrastive.methods.<objective>.lr, else the budget's)."""
    section = tier["contrastive"]
    return {name: float(section.get("methods", {}).get(name, {}).get("lr", section["budget"]["lr"]))
            for name in OBJECTIVES}


def finished(results: Path) -> dict:
    """(objective, lr, seed) -> the row of the micro tier's own finished run from micro-BERT seed 1 (at the rate the
    tier trains that objective at): the same training this script would repeat (same seed, same bytes), read instead
    of re-run."""
    from plmclaims.claims import load_claims
    from plmclaims.plan import all_runs, plan_all
    from plmclaims.tiers import load_tier

    out = {}
    for p in plan_all(load_claims(REPO / "replications", ["contrastive"]), load_tier("micro")):
        for run in all_runs(p.score_runs()).values():
            if run.kind != "contrastive" or run.instance != "micro-bert.s1" or set(run.params) - {"lr"}:
                continue
            lr = float(run.params.get("lr", run.spec["tier"]["contrastive"]["budget"]["lr"]))
            f = Path(run.dir(str(results))) / "metrics.json"
            if f.is_file():
                out[(run.method, lr, run.seed)] = row(
                    run.method, lr, run.seed, json.loads(f.read_text())["values"], seconds=0.0,
                    **{"from": str(f.relative_to(REPO) if f.is_relative_to(REPO) else f)})
    return out


def main() -> None:
    from plmclaims.tiers import load_tier

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=os.environ.get("PLMCLAIMS_DATA_ROOT"),
                    help="the offline data (required unless --rows; default: PLMCLAIMS_DATA_ROOT)")
    ap.add_argument("--resources", default=str(REPO / "resources" / "micro"))
    ap.add_argument("--lrs", nargs="+", type=float, default=None,
                    help="rates to try (default 1e-5 3e-5 1e-4; with --rows: every rate the rows hold)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[1])
    ap.add_argument("--objectives", nargs="+", default=list(OBJECTIVES), choices=list(OBJECTIVES))
    ap.add_argument("--jobs", type=int, default=2, help="worker processes, one thread each")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--results", default=str(REPO / "results" / "micro"),
                    help="the micro tier's results: its finished runs at the tier's own rates are read, not repeated")
    ap.add_argument("--rows", help="print the table from rows a previous --json wrote, training nothing")
    ap.add_argument("--smallest", action="store_true",
                    help="the code path in seconds: SimCSE at 1e-5, one seed, one step of 4 sentences, 16 dev pairs")
    args = ap.parse_args()
    if args.smallest:
        args.objectives, args.lrs, args.seeds, args.jobs = ["simcse"], [1e-5], [1], 1
        args.results = args.results if Path(args.results).is_dir() else str(REPO / "results" / "none")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.rows:
        saved = json.loads(Path(args.rows).read_text())
        lrs = args.lrs or sorted({r["lr"] for r in saved["rows"]})
        return table(saved["rows"], args.objectives, lrs, saved["tier_lrs"])
    if not args.data_root:
        ap.error("--data-root is required to train (or give --rows)")
    tier = load_tier("micro")
    budget, rates, lrs = tier["contrastive"]["budget"], tier_rates(tier), args.lrs or [1e-5, 3e-5, 1e-4]
    done = {} if args.smallest else finished(Path(args.results))
    scratch = tempfile.TemporaryDirectory()
    path = micro_bert_path(args.resources, scratch.name, args.smallest)
    rows = [done[(n, lr, s)] for n in args.objectives for lr in lrs for s in args.seeds if (n, lr, s) in done]
    jobs = [(n, lr, s, args.data_root, path, args.smallest) for n in args.objectives for lr in lrs for s in args.seeds
            if (n, lr, s) not in done]
    print(f"micro budget: {budget['steps']} steps of {budget['batch_size']} x {budget['max_length']} tokens, "
          f"warm-up {budget.get('warmup', 0)}, dev every {budget['eval_every']} steps; {len(rows)} runs read from "
          f"{args.results} (the tier's rates), {len(jobs)} to train, {args.jobs} at a time", flush=True)
    # a fresh process per run (maxtasksperchild=1), as the docstring says and the workflow starts one per job; closed
    # and joined, so the workers exit on their own rather than by the context manager's terminate()
    with mp.get_context("spawn").Pool(args.jobs, maxtasksperchild=1) as pool:
        for r in pool.imap_unordered(one, jobs):
            rows.append(r)
            print(f"  {r['objective']:<12} lr {r['lr']:.0e} seed {r['seed']}: best {r['best']:.2f} at step "
                  f"{r['best_step']} (step 0: {r['start']:.2f}; {r['seconds']:.0f} s)", flush=True)
        pool.close()
        pool.join()
    scratch.cleanup()
    if args.json:
        Path(args.json).write_text(json.dumps({"budget": budget, "tier_lrs": rates, "rows": rows}, indent=1))
    table(rows, args.objectives, lrs, rates)


def choose(rows: list[dict], name: str, lrs: list[float], tier_lr: float) -> tuple[float, dict]:
    """(chosen lr, lr -> best dev scores over the seeds): the best mean where it beats the tier's lr by more than
    either rate's seed range, else the tier's lr; the best mean outright when the tier's lr was not tried."""
    got = {lr: [r["best"] for r in rows if r["objective"] == name and r["lr"] == lr] for lr in lrs}
    means = {lr: statistics.mean(v) for lr, v in got.items() if v}
    if not means:
        return tier_lr, got
    best = max(means, key=means.get)
    if tier_lr not in means or best == tier_lr:
        return best, got
    noise = max(max(got[lr]) - min(got[lr]) for lr in (best, tier_lr))
    return (best if means[best] - means[tier_lr] > noise else tier_lr), got


def table(rows: list[dict], objectives: list[str], lrs: list[float], tier_lrs: dict) -> None:
    print(f"\n{'objective':<12} {'step 0':>7} " + " ".join(f"{'lr ' + format(lr, '.0e'):>21}" for lr in lrs) + "  chosen")
    for name in objectives:
        lr, got = choose(rows, name, lrs, float(tier_lrs[name]))
        start = next((r["start"] for r in rows if r["objective"] == name), float("nan"))
        cells = [f"{statistics.mean(v):.2f} [{min(v):.2f}, {max(v):.2f}]" if len(v) > 1 else
                 (f"{v[0]:.2f}" if v else "-") for v in got.values()]
        print(f"{name:<12} {start:>7.2f} " + " ".join(f"{c:>21}" for c in cells) + f"  {lr:.0e}")
    print("(best STS-B dev Spearman x 100 over the seeds: mean [min, max]; step 0 = the untrained encoder; - = not tried)")


if __name__ == "__main__":
    main()
