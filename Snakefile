# plmclaims: replicate published claims about pre-trained language models.
#   snakemake --cores 2 --config tier=micro data_root=../shared/data
import os

from snakemake.utils import min_version

min_version("9.0")


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


include: "workflows/rules/common.smk"
include: "workflows/rules/assets.smk"
for _family_rules in FAMILY_RULES:  # each built family's rules.smk (plmclaims.families)

    include: _family_rules


include: "workflows/rules/verdict.smk"
include: "workflows/rules/report.smk"


rule all:
    input:
        REPORT_FILES,
    default_target: True
