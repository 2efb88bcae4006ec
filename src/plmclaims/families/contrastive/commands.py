"""The contrastive family's subcommand: `contrastive`, one per rule."""
from __future__ import annotations

from pathlib import Path


def cmd_contrastive(args, run, tier) -> None:
    from .runs import contrastive

    contrastive(tier, run, args.data_root, args.resources, Path(args.out), args.threads)


def add_commands(run_cmd) -> None:
    run_cmd("contrastive", cmd_contrastive, "train one contrastive objective (or evaluate a released checkpoint), "
            "select on STS-B dev and score every STS benchmark by cosine", "--resources", data=True)
