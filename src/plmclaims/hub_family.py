"""Hub assets released as a family of seeded pre-trainings: one hub repository per pre-training seed, and for some
seeds one repository per saved step (MultiBERTs: `google/multiberts-seed_{seed}`, 25 BERT-base pre-trainings, with
checkpoints of seeds 0-4 at `google/multiberts-seed_{seed}-step_{step_k}k`).

The tier names such an asset once, with the repository pattern (`id` holding `{seed}`), the seeds to run (`seeds`),
each seed's commit (`revisions`, seed -> 40 hex) and, where the family saved them, the checkpoints:

    checkpoints: {id: <pattern with {seed} and {step} or {step_k} (the step in thousands)>,
                  final_step: <the step of the seed's own repository>, steps: [<steps to run>],
                  revisions: {<step>: {<seed>: <commit>}}}

A repository without a known commit is loaded at `main` only with its reason in `unpinned` (repository id ->
reason), which prefetch, `plmclaims plan` and the report repeat. Each instance (`<asset>.s<seed>`) then reads one
repository at one commit, and its runs hold that repository and commit only (resolve), so a run's key names exactly
the weights it loads; the random-weights twin reads the first seed's repository for its configuration and tokenizer.

This module works on asset specs (dicts) and imports nothing from the package but its errors: tiers, plan, hub and
the stand-ins ask it.
"""
from __future__ import annotations

import re
import string

from .errors import UserError

# the fields only the family has: resolve() replaces them by the one repository and commit an instance reads
FAMILY_FIELDS = ("revisions", "checkpoints", "unpinned")
COMMIT = re.compile(r"[0-9a-f]{40}")


def is_family(spec: dict) -> bool:
    return spec.get("source") == "hub" and "{seed}" in str(spec.get("id", ""))


