"""The GLUE family's subcommands: `finetune`, `finetuned` (the same run, keeping the trained model), `cka` (linear
CKA per layer between the pre-trained and the fine-tuned encoder) and `cka-layer` (one layer of it as a score run)."""
from __future__ import annotations

from pathlib import Path


def cmd_finetune(args, run, tier) -> None:
    from .runs import copy_saved_twin, finetune

    if args.copy_of:
        return copy_saved_twin(tier, run, Path(args.copy_of), args.resources, Path(args.out))
    finetune(tier, run, run.params, args.data_root, args.resources, Path(args.out), args.threads)


def cmd_finetuned(args, run, tier) -> None:
    from .runs import finetune

    finetune(tier, run, run.params, args.data_root, args.resources, Path(args.out), args.threads, save_model=True)


def cmd_cka(args, run, tier) -> None:
    from .runs import cka

    cka(tier, run, args.data_root, args.resources, Path(args.finetuned), Path(args.out), args.threads)


def cmd_cka_layer(args, run, tier) -> None:
    from .runs import cka_layer

    cka_layer(tier, run, Path(args.cka), Path(args.out))


def add_commands(run_cmd) -> None:
    sp = run_cmd("finetune", cmd_finetune, "fine-tune one encoder with one method on one GLUE task and seed; score dev",
                 "--resources", data=True)
    sp.add_argument("--copy-of", default=None, help="the metrics.json of this run's finetuned twin (the same training, "
                    "model kept): copy its scores and predictions instead of training again")
    run_cmd("finetuned", cmd_finetuned, "the same as finetune, and save the trained model (model/ beside --out)",
            "--resources", data=True)
    run_cmd("cka", cmd_cka, "linear CKA per layer between a pre-trained encoder and its fine-tuned model (finetuned run)",
            "--resources", "--finetuned", data=True)
    run_cmd("cka-layer", cmd_cka_layer, "one layer of a cka run as a score run (per-example jackknife pseudo-values)",
            "--cka", threads=False)
