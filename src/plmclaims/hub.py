"""Hub assets for air-gapped clusters: prefetch into a folder with a sha256 manifest, resolve from it offline.

`plmclaims prefetch --tier paper` downloads every hub model and dataset that the selected claims
need (through `huggingface_hub.snapshot_download`, the same call that loads them online), each at
its pinned commit, into `resources/hub/` and writes `manifest.json` with the commit and every
file's sha256. Every later load asks `resolve()` first: a prefetched asset is checked against the
manifest and read from its folder; with HF_HUB_OFFLINE=1 an asset missing from the manifest fails
at once, naming the asset and the prefetch command.

This module sits at the bottom of the package: it imports only errors and provenance. Which
assets a set of claims needs is planned above it (plmclaims.assets).
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError
from .provenance import atomic_write_json, sha256_file

MANIFEST = "manifest.json"
# Every loader here is PyTorch: weights for other frameworks are never fetched (bert-base-uncased alone carries
# TensorFlow, Flax, Rust and CoreML copies of its 440 MB of weights).
OTHER_FRAMEWORKS = ["*.h5", "*.msgpack", "*.ot", "*.tflite", "*.mlmodel", "onnx/*", "openvino/*", "coreml/*"]

# prefetched folders whose files matched the manifest in this process: each job hashes an asset once
_verified: set[tuple[str, str | None]] = set()


@dataclass(frozen=True)
class HubAsset:
    repo_id: str
    repo_type: str  # "model" or "dataset"
    revision: str | None = None  # a commit (40 hex); None loads the hub's main branch
    why: str = ""
    asset: str = ""  # the tier asset it belongs to (a hub family has one repository per seed and checkpoint)
    unpinned: str = ""  # why it has no commit, as the tier says

    @property
    def pin(self) -> str:
        """How it is pinned, in the words prefetch prints: '@<commit>', or main and why."""
        if self.revision:
            return f"@{self.revision}"
        return "@main (unpinned" + (f": {self.unpinned})" if self.unpinned else "; the tier gives no commit)")

    @property
    def key(self) -> str:
        return f"{self.repo_type}:{self.repo_id}"


def hub_dir() -> Path:
    return Path(os.environ.get("PLMCLAIMS_HUB_DIR", "resources/hub"))


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def load_manifest(root: Path | None = None) -> dict:
    path = (root or hub_dir()) / MANIFEST
    if not path.exists():
        return {"assets": {}}
    return json.loads(path.read_text())


def check_standins(tier_name: str, rehearsal: bool) -> None:
    """Stand-ins (random weights, made by `plmclaims rehearse`) are loaded by a rehearsal tier and by nothing else: a
    rehearsal refuses a hub folder of real assets, and every other tier a folder of stand-ins."""
    marked = load_manifest().get("standins")
    if rehearsal and not marked:
        raise UserError(f"tier {tier_name} is a rehearsal: its hub assets are stand-ins with random weights, which "
                        f"{hub_dir()} does not hold; run it with: plmclaims rehearse --tier {tier_name} --data-root <data root>")
    if marked and not rehearsal:
        raise UserError(f"{hub_dir() / MANIFEST} holds stand-ins with random weights (made by plmclaims rehearse for tier "
                        f"{marked.get('tier')}), and tier {tier_name} is not a rehearsal; point PLMCLAIMS_HUB_DIR at a real "
                        f"prefetch: {prefetch_command(tier_name)}")


def prefetch_command(tier: str | None = None) -> str:
    return f"plmclaims prefetch --tier {tier or '<tier>'} --out {hub_dir()}"


def _files(folder: Path) -> list[str]:
    """The asset's files relative to its folder, without huggingface_hub's download bookkeeping (.cache)."""
    return [str(p.relative_to(folder)) for p in sorted(folder.rglob("*"))
            if p.is_file() and ".cache" not in p.relative_to(folder).parts]


def verify(entry: dict, tier: str | None = None) -> None:
    """Check a prefetched asset's files against the sha256s its manifest entry recorded; once per process."""
    folder = hub_dir() / entry["path"]
    done = (str(folder.resolve()), entry.get("revision"))
    if done in _verified:
        return
    # prefetch keeps files already in the folder, so the way back to the recorded bytes starts from an empty folder
    fix = f"delete {folder} and prefetch it again: {prefetch_command(tier)}"
    for rel, want in entry["files"].items():
        path = folder / rel
        if not path.is_file():
            raise UserError(f"{path}: missing, though {MANIFEST} lists it; {fix}")
        if sha256_file(path) != want:
            raise UserError(f"{path}: sha256 differs from {MANIFEST} (the file changed after prefetch); {fix}")
    extra = sorted(set(_files(folder)) - set(entry["files"]))
    if extra:  # a file added after prefetch (say a second weights file) would be loaded unchecked
        raise UserError(f"{folder / extra[0]}: not in {MANIFEST} (added after prefetch; {len(extra)} such file(s)); {fix}")
    check_tokenizer(folder)
    _verified.add(done)


