"""results/whole_model/verification.csv: every whole-model count against the Jacobian of its logits.

Own cases (this project's model function) and real `transformers` language models (attnid.model.grid).
Fails (non-zero exit, the disagreeing cases in the message and the log) unless every case agrees;
then no CSV is written, so nothing looks finished.
"""

import torch
import transformers

from attnid.io import atomic_write_csv, log_to
from attnid.model.grid import model_disagreements, verify_models

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
transformers.logging.set_verbosity_error()
cfg = snakemake.params.cfg
options = {key: cfg[key] for key in ("seed", "oversample", "other_seed", "real_other_seed")}
df = verify_models(cfg["own"], cfg["real"], **options)
message = model_disagreements(df)
if message:
    print(message)
    raise SystemExit(f"whole models that disagree with the count:\n{message}")
atomic_write_csv(snakemake.output[0], df)
print(f"all {len(df)} whole models agree; worst gap {df['gap'].min():.1f} decades")
