"""The STS family's subcommands: `encode` and `score`, one per rule."""
from __future__ import annotations

from pathlib import Path


def cmd_encode(args, run, tier) -> None:
    from .runs import encode

    encode(tier, run.instance, run.evaluator, run.form, args.data_root, args.resources, Path(args.out), args.threads)


def cmd_score(args, run, tier) -> None:
    from .runs import score

    score(tier, run, args.data_root, Path(args.vectors) if args.vectors else None, Path(args.out))


def add_commands(run_cmd) -> None:
    run_cmd("encode", cmd_encode, "one forward pass of a model over the STS sentences, keeping the layers poolings need",
            "--resources", data=True)
    sp = run_cmd("score", cmd_score, "score one (model, text form, pooling, post-processing) on every STS benchmark",
                 data=True, threads=False)
    sp.add_argument("--vectors", default=None)
