# Decide one claim's checks from its runs' predictions (paired bootstrap).


rule verdict:
    input:
        lambda wc: [path_of(r) for r in PLANS[wc.slug].score_runs()],
    output:
        LAYOUT["verdict"].pattern(R),
    params:
        claim=lambda wc: PLANS[wc.slug].claim.id,
        # the claim as loaded and the tier's judging settings (bootstrap, judges): a change reruns this verdict
        # only; the claim file is not an input, so a copy of the claims folder reruns nothing
        settings=lambda wc: P.verdict_params(PLANS[wc.slug], TIER),
    resources:
        **rule_resources("verdict"),
    log:
        R + "/logs/verdict-{slug}.log",
    shell:
        "{CLI} verdict --tier {TIER_Q} --claims-dir {CLAIMS_Q} --claim {params.claim:q} --results {R_Q} "
        "--data-root {DATA_Q} --out {output:q} > {log:q} 2>&1"
