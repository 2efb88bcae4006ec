# One forward pass per (data source, model instance, text form), shared by every pooling and claim.


rule encode:
    input:
        model=lambda wc: [path_of(u) for u in planned(wc).upstream],
        data=data_of,
    output:
        vectors=LAYOUT["encode"].pattern(R),
        metrics=LAYOUT["encode"].pattern(R, "metrics.json"),
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("encode"),
    log:
        LAYOUT["encode"].log(R),
    shell:
        "{CLI} encode --spec {params.spec:q} --data-root {DATA_Q} --resources {RES_Q} --out {output.vectors:q} "
        "--threads {threads} > {log:q} 2>&1"


# Score one (instance, text form, pooling, post-processing) on every benchmark of its evaluator.


rule score:
    input:
        vectors=upstream("encode"),
        data=data_of,
    output:
        metrics=LAYOUT["score"].pattern(R),
        predictions=LAYOUT["score"].pattern(R, "predictions.npz"),
    params:
        spec=spec_of,
        vectors=lambda wc, input: f"--vectors {shlex.quote(input.vectors[0])}" if input.vectors else "",
    resources:
        **rule_resources("score"),
    log:
        LAYOUT["score"].log(R),
    shell:
        "{CLI} score --spec {params.spec:q} --data-root {DATA_Q} {params.vectors} --out {output.metrics:q} > {log:q} 2>&1"
