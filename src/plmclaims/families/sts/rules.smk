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
        fit=upstream("fitencode"),
        data=data_of,
    output:
        metrics=LAYOUT["score"].pattern(R),
        predictions=LAYOUT["score"].pattern(R, "predictions.npz"),
    params:
        spec=spec_of,
        vectors=lambda wc, input: f"--vectors {shlex.quote(input.vectors[0])}" if input.vectors else "",
        fit=lambda wc, input: f"--fit-vectors {shlex.quote(input.fit[0])}" if input.fit else "",
    resources:
        **rule_resources("score"),
    log:
        LAYOUT["score"].log(R),
    shell:
        "{CLI} score --spec {params.spec:q} --data-root {DATA_Q} {params.vectors} {params.fit} --out {output.metrics:q} "
        "> {log:q} 2>&1"


# One forward pass of a model over a fit corpus: the NLI sentences whitening and flow are fitted on at paper (the
# hub's all-nli), a local GLUE task's train sentences at tiny.


rule fit_encode:
    input:
        model=lambda wc: [path_of(u) for u in planned(wc).upstream],
        data=data_of,
    output:
        vectors=LAYOUT["fitencode"].pattern(R),
        metrics=LAYOUT["fitencode"].pattern(R, "metrics.json"),
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("encode"),
    log:
        LAYOUT["fitencode"].log(R),
    shell:
        "{CLI} fit-encode --spec {params.spec:q} --data-root {DATA_Q} --resources {RES_Q} --out {output.vectors:q} "
        "--threads {threads} > {log:q} 2>&1"
