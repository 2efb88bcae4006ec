# The language-model variant (lm-tasks family): a causal LM, PEFT-trained per task, scored by lm-eval on
# multiple-choice tasks generated from the local GLUE files. Nothing is fetched: lm-eval reads the generated
# YAMLs and JSONL, and the model from resources/.


rule lm_model:
    input:
        lambda wc: [f"{RES}/corpus/pretrain.txt"] if TIER["assets"][wc.instance.partition(".")[0]].get("source") == "workflow" else [],
    output:
        f"{RES}/models/{{instance}}.json",
    params:
        out=lambda wc: P.lm_model_dir(RES, TIER, wc.instance),
        corpus=lambda wc, input: f"--corpus {input[0]}" if input else "",
    resources:
        **rule_resources("lm_model"),
    log:
        f"{RES}/logs/lm-model-{{instance}}.log",
    shell:
        "{CLI} lm-model --tier {TIER_ARG} --instance {wildcards.instance} --resources {RES} --out {params.out} "
        "{params.corpus} > {log} 2>&1"


rule lm_tasks:
    output:
        f"{P.lm_tasks_dir(R)}/tasks.json",
    params:
        out=P.lm_tasks_dir(R),
        tasks=" ".join(LM_TASKS),
    resources:
        **rule_resources("lm_tasks"),
    log:
        f"{R}/logs/lm-tasks.log",
    shell:
        "{CLI} lm-tasks --tier {TIER_ARG} --data-root {DATA_ROOT} --tasks {params.tasks} --out {params.out} > {log} 2>&1"


def lm_model_input(wc):
    return [f"{RES}/models/{wc.instance}.json"] if P.lm_model_dir(RES, TIER, wc.instance) else []


rule lm_train:
    input:
        lm_model_input,
    output:
        f"{R}/runs/lm/{{instance}}/{{method}}/{{pkey}}/{{task}}/s{{seed}}/train.json",
    wildcard_constraints:
        method=r"(?!zero-shot/)[a-z0-9-]+",
    params:
        hyper=lambda wc: shlex.quote(json.dumps(TRAIN_PARAMS[("lm", wc.method, wc.pkey)])),
        out=lambda wc, output: os.path.join(os.path.dirname(output[0]), "model"),
    threads: THREADS
    resources:
        **rule_resources("lm_train"),
    log:
        f"{R}/logs/lm/{{instance}}-{{method}}-{{pkey}}-{{task}}-s{{seed}}-train.log",
    shell:
        "{CLI} lm-train --tier {TIER_ARG} --instance {wildcards.instance} --method {wildcards.method} "
        "--pkey {wildcards.pkey} --task {wildcards.task} --seed {wildcards.seed} --params {params.hyper} "
        "--data-root {DATA_ROOT} --resources {RES} --out {params.out} --threads {threads} > {log} 2>&1"


rule lm_eval:
    input:
        tasks=f"{P.lm_tasks_dir(R)}/tasks.json",
        model=lm_model_input,
        trained=lambda wc: [] if wc.method == "zero-shot" else
            [f"{R}/runs/lm/{wc.instance}/{wc.method}/{wc.pkey}/{wc.task}/s{wc.seed}/train.json"],
    output:
        metrics=f"{R}/runs/lm/{{instance}}/{{method}}/{{pkey}}/{{task}}/s{{seed}}/metrics.json",
        predictions=f"{R}/runs/lm/{{instance}}/{{method}}/{{pkey}}/{{task}}/s{{seed}}/predictions.npz",
    threads: THREADS
    resources:
        **rule_resources("lm_eval"),
    log:
        f"{R}/logs/lm/{{instance}}-{{method}}-{{pkey}}-{{task}}-s{{seed}}-eval.log",
    shell:
        "{CLI} lm-eval --tier {TIER_ARG} --instance {wildcards.instance} --method {wildcards.method} "
        "--pkey {wildcards.pkey} --task {wildcards.task} --seed {wildcards.seed} --resources {RES} --results {R} "
        "--out {output.metrics} --threads {threads} > {log} 2>&1"
