# Fine-tune one encoder with one method on one GLUE task for one seed, and score the dev split (glue family).
# The run's spec (method, hyper-parameters, budget, data source, model) travels as JSON; its hash is the {key}.


rule finetune:
    input:
        model=upstream("pretrain"),
        data=data_of,
    output:
        metrics=LAYOUT["finetune"].pattern(R),
        predictions=LAYOUT["finetune"].pattern(R, "predictions.npz"),
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("finetune"),
    log:
        LAYOUT["finetune"].log(R),
    shell:
        "{CLI} finetune --spec {params.spec:q} --data-root {DATA_Q} --resources {RES_Q} --out {output.metrics:q} "
        "--threads {threads} > {log:q} 2>&1"
