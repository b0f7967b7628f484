"""results/hf/modules.csv: each real `transformers` attention module (shrunk published config) against the count.

Fails (non-zero exit, the disagreeing cases in the message and the log) unless every case agrees;
then no CSV is written, so nothing looks finished.
"""

import torch
import transformers

from attnid.hf.verify import module_disagreements, verify_modules
from attnid.io import atomic_write_csv, log_to

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
transformers.logging.set_verbosity_error()
cfg = snakemake.params.cfg
shrink_options = {"d_model": cfg["d_model"], "n_heads": cfg["n_heads"], "window": cfg["window"]}
df = verify_modules(cfg["cases"], seed=cfg["seed"], oversample=cfg["oversample"], **shrink_options)
message = module_disagreements(df)
if message:
    print(message)
    raise SystemExit(f"real modules that disagree with the count:\n{message}")
atomic_write_csv(snakemake.output[0], df)
print(f"all {len(df)} real modules agree; worst gap {df['gap'].min():.1f} decades")
