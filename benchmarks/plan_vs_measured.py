"""How well `plmclaims plan` predicts a finished tier: its estimate of every run against the wall time the run recorded.

Every run writes its wall time into its provenance: `wall_time_s`, the run's own work, and `startup_s`, what its
process spent before (interpreter, imports, model loading and data reading where the rule does them first; runs
recorded before stop 22 lack it, and count their own work only). This script plans the tier exactly as `plmclaims
plan` does, with the throughput table given (default: the committed one the plan reads), finds each planned run's
result under --results (pre-training's under --resources, beside the models it writes), and prints per
rule: runs found, planned and measured device-hours, their ratio (measured / planned; 1 is a perfect plan, 30 means
the plan is 30 times too optimistic) and the median of the per-run ratios. The plan prices the model's own
arithmetic plus the table's measured start-up of a job (imports); a rule whose runs are short shows the rest of its
fixed cost (model loading, data reading) as a ratio above 1.

The measured times are only as clean as the run was: a tier run with --cores 2 runs two jobs side by side on this
machine, each with the threads its provenance names (printed), while the table is measured one model at a time.

    python benchmarks/plan_vs_measured.py [--tier micro] [--results results/micro] [--resources resources/micro]
        [--throughput TABLE] [--runs]
    python benchmarks/plan_vs_measured.py --smallest      # the tiny tier: the code path in seconds
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def recorded(run, roots: dict[str, Path]) -> tuple[float, int | None] | None:
    """(wall seconds, torch threads) of the run from the provenance of its result files, or None when it has none.
    `roots` maps a layout's base ('results', 'resources': pre-training lives with the models) to the tier's folder.
    A run that is several jobs (a causal LM's lm_train writes train.json, its lm_eval metrics.json) sums them: each
    job's file carries its own provenance."""
    folder = Path(run.dir(str(roots[run.layout().base])))
    total, threads, found = 0.0, None, False
    for f in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        prov = doc.get("provenance", doc) if isinstance(doc, dict) else {}
        if isinstance(prov, dict) and "wall_time_s" in prov:  # with the job's start-up where it was recorded
            total += float(prov["wall_time_s"]) + float(prov.get("startup_s") or 0.0)
            threads = threads or (prov.get("device") or {}).get("torch_threads")
            found = True
    return (total, threads) if found else None


def main() -> None:
    from plmclaims import costs
    from plmclaims.claims import load_claims
    from plmclaims.plan import all_runs, plan_all
    from plmclaims.tiers import load_tier

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tier", default="micro")
    ap.add_argument("--results", default=None, help="the tier's results folder (default: results/<tier>)")
    ap.add_argument("--resources", default=None,
                    help="the tier's resources folder, where pre-training writes (default: resources/<tier>)")
    ap.add_argument("--claims-dir", default=str(REPO / "replications"))
    ap.add_argument("--throughput", default=None, help="a table from benchmarks/throughput.py (default: the committed one)")
    ap.add_argument("--runs", action="store_true", help="also print every run's planned and measured seconds")
    ap.add_argument("--smallest", action="store_true", help="the code path in seconds: the tiny tier")
    args = ap.parse_args()
    if args.smallest:
        args.tier = "tiny"
    tier = load_tier(args.tier)
    results = Path(args.results or REPO / "results" / tier["name"])
    roots = {"results": results, "resources": Path(args.resources or REPO / "resources" / tier["name"])}
    path, table = costs.load_table(args.throughput)
    runs = {}
    for p in plan_all(load_claims(args.claims_dir), tier):
        runs.update(all_runs(p.score_runs()))
    by_rule: dict[str, list] = defaultdict(list)
    missing, threads, unpriced = Counter(), Counter(), Counter()
    for run in runs.values():
        if run.kind not in costs.GPU_KINDS:
            continue
        got = recorded(run, roots)
        if got is None:
            missing[run.kind] += 1
            continue
        planned = costs.run_cost(run, table).seconds
        if planned <= 0:  # no transformer to price (static vectors, lexical) or an architecture the table lacks
            unpriced[run.kind] += 1
            continue
        by_rule[run.kind].append((run, planned, got[0]))
        threads[got[1]] += 1
    print(f"tier {tier['name']}: {len(runs)} planned runs; results {results}; table {path.name} ({table['device']}, "
          f"measured {table.get('date')})")
    print(f"runs found per torch thread count: {dict(threads)}; not found (not run, or no provenance): "
          f"{sum(missing.values())} {dict(missing) if missing else ''}; left out, priced at zero (no transformer, or a "
          f"model the table lacks): {sum(unpriced.values())} {dict(unpriced) if unpriced else ''}")
    head = f"{'rule':<16} {'runs':>5} {'planned h':>10} {'measured h':>11} {'measured/planned':>17} {'median run ratio':>17}"
    print("\n" + head + "\n" + "-" * len(head))
    all_planned = all_measured = 0.0
    for kind, rows in sorted(by_rule.items()):
        planned = sum(p for _, p, _ in rows)
        measured = sum(m for _, _, m in rows)
        all_planned, all_measured = all_planned + planned, all_measured + measured
        ratios = [m / p for _, p, m in rows if p > 0]
        ratio = f"{measured / planned:.2f}" if planned > 0 else "no estimate"
        med = f"{statistics.median(ratios):.2f}" if ratios else "-"
        print(f"{kind:<16} {len(rows):>5} {planned / 3600:>10.3f} {measured / 3600:>11.3f} {ratio:>17} {med:>17}")
    print("-" * len(head))
    total = f"{all_measured / all_planned:.2f}" if all_planned else "-"
    print(f"{'all':<16} {sum(map(len, by_rule.values())):>5} {all_planned / 3600:>10.3f} {all_measured / 3600:>11.3f} {total:>17}")
    if args.runs:
        print()
        for kind, rows in sorted(by_rule.items()):
            for run, planned, measured in sorted(rows, key=lambda x: repr(x[0])):
                print(f"{run!r:<90} planned {planned:9.1f} s  measured {measured:9.1f} s")


if __name__ == "__main__":
    main()
