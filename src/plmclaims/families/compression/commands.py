"""The compression family's subcommand: `compress`."""
from __future__ import annotations

from pathlib import Path


def cmd_compress(args, run, tier) -> None:
    from .runs import compress

    compress(tier, run, args.data_root, args.resources, Path(args.out), args.threads)


def add_commands(run_cmd) -> None:
    run_cmd("compress", cmd_compress, "compress one encoder (heads, weights or int8) and score it by cosine on every "
            "STS benchmark", "--resources", data=True)
