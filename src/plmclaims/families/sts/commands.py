"""The STS family's subcommands: `encode` and `score`, one per rule."""
from __future__ import annotations

from pathlib import Path


def cmd_encode(args, run, tier) -> None:
    from .runs import encode

    encode(tier, run.instance, run.evaluator, run.form, args.data_root, args.resources, Path(args.out), args.threads)


def cmd_score(args, run, tier) -> None:
    from .runs import score

    score(tier, run, args.data_root, Path(args.vectors) if args.vectors else None, Path(args.out),
          Path(args.fit_vectors) if args.fit_vectors else None)


def cmd_fit_encode(args, run, tier) -> None:
    from .runs import fit_encode

    fit_encode(tier, run.instance, run.corpus, args.data_root, args.resources, Path(args.out), args.threads)


def add_commands(run_cmd) -> None:
    run_cmd("encode", cmd_encode, "one forward pass of a model over the STS sentences, keeping the layers poolings need",
            "--resources", data=True)
    sp = run_cmd("score", cmd_score, "score one (model, text form, pooling, post-processing) on every STS benchmark",
                 data=True, threads=False)
    sp.add_argument("--vectors", default=None)
    sp.add_argument("--fit-vectors", default=None, help="a fitencode run's vectors.npz: the post-processing's fit corpus")
    run_cmd("fit-encode", cmd_fit_encode, "one forward pass of a model over a hub fit corpus (NLI sentences) that "
            "whitening or flow is fitted on", "--resources", data=True)
