# The claim report: Markdown table, CSV, JSON and the forest plot.


rule report:
    input:
        expand(LAYOUT["verdict"].pattern(R), slug=sorted(PLANS)),
    output:
        md=report(f"{R}/claims.md", caption="../report/claims.rst", category="Claims"),
        csv=f"{R}/claims.csv",
        json=f"{R}/claims.json",
        forest=report(f"{R}/figures/forest.png", caption="../report/forest.rst", category="Figures"),
        params=report(f"{R}/figures/quality-vs-params.png", caption="../report/quality-vs-params.rst", category="Figures"),
    resources:
        **rule_resources("report"),
    log:
        f"{R}/logs/report.log",
    shell:
        "{CLI} report --tier {TIER_Q} --out-dir {R_Q} {input:q} > {log:q} 2>&1"
