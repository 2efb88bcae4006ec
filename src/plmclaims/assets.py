"""Which hub models and datasets a plan loads: what `plmclaims prefetch` downloads and the offline check requires.

It reads the planned runs and the tier, so it sits above the plan and the data modules; plmclaims.hub, which
downloads and verifies, stays at the bottom and takes the list this module makes.
"""
from __future__ import annotations

from . import hub, hub_family
from .data import glue, sentences, sts, verify
from .hub import HubAsset
from .plan import all_runs


def needed_assets(plans, tier: dict) -> list[HubAsset]:
    """Every hub model and dataset the planned runs load, each at its pinned revision, without touching the network."""

    found: dict[str, HubAsset] = {}
    for p in plans:
        # each hub model a run or a run it reads holds in its view (its own asset, DiffCSE's generator), as the view
        # names it: the one repository and commit of a hub family's seed or checkpoint (plan.asset_view)
        for run in all_runs(p.score_runs()).values():
            for asset, spec in run.spec["tier"].get("assets", {}).items():
                if spec.get("source") == "hub":
                    why = hub_family.unpinned(tier["assets"][asset], spec["id"]) if "revision" not in spec else ""
                    a = HubAsset(spec["id"], "model", spec.get("revision"), f"asset {asset}", asset, why)
                    found.setdefault(a.key, a)
        for run in p.score_runs():
            for up in run.upstream:  # a post-processing fitted on a hub corpus (whitening / flow on NLI sentences)
                corpus = tier.get("fit_corpora", {}).get(getattr(up, "corpus", None)) if up.kind == "fitencode" else None
                if corpus and corpus["use"] == "hub":
                    a = HubAsset(corpus["id"], "dataset", corpus.get("revision"), f"fit corpus {up.corpus}")
                    found.setdefault(a.key, a)
            # a training run reads its corpus (its recipe's own, or the tier's: the run's view holds the one it reads)
            training = run.spec["tier"].get("contrastive", {}).get("corpus") or {}
            source = sentences.hub_asset(training) if run.kind == "contrastive" else None
            if source and not run.params.get("released") and not run.params.get("transductive"):
                a = HubAsset(source[1], "dataset", source[2], f"contrastive corpus {source[0]}")
                found.setdefault(a.key, a)
            if not hasattr(run, "evaluator"):  # a fine-tuning / lm run: GLUE from the hub when the tier says so
                task = getattr(run, "task", None)  # a GLUE task, or a probe's / generated task's name
                if task in glue.TASKS and "glue" in tier["data"] and verify.glue_source(tier, task)["source"] == "hub":
                    a = HubAsset(glue.HUB_ID, "dataset", glue.HUB_REVISION, f"GLUE {task}")
                    found.setdefault(a.key, a)
                continue
            source = tier["data"][sts.SOURCE_OF_EVALUATOR[run.evaluator]]
            if source["source"] == "hub":  # every score run, lexical ones too, reads its benchmarks
                for name in sts.BENCHMARKS:
                    repo, rev = sts.HUB_IDS[name]
                    repo = source.get("ids", {}).get(name, repo)
                    a = HubAsset(repo, "dataset", rev if repo == sts.HUB_IDS[name][0] else None, f"STS {name}")
                    found.setdefault(a.key, a)
    if found:  # the folder these assets load from must hold real assets, or a rehearsal's stand-ins for a rehearsal
        hub.check_standins(tier["name"], bool(tier.get("rehearsal")))
    return sorted(found.values(), key=lambda a: a.key)
