"""results/whole_model/verification.csv: every whole-model count against the Jacobian of its logits.

Own cases (this project's model function) and real `transformers` language models (attnid.model.grid), each
with both sides of its certificate: the Jacobian's rank and the explicit generators' (attnid.gauge.certificate).
Fails (non-zero exit, the disagreeing cases in the message and the log) unless every case agrees;
then no CSV is written, so nothing looks finished.
"""

import torch
import transformers

from attnid.gauge.cases import model_disagreements, verify_models
from attnid.io import atomic_write_csv, log_to

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
two = df["two_sided"].fillna(False).astype(bool)
print(f"generators: rank = count on {int((df['generator_rank'] == df['count']).sum())} of {len(df)}, two-sided on"
      f" {int(two.sum())} (one-sided: {', '.join(df.loc[~two, 'case'])}); worst ||Jt||/(||J|| ||t||)"
      f" {df['generator_Jt'].max():.1e}")
