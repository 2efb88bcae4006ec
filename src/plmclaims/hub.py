"""Hub assets for air-gapped clusters: prefetch into a folder with a sha256 manifest, resolve from it offline.

`plmclaims prefetch --tier paper` downloads every hub model and dataset that the selected claims
need (through `huggingface_hub.snapshot_download`, the same call that loads them online) into
`resources/hub/` and writes `manifest.json`. Every later load asks `resolve()` first: a prefetched
asset is read from its folder; with HF_HUB_OFFLINE=1 an asset missing from the manifest fails at
once, naming the asset and the prefetch command.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .data.sts import sha256_file
from .errors import UserError
from .provenance import atomic_write_json

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class HubAsset:
    repo_id: str
    repo_type: str  # "model" or "dataset"
    revision: str | None = None
    why: str = ""

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


def prefetch_command(tier: str | None = None) -> str:
    return f"plmclaims prefetch --tier {tier or '<tier>'} --out {hub_dir()}"


def resolve(repo_id: str, repo_type: str = "model", tier: str | None = None) -> str:
    """A local folder for a prefetched asset; the hub id itself when online; a clear error when offline."""
    if Path(repo_id).is_dir():
        return repo_id
    entry = load_manifest()["assets"].get(f"{repo_type}:{repo_id}")
    if entry is not None:
        path = hub_dir() / entry["path"]
        if path.is_dir():
            return str(path)
    if offline():
        raise UserError(f"{repo_type} {repo_id!r} is not prefetched in {hub_dir()} and HF_HUB_OFFLINE=1; "
                        f"on a machine with network run: {prefetch_command(tier)}")
    return repo_id


def needed_assets(plans, tier: dict) -> list[HubAsset]:
    """Every hub model and dataset the planned runs load, without touching the network."""
    from .data.glue import HUB_ID as GLUE_HUB_ID
    from .data.sts import BENCHMARKS, HUB_IDS
    from .runs import SOURCE_OF_EVALUATOR
    from .tiers import Instance

    found: dict[str, HubAsset] = {}
    for p in plans:
        for run in p.score_runs():
            asset = Instance.parse(run.instance, tier).asset
            spec = tier["assets"][asset]
            if spec.get("source") == "hub":
                a = HubAsset(spec["id"], "model", spec.get("revision"), f"asset {asset}")
                found.setdefault(a.key, a)
            if not hasattr(run, "evaluator"):  # a fine-tuning / lm run: GLUE from the hub when the tier says so
                if tier["data"].get("glue", {}).get("source") == "hub":
                    a = HubAsset(GLUE_HUB_ID, "dataset", None, f"GLUE {run.task}")
                    found.setdefault(a.key, a)
                continue
            source = tier["data"][SOURCE_OF_EVALUATOR[run.evaluator]]
            if source["source"] == "hub":  # every score run, lexical ones too, reads its benchmarks
                for name in BENCHMARKS:
                    repo, rev = HUB_IDS[name]
                    repo = source.get("ids", {}).get(name, repo)
                    a = HubAsset(repo, "dataset", rev if repo == HUB_IDS[name][0] else None, f"STS {name}")
                    found.setdefault(a.key, a)
    return sorted(found.values(), key=lambda a: a.key)


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
    """Download each asset into root/<type>s/<repo_id>/ and record every file's sha256 in the manifest."""
    from huggingface_hub import snapshot_download

    root.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(root)
    for i, a in enumerate(assets, 1):
        rel = Path(f"{a.repo_type}s") / a.repo_id
        print(f"[{i}/{len(assets)}] {a.repo_type} {a.repo_id}" + (f"@{a.revision[:12]}" if a.revision else "") + f"  ({a.why})", flush=True)
        try:
            snapshot_download(a.repo_id, repo_type=a.repo_type, revision=a.revision, local_dir=str(root / rel))
        except Exception as err:  # network, auth, missing revision: name the asset
            raise UserError(f"prefetch of {a.repo_type} {a.repo_id!r} failed: {type(err).__name__}: "
                            f"{str(err).splitlines()[0] if str(err) else ''}") from None
        files = {str(p.relative_to(root / rel)): sha256_file(p) for p in sorted((root / rel).rglob("*"))
                 if p.is_file() and ".cache" not in p.relative_to(root / rel).parts}
        manifest["assets"][a.key] = {"repo_id": a.repo_id, "repo_type": a.repo_type, "revision": a.revision,
                                     "path": str(rel), "files": files, "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                     "for_tier": tier_name}
        atomic_write_json(root / MANIFEST, manifest)  # after each asset: an interrupted prefetch keeps what it has
    return manifest