def _name(pattern: str, seed: int, step: int | None = None) -> str:
    return pattern.format(seed=seed, step=step, step_k=None if step is None else step // 1000)


def seeds(spec: dict) -> list[int]:
    return [int(s) for s in spec.get("seeds", [])]


def steps(spec: dict) -> list[int] | None:
    """The steps a family saved weights at that the tier runs, the final step last; None without checkpoints."""
    ck = spec.get("checkpoints")
    if not is_family(spec) or not ck:
        return None
    chosen = ck.get("steps", sorted(ck["revisions"], key=int))
    return sorted({int(s) for s in chosen} | {int(ck["final_step"])})


def repo(spec: dict, seed: int | None = None, step: int | None = None) -> tuple[str, str | None]:
    """The repository and commit (None: main) one seed of the asset loads, at `step` (None or the final step: the
    seed's own repository). A single-repository asset is its `id` and `revision` whatever the seed."""
    if not is_family(spec):
        return spec["id"], spec.get("revision")
    seed = seeds(spec)[0] if seed is None else int(seed)
    ck = spec.get("checkpoints") or {}
    if step is None or int(step) == int(ck.get("final_step", -1)):
        return _name(spec["id"], seed), (spec.get("revisions") or {}).get(str(seed))
    if not ck or str(int(step)) not in ck["revisions"]:
        saved = ", ".join(map(str, steps(spec) or [])) or "none"
        raise UserError(f"hub asset {spec['id']!r} has no checkpoint at step {step}; its checkpoints: {saved}")
    return _name(ck["id"], seed, int(step)), ck["revisions"][str(int(step))].get(str(seed))


def resolve(spec: dict, seed: int | None = None, step: int | None = None) -> dict:
    """The spec one instance's runs hold: the family's fields replaced by its one repository and commit."""
    if not is_family(spec):
        return spec
    repo_id, revision = repo(spec, seed, step)
    out = {k: v for k, v in spec.items() if k not in FAMILY_FIELDS + ("id", "revision")}
    out["id"] = repo_id
    if revision is not None:
        out["revision"] = revision
    return out


def unpinned(spec: dict, repo_id: str) -> str:
    """Why a repository of this asset loads main (its `unpinned` entry; a single-repository asset may give one
    reason as text); '' when none is given."""
    why = spec.get("unpinned")
    if isinstance(why, str):
        return why if repo_id == spec.get("id") else ""
    return (why or {}).get(repo_id, "")


def unpinned_repos(tier: dict) -> dict[str, str]:
    """Every hub repository of the tier that loads main with the reason the tier gives: what reports and plans repeat
    (an asset left without a commit and without a reason is not listed: the tier does not say why)."""
    out = {}
    for spec in tier.get("assets", {}).values():
        if spec.get("source") != "hub":
            continue
        pins = repos(spec) if is_family(spec) else [(spec["id"], spec.get("revision"), 0, None)]
        for repo_id, revision, _, _ in pins:
            if revision is None and unpinned(spec, repo_id):
                out[repo_id] = unpinned(spec, repo_id)
    return out


def repos(spec: dict) -> list[tuple[str, str | None, int, int | None]]:
    """(repository, commit or None, seed, step or None for the final weights) for every seed and step the tier runs."""
    out = [(*repo(spec, s), s, None) for s in seeds(spec)]
    for step in (steps(spec) or [])[:-1]:
        out += [(*repo(spec, s, step), s, step) for s in seeds(spec)]
    return out


def check(name: str, spec: dict, path) -> None:
    """A family asset names a pattern, seeds, and for every seed and checkpoint a commit or the reason it has none."""
    where = f"{path}: field 'assets.{name}"
    if not is_family(spec):
        if isinstance(spec.get("unpinned"), str) and spec.get("revision"):
            raise UserError(f"{where}': it has a revision and an 'unpinned' reason; keep the one that is true")
        if "checkpoints" in spec or "revisions" in spec:
            raise UserError(f"{where}.id': 'checkpoints' and 'revisions' belong to a family of seeded pre-trainings, "
                            "whose hub id holds '{seed}' (e.g. google/multiberts-seed_{seed}); name one revision "
                            "otherwise")
        return
    fields = {f for _, f, _, _ in string.Formatter().parse(spec["id"]) if f}
    if fields != {"seed"}:
        raise UserError(f"{where}.id': got {spec['id']!r}; a family's id has the field {{seed}} and no other")
    if not spec.get("seeds"):
        raise UserError(f"{where}.seeds': a family of pre-trainings ({spec['id']}) needs the seeds to run, e.g. "
                        "[0, 1, 2]")
    if spec.get("revision"):
        raise UserError(f"{where}.revision': a family pins each seed's repository in 'revisions' (seed -> commit)")
    if isinstance(spec.get("unpinned"), str):
        raise UserError(f"{where}.unpinned': a family names each repository that has no commit, with its reason "
                        f"(e.g. {_name(spec['id'], seeds(spec)[0])}: <why>)")
    ck = spec.get("checkpoints")
    if ck:
        fields = {f for _, f, _, _ in string.Formatter().parse(ck["id"]) if f}
        if "seed" not in fields or not fields & {"step", "step_k"} or fields - {"seed", "step", "step_k"}:
            raise UserError(f"{where}.checkpoints.id': got {ck['id']!r}; it needs {{seed}} and {{step}} (or "
                            "{step_k}, the step in thousands) and no other field")
        unknown = [s for s in ck.get("steps", []) if str(s) not in ck["revisions"]]
        if unknown:
            raise UserError(f"{where}.checkpoints.steps': step {unknown[0]} has no entry in 'checkpoints.revisions'; "
                            f"allowed values: {', '.join(sorted(ck['revisions'], key=int))}")
        if max(steps(spec)) != int(ck["final_step"]):
            raise UserError(f"{where}.checkpoints.final_step': got {ck['final_step']}; it must be above every step "
                            "in 'checkpoints.steps' (the seed's own repository holds the final weights)")
        if "step_k" in fields and any(s % 1000 for s in steps(spec)):
            raise UserError(f"{where}.checkpoints.steps': {{step_k}} names steps in thousands; every step must be a "
                            "multiple of 1000")
    for repo_id, revision, seed, step in repos(spec):
        field = f"revisions.{seed}" if step is None else f"checkpoints.revisions.{step}.{seed}"
        if revision is None and not unpinned(spec, repo_id):
            raise UserError(f"{where}.{field}': {repo_id} has no commit; pin it (40 hex digits, as the hub's history "
                            f"shows it) or say why it cannot be in 'assets.{name}.unpinned' ({repo_id}: <why>)")
        if revision is not None and not COMMIT.fullmatch(revision):
            raise UserError(f"{where}.{field}': got {revision!r}; a commit is 40 lower-case hex digits (a branch "
                            "would move)")
