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
