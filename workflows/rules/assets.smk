# Assets the workflow builds itself: the micro-BERT's corpus, tokenizer and pre-trained seeds, and the causal LMs it
# materialises (a dequantised GGUF, joined first from its parts where packages ship it in pieces; the test tier's tiny
# LMs). The micro-BERT's three carry the long pole's priority (common.smk, LONG_POLE), so pre-training starts as early
# as its inputs allow.


rule corpus:
    output:
        LAYOUT["corpus"].pattern(RES),
    priority: LONG_POLE
    resources:
        **rule_resources("corpus"),
    log:
        LAYOUT["corpus"].log(RES),
    shell:
        "{CLI} corpus --out {output:q} > {log:q} 2>&1"


rule tokenizer:
    input:
        LAYOUT["corpus"].pattern(RES),
    output:
        LAYOUT["tokenizer"].pattern(RES),
    params:
        spec=spec_of,
        out=lambda wc, output: os.path.dirname(output[0]),
    priority: LONG_POLE
    resources:
        **rule_resources("tokenizer"),
    log:
        LAYOUT["tokenizer"].log(RES),
    shell:
        "{CLI} tokenizer --spec {params.spec:q} --corpus {input:q} --out {params.out:q} > {log:q} 2>&1"


rule pretrain:
    input:
        corpus=LAYOUT["corpus"].pattern(RES),
        tokenizer=upstream("tokenizer"),
    output:
        LAYOUT["pretrain"].pattern(RES),
    params:
        spec=spec_of,
        out=lambda wc, output: os.path.dirname(output[0]),
        tokenizer=lambda wc, input: os.path.dirname(input.tokenizer[0]),
    threads: THREADS
    priority: LONG_POLE
    resources:
        **rule_resources("pretrain"),
    log:
        LAYOUT["pretrain"].log(RES),
    shell:
        "{CLI} pretrain --spec {params.spec:q} --corpus {input.corpus:q} --tokenizer {params.tokenizer:q} "
        "--out {params.out:q} --threads {threads} > {log:q} 2>&1"


rule gguf:
    output:
        LAYOUT["gguf"].pattern(RES),
    params:
        spec=spec_of,
    resources:
        **rule_resources("gguf"),
    log:
        LAYOUT["gguf"].log(RES),
    shell:
        "{CLI} gguf --spec {params.spec:q} --out {output:q} > {log:q} 2>&1"


rule lm_model:
    input:
        corpus=lambda wc: (
            [LAYOUT["corpus"].pattern(RES)]
            if TIER["assets"][wc.instance.partition(".")[0]].get("source") == "workflow"
            else []
        ),
        gguf=upstream("gguf"),
    output:
        LAYOUT["lm_model"].pattern(RES),
    params:
        spec=spec_of,
        out=lambda wc, output: os.path.join(os.path.dirname(output[0]), "model"),
        corpus=lambda wc, input: f"--corpus {shlex.quote(input.corpus[0])}" if input.corpus else "",
    resources:
        **rule_resources("lm_model"),
    log:
        LAYOUT["lm_model"].log(RES),
    shell:
        "{CLI} lm-model --spec {params.spec:q} --resources {RES_Q} --out {params.out:q} {params.corpus} > {log:q} 2>&1"
