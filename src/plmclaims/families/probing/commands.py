"""The probing family's subcommands: `probe-encode` and `probe`, one per rule."""
from __future__ import annotations

from pathlib import Path


def cmd_probe_encode(args, run, tier) -> None:
    from .runs import encode

    encode(tier, run.instance, run.split, args.data_root, args.resources, Path(args.out), args.threads,
           step=run.params.get("step"), words=run.params.get("words"))


def cmd_probe(args, run, tier) -> None:
    from .runs import probe

    probe(tier, run, args.data_root, Path(args.vectors), Path(args.out), args.threads)


def add_commands(run_cmd) -> None:
    run_cmd("probe-encode", cmd_probe_encode, "word vectors of every layer for a seeded UD EWT sample (one forward pass)",
            "--resources", data=True)
    run_cmd("probe", cmd_probe, "fit one probe on one layer's word vectors and score the UD split", "--vectors", data=True)
