"""The transfer family's subcommand: `transfer`, one per rule."""
from __future__ import annotations

from pathlib import Path


def cmd_transfer(args, run, tier) -> None:
    from .runs import transfer

    transfer(tier, run, args.resources, Path(args.out), args.threads)


def add_commands(run_cmd) -> None:
    run_cmd("transfer", cmd_transfer, "train a frozen transformer's input, output, positions and LayerNorms on one "
            "generated task and seed; score its test items", "--resources")
