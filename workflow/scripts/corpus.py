"""Rule corpus: the docstrings of the pinned package -> {results}/corpus/ (train.npy, heldout.npy, tokenizer.json,
manifest.json).

Glue only (the corpus is attnid.training.corpus.build): tokenizers' thread pool gets the rule's threads; each
output is written atomically; a version or hash the config does not pin stops the job with one line.
"""

import os
import time

os.environ["RAYON_NUM_THREADS"] = str(snakemake.threads)  # before tokenizers starts its pool

from attnid.io import log_to
from attnid.training.corpus import OUTPUTS, build, write

log = log_to(snakemake.log[0], "corpus")
start = time.perf_counter()
corpus = build(snakemake.params.corpus)
write(corpus, {name: getattr(snakemake.output, name) for name in OUTPUTS})
m = corpus.manifest
log.info(
    "%s %s: %d train / %d held-out files, %d / %d characters, %d / %d tokens, vocab %d, text %s, %.1f s",
    m["package"], m["version"], m["n_files"]["train"], m["n_files"]["heldout"], m["chars"]["train"],
    m["chars"]["heldout"], m["tokens"]["train"], m["tokens"]["heldout"], m["vocab_size"], m["text_sha256"][:12],
    time.perf_counter() - start,
)  # fmt: skip
