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


# The same run, keeping the trained model (encoder + task head + tokenizer) in model/ beside metrics.json: planned only
# where a downstream run reads the weights (plan.finetuned_run).
rule finetuned:
    input:
        model=upstream("pretrain"),
        data=data_of,
    output:
        metrics=LAYOUT["finetuned"].pattern(R),
        predictions=LAYOUT["finetuned"].pattern(R, "predictions.npz"),
        model=directory(LAYOUT["finetuned"].pattern(R, "model")),
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("finetune"),
    log:
        LAYOUT["finetuned"].log(R),
    shell:
        "{CLI} finetuned --spec {params.spec:q} --data-root {DATA_Q} --resources {RES_Q} --out {output.metrics:q} "
        "--threads {threads} > {log:q} 2>&1"
