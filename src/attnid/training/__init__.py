"""Training with the symmetry geometry measured at every step.

Modules, each one idea: :mod:`.runs` (the sweep as data: run configs, the run and job lists; no
torch, the Snakefile imports it), :mod:`.tasks` (teacher-student regression and associative
recall, generated from seeds), :mod:`.models` (the student layer and the tiny transformer),
:mod:`.loop` (one run with torch.optim: the reference), :mod:`.optim` (functional optimizers on
stacked parameters), :mod:`.batched` (many runs of one job as one batched model with torch.func),
:mod:`.determinism` (the deterministic mode both trainers run in), :mod:`.metrics` (where a run's
per-step measurements are kept and the table they become),
:mod:`.job` (one workflow job: a task and optimizer's runs, grouped by shape), :mod:`.sweep`
(per-run results -> summaries and checks), :mod:`.analysis` (the study's five questions: estimates
with 95% intervals; no torch). Nothing here writes LaTeX: attnid.report formats what these modules
measure. This file imports nothing that needs torch.
"""
