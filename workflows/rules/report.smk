# The claim report: Markdown table, CSV, JSON, the forest plot, quality vs parameters, the curves and the contrastive
# training curves.


rule report:
    input:
        expand(LAYOUT["verdict"].pattern(R), slug=sorted(PLANS)),
    output:
        md=report(f"{R}/claims.md", caption="../report/claims.rst", category="Claims"),
        csv=f"{R}/claims.csv",
        json=f"{R}/claims.json",
        provenance=f"{R}/provenance.json",
        forest=report(f"{R}/figures/forest.png", caption="../report/forest.rst", category="Figures"),
        params=report(f"{R}/figures/quality-vs-params.png", caption="../report/quality-vs-params.rst", category="Figures"),
        curves=report(f"{R}/figures/curves.png", caption="../report/curves.rst", category="Figures"),
        training=report(f"{R}/figures/contrastive-training.png", caption="../report/contrastive-training.rst", category="Figures"),
    resources:
        **rule_resources("report"),
    log:
        f"{R}/logs/report.log",
    shell:
        "{CLI} report --tier {TIER_Q} --out-dir {R_Q} {input:q} > {log:q} 2>&1"


def report_despite_failures(log):
    """With --keep-going a failed run leaves its claim without a verdict, and the report rule never runs. Write the
    report anyway: every verdict that exists, and an `error` row for each claim that has none, naming the failed
    rule and its log. Only when the whole report was asked for (the default target): a run for a few files must not
    paint every unrequested claim as an error. Snakemake reruns the missing verdicts, and then the report, next time."""
    if not whole_report_asked():
        return
    import json
    from pathlib import Path

    from plmclaims.failures import attribute, failed_jobs
    from plmclaims.report import write_verdicts
    from plmclaims.verdicts import error_verdict

    failures = failed_jobs(log if isinstance(log, (list, tuple)) else [log])
    verdicts = []
    for slug, cplan in sorted(PLANS.items()):
        path = LAYOUT["verdict"].pattern(R).format(slug=slug)
        if os.path.exists(path):
            verdicts.append(json.loads(open(path).read()))
            continue
        needed = [path_of(r) for r in P.all_runs(cplan.score_runs()).values()] + [path]  # upstream runs too
        named = lambda fs: [(f.rule, ", ".join(f.logs) or "see the Snakemake log") for f in fs]  # noqa: E731
        verdicts.append(error_verdict(cplan, TIER, named(attribute(needed, failures)), named(failures)))
    write_verdicts(verdicts, TIER, Path(R))
    # Dated 1970, the report is older than any verdict, so the next run (same settings) recomputes the missing
    # verdicts and the report instead of taking this stand-in, which no job wrote, as done.
    for f in REPORT_FILES:
        if os.path.exists(f):
            os.utime(f, (1, 1))
    errors = sum(v["verdict"] == "error" for v in verdicts)
    sys.stderr.write(f"plmclaims: wrote {R}/claims.md despite failures: {errors} of {len(verdicts)} claims are 'error' "
                     "(their rows name the failed rule and its log)\n")


def whole_report_asked() -> bool:
    """Whether this run was asked for the whole report (the default target), not for a few files."""
    return "all" in {getattr(r, "name", r) for r in workflow.dag.targetrules}


def end_of_run_summary():
    """The terminal's closing lines when the whole report was asked for: verdict counts, one line per claim, where the
    report is and the command that writes Snakemake's HTML report (plmclaims.report.summary.terminal_summary)."""
    path = f"{R}/claims.json"
    if not whole_report_asked() or not os.path.exists(path):
        return
    import json

    from plmclaims.report import terminal_summary

    settings = workflow.config_settings
    with open(path) as f:
        verdicts = json.load(f)
    files = [str(p) for p in settings.configfiles]
    sys.stderr.write(terminal_summary(verdicts, R, dict(settings.config), files) + "\n")


onstart:
    from plmclaims.report.summary import plural

    sys.stderr.write(f"plmclaims: tier {TIER['name']}, {plural(len(PLANS), 'claim')}; each job writes its progress "
                     "to the file on its 'log:' line (follow a long one with tail -f <that file>); the report lands in "
                     f"{R}/claims.md\n")


onsuccess:
    end_of_run_summary()


onerror:
    report_despite_failures(log)
    end_of_run_summary()