def check_tokenizer(folder: Path) -> None:
    """A model folder whose tokenizer names more ids than the model's embedding has rows would fail mid-run with an
    index error (a tokenizer of another architecture: a byte-level BPE's 50k ids for BERT's 30k rows): stop at load."""
    config, tok = folder / "config.json", folder / "tokenizer.json"
    if not (config.is_file() and tok.is_file()):
        return
    rows = json.loads(config.read_text()).get("vocab_size")
    data = json.loads(tok.read_text())
    vocab = (data.get("model") or {}).get("vocab") or {}
    top = max(vocab.values()) if isinstance(vocab, dict) and vocab else len(vocab) - 1  # Unigram: a list, ids by position
    top = max([top, *(t["id"] for t in data.get("added_tokens") or [])])
    if isinstance(rows, int) and top >= rows:
        raise UserError(f"{tok}: the tokenizer has ids up to {top}, but config.json's vocab_size is {rows} (the embedding's "
                        f"rows): the tokenizer belongs to another model; delete {folder} and prefetch it again")


def resolve(repo_id: str, repo_type: str = "model", tier: str | None = None, revision: str | None = None) -> str:
    """What to load: a verified prefetched folder; online, a model's snapshot at `revision` (the hub id itself when
    unpinned, or for a dataset, whose caller passes `revision` to datasets.load_dataset); offline, a clear error."""
    if Path(repo_id).is_dir():
        return repo_id
    entry = load_manifest()["assets"].get(f"{repo_type}:{repo_id}")
    if entry is not None and (hub_dir() / entry["path"]).is_dir():
        if revision is not None and entry.get("revision") != revision:
            raise UserError(f"{repo_type} {repo_id!r} was prefetched into {hub_dir()} at revision {entry.get('revision')}, "
                            f"but the tier pins {revision}; prefetch it again: {prefetch_command(tier)}")
        verify(entry, tier)
        return str(hub_dir() / entry["path"])
    if offline():
        raise UserError(f"{repo_type} {repo_id!r} is not prefetched in {hub_dir()} and HF_HUB_OFFLINE=1; "
                        f"on a machine with network run: {prefetch_command(tier)}")
    if revision is None or repo_type != "model":
        return repo_id
    # the hub cache's snapshot of exactly the pinned commit: from_pretrained and sentence-transformers read this folder,
    # so no loader can fall back to main
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(repo_id, revision=revision, ignore_patterns=OTHER_FRAMEWORKS)
    except Exception as err:  # network, auth, a revision the repository lacks: name the asset
        raise UserError(f"model {repo_id!r} at revision {revision} could not be downloaded: {type(err).__name__}: "
                        f"{str(err).splitlines()[0] if str(err) else ''}"[:300]) from None


def commit(repo_id: str, repo_type: str = "model", revision: str | None = None) -> str | None:
    """The commit a load of this asset reads: the manifest's for a prefetched copy, else the pin (None: main, online)."""
    entry = load_manifest()["assets"].get(f"{repo_type}:{repo_id}")
    return (entry or {}).get("revision") or revision


def check_offline(assets: list[HubAsset], tier_name: str) -> None:
    """With HF_HUB_OFFLINE=1, stop before any compute if a needed asset was never prefetched."""
    if not offline():
        return
    have = load_manifest()["assets"]
    missing = [a for a in assets if a.key not in have and not Path(a.repo_id).is_dir()]
    if missing:
        names = ", ".join(f"{a.repo_type} {a.repo_id} ({a.why})" for a in missing)
        raise UserError(f"HF_HUB_OFFLINE=1 but {len(missing)} hub asset(s) are not in {hub_dir() / MANIFEST}: {names}; "
                        f"on a machine with network run: {prefetch_command(tier_name)}")


def prefetch(assets: list[HubAsset], root: Path, tier_name: str) -> dict:
    """Download each asset at its commit into root/<type>s/<repo_id>/; record the commit and every file's sha256."""
    from huggingface_hub import HfApi, snapshot_download

    root.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(root)
    for i, a in enumerate(assets, 1):
        rel = Path(f"{a.repo_type}s") / a.repo_id
        try:
            # an unpinned asset is fetched at the commit main points to now, and the manifest records that commit
            sha = HfApi().repo_info(a.repo_id, repo_type=a.repo_type, revision=a.revision).sha
            print(f"[{i}/{len(assets)}] {a.repo_type} {a.repo_id}@{sha[:12]}" + ("" if a.revision else f" {a.pin[1:]}")
                  + f"  ({a.why})", flush=True)
            old = manifest["assets"].get(a.key)
            if old is not None and old.get("revision") != sha:  # files of another commit must not enter the manifest
                shutil.rmtree(root / rel, ignore_errors=True)
            snapshot_download(a.repo_id, repo_type=a.repo_type, revision=sha, local_dir=str(root / rel),
                              ignore_patterns=OTHER_FRAMEWORKS if a.repo_type == "model" else None)
        except Exception as err:  # network, auth, missing revision: name the asset
            raise UserError(f"prefetch of {a.repo_type} {a.repo_id!r} failed: {type(err).__name__}: "
                            f"{str(err).splitlines()[0] if str(err) else ''}") from None
        files = {f: sha256_file(root / rel / f) for f in _files(root / rel)}
        manifest["assets"][a.key] = {"repo_id": a.repo_id, "repo_type": a.repo_type, "revision": sha,
                                     "pinned": a.revision is not None, "path": str(rel), "files": files,
                                     **({"unpinned": a.unpinned} if a.unpinned else {}),
                                     "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                     "for_tier": tier_name}
        atomic_write_json(root / MANIFEST, manifest)  # after each asset: an interrupted prefetch keeps what it has
    return manifest
