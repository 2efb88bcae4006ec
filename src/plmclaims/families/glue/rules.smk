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


# Linear CKA per layer between the pre-trained model and its fine-tuned one (the finetuned run's model/, or a causal
# LM's lm run's), then one score run per layer (the points of a layer curve).
rule cka:
    input:
        # an encoder's finetuned run, or a causal LM's lm-tasks full fine-tuning (its model/ beside metrics.json)
        finetuned=lambda wc: [path_of(u) for u in planned(wc).upstream if u.kind in ("finetuned", "lm")],
        model=lambda wc: [path_of(u) for u in planned(wc).upstream if u.kind in ("pretrain", "lm_model")],
        data=data_of,
    output:
        metrics=LAYOUT["cka"].pattern(R),
        arrays=LAYOUT["cka"].pattern(R, "cka.npz"),
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("cka"),
    log:
        LAYOUT["cka"].log(R),
    shell:
        "{CLI} cka --spec {params.spec:q} --data-root {DATA_Q} --resources {RES_Q} --finetuned {input.finetuned:q} "
        "--out {output.metrics:q} --threads {threads} > {log:q} 2>&1"


rule cka_layer:
    input:
        cka=upstream("cka"),
    output:
        metrics=LAYOUT["cka-layer"].pattern(R),
        predictions=LAYOUT["cka-layer"].pattern(R, "predictions.npz"),
    params:
        spec=spec_of,
    threads: 1
    resources:
        **rule_resources("cka-layer"),
    log:
        LAYOUT["cka-layer"].log(R),
    shell:
        "{CLI} cka-layer --spec {params.spec:q} --cka {input.cka:q} --out {output.metrics:q} > {log:q} 2>&1"
