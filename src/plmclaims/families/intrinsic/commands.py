"""The intrinsic family's subcommand: `geometry`, one per rule (the encode is the probing family's `probe-encode`)."""
from __future__ import annotations

from pathlib import Path


def cmd_geometry(args, run, tier) -> None:
    from .runs import geometry

    geometry(tier, run, args.data_root, Path(args.vectors), Path(args.out), args.threads)


def add_commands(run_cmd) -> None:
    run_cmd("geometry", cmd_geometry, "anisotropy, self-similarity and explainable variance of one layer's word vectors",
            "--vectors", data=True)
