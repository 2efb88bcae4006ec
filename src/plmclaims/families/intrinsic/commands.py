"""The intrinsic family's subcommands, one per rule: `geometry` (the encode is the probing family's `probe-encode`),
`attention-maps` and `attention`."""
from __future__ import annotations

from pathlib import Path


def cmd_geometry(args, run, tier) -> None:
    from .runs import geometry

    geometry(tier, run, args.data_root, Path(args.vectors), Path(args.out), args.threads)


def cmd_attention_maps(args, run, tier) -> None:
    from .runs import attention_maps

    attention_maps(tier, run, args.data_root, args.resources, Path(args.out), args.threads)


def cmd_attention(args, run, tier) -> None:
    from .runs import attention

    attention(tier, run, Path(args.maps), Path(args.out))


def add_commands(run_cmd) -> None:
    run_cmd("geometry", cmd_geometry, "anisotropy, self-similarity and explainable variance of one layer's word vectors",
            "--vectors", data=True)
    run_cmd("attention-maps", cmd_attention_maps, "every layer's attention to [SEP], [CLS] and punctuation (and the MLM "
            "loss's gradient on [SEP]) per sentence of the split's sample", "--resources", data=True)
    run_cmd("attention", cmd_attention, "one layer's attention benchmarks from the attention maps", "--maps",
            threads=False)
