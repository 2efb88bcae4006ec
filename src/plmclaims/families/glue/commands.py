"""The GLUE family's subcommands: `finetune`, and `finetuned` (the same run, keeping the trained model)."""
from __future__ import annotations

from pathlib import Path


def cmd_finetune(args, run, tier) -> None:
    from .runs import finetune

    finetune(tier, run, run.params, args.data_root, args.resources, Path(args.out), args.threads)


def cmd_finetuned(args, run, tier) -> None:
    from .runs import finetune

    finetune(tier, run, run.params, args.data_root, args.resources, Path(args.out), args.threads, save_model=True)


def add_commands(run_cmd) -> None:
    run_cmd("finetune", cmd_finetune, "fine-tune one encoder with one method on one GLUE task and seed; score dev",
            "--resources", data=True)
    run_cmd("finetuned", cmd_finetuned, "the same as finetune, and save the trained model (model/ beside --out)",
            "--resources", data=True)
