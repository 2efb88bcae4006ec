# Decide one claim's checks from its runs' predictions (paired bootstrap).


rule verdict:
    input:
        lambda wc: [r.path(R) for r in PLANS[wc.slug].score_runs()],
        claim=lambda wc: str(PLANS[wc.slug].claim.path),
    output:
        f"{R}/claims/{{slug}}.json",
    resources:
        **rule_resources("verdict"),
    log:
        f"{R}/logs/verdict-{{slug}}.log",
    shell:
        "{CLI} verdict --tier {TIER_ARG} --claims-dir {config[claims_dir]} --claim {wildcards.slug} --results {R} "
        "--out {output} > {log} 2>&1"
