"""The compression family's subcommands: `compress` (an STS encoder) and `compress-glue` (a fine-tuned classifier)."""
from __future__ import annotations

from pathlib import Path


def cmd_compress(args, run, tier) -> None:
    from .runs import compress

    compress(tier, run, args.data_root, args.resources, Path(args.out), args.threads)


def cmd_compress_glue(args, run, tier) -> None:
    from .runs import compress_glue

    compress_glue(tier, run, args.data_root, Path(args.finetuned), Path(args.out), args.threads)


def add_commands(run_cmd) -> None:
    run_cmd("compress", cmd_compress, "compress one encoder (heads, weights or int8) and score it by cosine on every "
            "STS benchmark", "--resources", data=True)
    run_cmd("compress-glue", cmd_compress_glue, "compress one fine-tuned model (heads, weights or int8) and score its "
            "GLUE task's dev split", "--finetuned", data=True)
