# Compress one encoder with one method and setting, encode the STS sentences with it and score them (compression
# family). The uncompressed reference is a run of the same rule, so both sides share every setting but the method.


rule compress:
    input:
        model=lambda wc: [path_of(u) for u in planned(wc).upstream],
        data=data_of,
    output:
        metrics=LAYOUT["compress"].pattern(R),
        predictions=LAYOUT["compress"].pattern(R, "predictions.npz"),
    wildcard_constraints:
        setting=r"[a-z0-9.-]+",
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("compress"),
    log:
        LAYOUT["compress"].log(R),
    shell:
        "{CLI} compress --spec {params.spec:q} --data-root {DATA_Q} --resources {RES_Q} --out {output.metrics:q} "
        "--threads {threads} > {log:q} 2>&1"


# Compress the glue family's fine-tuned model of one task (its `finetuned` run, model/ beside its metrics.json) and
# score the task's dev split. The uncompressed reference is a run of the same rule on the same fine-tuned model.
rule compress_glue:
    input:
        finetuned=upstream("finetuned"),
        data=data_of,
    output:
        metrics=LAYOUT["compress-glue"].pattern(R),
        predictions=LAYOUT["compress-glue"].pattern(R, "predictions.npz"),
    wildcard_constraints:
        setting=r"[a-z0-9.-]+",
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("compress"),
    log:
        LAYOUT["compress-glue"].log(R),
    shell:
        "{CLI} compress-glue --spec {params.spec:q} --data-root {DATA_Q} --finetuned {input.finetuned:q} "
        "--out {output.metrics:q} --threads {threads} > {log:q} 2>&1"
