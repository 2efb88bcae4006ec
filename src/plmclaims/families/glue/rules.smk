# Fine-tune one encoder with one method on one GLUE task for one seed, and score the dev split (glue family).
# The run's spec (method, hyper-parameters, budget, data source, model) travels as JSON; its hash is the {key}.
# Where the plan also has the run's `finetuned` twin (the same training, keeping the model: glue.plan.saved_twin),
# the job copies the twin's scores and predictions instead of training the same model twice.
from plmclaims.families.glue.plan import saved_twin


def finetune_twin(wc):
    twin = saved_twin(planned(wc))
    return [path_of(twin)] if twin is not None and twin.key in RUNS else []


rule finetune:
    input:
        model=upstream("pretrain"),
        data=data_of,
        twin=finetune_twin,
    output:
        metrics=LAYOUT["finetune"].pattern(R),
        predictions=LAYOUT["finetune"].pattern(R, "predictions.npz"),
    params:
        spec=spec_of,
        twin=lambda wc, input: f"--copy-of {shlex.quote(input.twin[0])}" if input.twin else "",
    threads: THREADS
    resources:
        **rule_resources("finetune"),
    log:
        LAYOUT["finetune"].log(R),
    shell:
        "{CLI} finetune --spec {params.spec:q} --data-root {DATA_Q} --resources {RES_Q} --out {output.metrics:q} "
        "--threads {threads} {params.twin} > {log:q} 2>&1"


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


# in batches of the layers of one cka run (common.smk: batches), each layer writing its own files and provenance
for _name, _runs in batches("cka-layer"):

    rule:
        name:
            f"cka_layer_batch_{_name}"
        input:
            cka=path_of(_runs[0].upstream[0]),
        output:
            batch_outputs(_runs, "predictions.npz"),
        params:
            # a function of the outputs, as spec_of: the runs' keys (their paths) are their identity, and the specs
            # hold '{data_root}', which a string here would read as a wildcard
            runs=lambda wc, output, runs=_runs: batch_runs(runs),
        threads: 1
        resources:
            **rule_resources("cka-layer"),
        log:
            batch_log("cka-layer", _name),
        shell:
            "{CLI} batch --runs {params.runs:q} cka-layer --cka {input.cka:q} > {log:q} 2>&1"
