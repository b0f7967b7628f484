# The text corpus of the `text` training task: the docstrings of one pinned installed package (config
# `training.corpus`), split by file, tokenised by a byte-level BPE trained in the build
# (attnid.training.corpus). Built only when a training task is `text`; its jobs and provenance read it.
CORPUS_DIR = f"{RESULTS}/corpus"
CORPUS_USED = any(t["task"] == "text" for t in config["training"]["tasks"])


rule corpus:
    input:
        script_inputs("corpus.py"),
    output:
        train=f"{CORPUS_DIR}/train.npy",
        heldout=f"{CORPUS_DIR}/heldout.npy",
        tokenizer=f"{CORPUS_DIR}/tokenizer.json",
        manifest=f"{CORPUS_DIR}/manifest.json",
    log:
        logfile("corpus"),
    benchmark:
        benchfile("corpus")
    conda:
        CONDA_ENV
    threads: 2  # the tokenizer's thread pool (RAYON_NUM_THREADS)
    params:
        corpus=config["training"].get("corpus", {}),
    script:
        "../scripts/corpus.py"
