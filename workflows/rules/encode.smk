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
