# The language-model variant (lm-tasks family): a causal LM, PEFT-trained per task, scored by lm-eval on
# multiple-choice tasks generated from the local GLUE files. Nothing is fetched: lm-eval reads the generated
# YAMLs and JSONL, and the model from resources/ (rule lm_model, assets.smk). lm_train and lm_eval share one run
# folder and key.


rule lm_tasks:
    input:
        data_of,
    output:
        LAYOUT["lm_tasks"].pattern(R),
    params:
        spec=spec_of,
        out=lambda wc, output: os.path.dirname(output[0]),
    resources:
        **rule_resources("lm_tasks"),
    log:
        LAYOUT["lm_tasks"].log(R),
    shell:
        "{CLI} lm-tasks --spec {params.spec:q} --data-root {DATA_Q} --out {params.out:q} > {log:q} 2>&1"


rule lm_train:
    input:
        model=upstream("lm_model"),
        data=data_of,
    output:
        LAYOUT["lm"].pattern(R, "train.json"),
    wildcard_constraints:
        method=r"(?!zero-shot/)[a-z0-9-]+",
    params:
        spec=spec_of,
        out=lambda wc, output: os.path.join(os.path.dirname(output[0]), "model"),
    threads: THREADS
    resources:
        **rule_resources("lm_train"),
    log:
        LAYOUT["lm"].log(R, "train"),
    shell:
        "{CLI} lm-train --spec {params.spec:q} --data-root {DATA_Q} --resources {RES_Q} --out {params.out:q} "
        "--threads {threads} > {log:q} 2>&1"


rule lm_eval:
    input:
        tasks=upstream("lm_tasks"),
        model=upstream("lm_model"),
        trained=lambda wc: [] if wc.method == "zero-shot" else [planned(wc).dir(R) + "/train.json"],
    output:
        metrics=LAYOUT["lm"].pattern(R),
        predictions=LAYOUT["lm"].pattern(R, "predictions.npz"),
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("lm_eval"),
    log:
        LAYOUT["lm"].log(R, "eval"),
    shell:
        "{CLI} lm-eval --spec {params.spec:q} --resources {RES_Q} --results {R_Q} --out {output.metrics:q} "
        "--threads {threads} > {log:q} 2>&1"
