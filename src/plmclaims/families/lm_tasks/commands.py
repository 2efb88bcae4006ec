"""The lm-tasks family's subcommands: `lm-tasks`, `lm-train` and `lm-eval`."""
from __future__ import annotations

from pathlib import Path


def cmd_lm_tasks(args, run, tier) -> None:
    from .runs import lm_tasks

    lm_tasks(tier, [run.task], args.data_root, Path(args.out))


def cmd_lm_train(args, run, tier) -> None:
    from .runs import lm_train

    lm_train(tier, run, run.params, args.data_root, args.resources, Path(args.out), args.threads)


def cmd_lm_eval(args, run, tier) -> None:
    from .runs import lm_eval

    lm_eval(tier, run, args.resources, args.results, Path(args.out), args.threads)


def add_commands(run_cmd) -> None:
    run_cmd("lm-tasks", cmd_lm_tasks, "write one lm-eval multiple-choice task (YAML and docs) from the local GLUE dev file",
            data=True, threads=False)
    run_cmd("lm-train", cmd_lm_train, "train a causal LM with one method on one task's train split (prompt format of lm-eval)",
            "--resources", data=True)
    run_cmd("lm-eval", cmd_lm_eval, "score a causal LM (with its adapter, if trained) with lm-eval on one generated task",
            "--resources", "--results")
