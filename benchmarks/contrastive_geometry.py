"""Why a contrastive objective's STS-B dev score moves: Spearman, alignment and uniformity over training (issue 10).

At the micro tier the objectives that pool [CLS] (SimCSE, DiffCSE, RankEncoder) fall on STS-B dev within the first 50
steps from the micro-BERT, while the mean-pooled ones hold. This script trains one objective through the family's own
loop (plmclaims.methods.contrastive.train: the micro tier's corpus, budget and seed) and evaluates every
--eval-every steps under several test-time poolings of the SAME training (the loss never reads the test pooling, and
the same seed gives the same batches and dropout masks, so each pooling's run trains the same weights). Printed per
pooling and step: STS-B dev Spearman x 100, alignment (mean squared distance of the gold > 4 pairs, lower is closer)
and uniformity (log mean exp(-2 d^2) over all sentence pairs, lower is more spread), as SimCSE section 5 reads them.

A falling Spearman with falling uniformity and rising alignment is the signature of vectors pushed apart without
keeping paraphrases together: the objective separates the sentences of a batch by features STS does not reward.

    python benchmarks/contrastive_geometry.py [--objective simcse] [--poolings cls-before-pooler mean] \\
        [--steps 100] [--eval-every 10] [--lr 1e-5] [--data-root ../shared/data] [--json out.json]
    python benchmarks/contrastive_geometry.py --smallest  # two steps of 4 sentences, 16 dev pairs: the code path
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent  # benchmarks/
sys.path.insert(0, str(HERE))
from bench_contrastive import micro_bert  # noqa: E402  (the same model lookup as the speed benchmark)


def main() -> None:
    import torch

    from plmclaims.data import sts
    from plmclaims.data.sentences import load_corpus
    from plmclaims.methods.contrastive.train import train
    from plmclaims.tiers import load_tier

    micro = load_tier("micro")["contrastive"]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objective", default="simcse")
    ap.add_argument("--poolings", nargs="+", default=["cls-before-pooler", "mean"])
    ap.add_argument("--steps", type=int, default=micro["budget"]["steps"])
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--lr", type=float, default=micro["budget"]["lr"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--random-weights", action="store_true", help="train the random-weights twin instead")
    ap.add_argument("--data-root",
                    default=os.environ.get("PLMCLAIMS_DATA_ROOT", str(HERE.parent.parent / "shared" / "data")))
    ap.add_argument("--resources", default=str(HERE.parent / "resources" / "micro"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="also write the curves to this file")
    ap.add_argument("--smallest", action="store_true",
                    help="the code path in seconds: two steps of 4 sentences from 64, 16 dev pairs, one thread")
    args = ap.parse_args()
    from plmclaims.families.sts.runs import _subsample

    small = {"batch_size": 4, "max_length": 16} if args.smallest else {}
    if args.smallest:
        args.steps, args.eval_every, args.threads = 2, 1, 1
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(args.threads)
    dev = _subsample(sts.load({"source": "local", "path": str(Path(args.data_root) / "senteval")}, "STSBenchmark",
                              "tokenised", "dev", args.data_root), 16 if args.smallest else None)
    corpus = load_corpus({**micro["corpus"], **({"max_sentences": 64} if args.smallest else {})})
    budget = {**micro["budget"], "steps": args.steps, "eval_every": args.eval_every, "lr": args.lr, **small}
    curves = {}
    with tempfile.TemporaryDirectory() as scratch:
        path, what = micro_bert(Path(args.resources), Path(scratch))
        print(f"model: {what}{' (random-weights twin)' if args.random_weights else ''}; {args.objective}, "
              f"budget {budget}, seed {args.seed}")
        for pooling in args.poolings:
            res = train(args.objective, path, {"pooling": pooling}, corpus, dev, budget, seed=args.seed, device="cpu",
                        random_weights=args.random_weights, desc=f"{args.objective}/{pooling}")
            curves[pooling] = {"history": res["history"], "losses": res["losses"]}
    print(f"{'pooling':<18} {'step':>5} {'loss':>6} {'STS-B dev':>9} {'alignment':>9} {'uniformity':>10}")
    for pooling, c in curves.items():
        for h in c["history"]:
            loss = c["losses"][h["step"] - 1] if h["step"] else float("nan")
            print(f"{pooling:<18} {h['step']:>5} {loss:>6.3f} {100 * h['stsb_dev_spearman']:>9.2f} "
                  f"{h['alignment']:>9.3f} {h['uniformity']:>10.3f}")
    losses = [c["losses"] for c in curves.values()]
    print("one training under every pooling (identical losses):", all(x == losses[0] for x in losses))
    if args.json:
        Path(args.json).write_text(json.dumps({"model": what, "args": vars(args), "curves": curves}, indent=1))


if __name__ == "__main__":
    main()
