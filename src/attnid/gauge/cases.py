"""The whole-model verification grid, two-sided: each case's Jacobian side (`attnid.model.grid.verify_case`)
with its generator side (`attnid.gauge.certificate`), on this project's model function (`own_case`) and on the
real `transformers` models of `attnid.model.real.TINY` (`real_case`, their specs through the config mapping:
`tiny_spec`). With torch threads >= 2 the grid (`verify_models`) measures two cases at a time, each on one thread.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from ..hf.mapping import model_spec
from ..model.forward import logits
from ..model.grid import own_spec, verify_case
from ..model.layout import ModelLayout
from ..model.real import SEQ_LEN, TINY, build_real
from ..model.spec import ModelSpec
from .certificate import certificate, real_certificate


def tiny_spec(name: str) -> ModelSpec:
    """The ModelSpec of TINY[name], through the config mapping, used on SEQ_LEN positions."""
    return model_spec(TINY[name][1], seq_len=SEQ_LEN)


def own_case(name: str, spec: ModelSpec, **options) -> dict:
    layout = ModelLayout(spec)

    def make(seed, eps_zero):
        s = spec.with_eps(0.0) if eps_zero else spec
        theta = layout.init(torch.Generator().manual_seed(seed))
        return (lambda th, tok: logits(th, tok, s, layout)), theta

    def certify(theta, R, sigma_max):
        return certificate(spec, theta, R, sigma_max)

    return verify_case(name, "own", spec, make, certify=certify, **options)


def real_case(name: str, **options) -> dict:
    spec = tiny_spec(name)

    def make(seed, eps_zero):
        real = build_real(name, seed, eps=0.0 if eps_zero else None)
        return real.forward, real.theta

    def certify(theta, R, sigma_max):
        return real_certificate(name, spec, theta, R, sigma_max)

    row = verify_case(name, "transformers", spec, make, certify=certify, **options)
    return {**row, "model_class": TINY[name][0]}


def verify_models(
    own: list[dict],
    real: list[str],
    seed: int = 0,
    oversample: float = 3.0,
    other_seed: bool = True,
    real_other_seed: bool = True,
    log=print,
):
    """One row per case: own cases {name, ...ModelSpec fields over BASE}, real cases by TINY name;
    other_seed / real_other_seed: re-measure the own / the real cases at another seed."""
    import pandas as pd

    options = {"seed": seed, "oversample": oversample, "other_seed": other_seed}
    jobs = [
        lambda case=case: own_case(case["name"], own_spec({k: v for k, v in case.items() if k != "name"}), **options)
        for case in own
    ]
    jobs += [lambda name=name: real_case(name, **{**options, "other_seed": real_other_seed}) for name in real]
    # With torch threads >= 2, two cases at a time, each single-threaded (its dense SVDs are serial
    # anyway); every case draws its own weights and tokens, so the rows do not depend on the order.
    threads = torch.get_num_threads()
    workers = min(2, threads, len(jobs))
    rows = []
    torch.set_num_threads(max(1, threads // max(workers, 1)))
    try:
        with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
            for future in [pool.submit(job) for job in jobs]:
                rows.append(future.result())
                _log_row(rows[-1], log)
    finally:
        torch.set_num_threads(threads)
    return pd.DataFrame(rows)


def _log_row(row: dict, log) -> None:
    log(
        f"{row['case']:18s} {row['kind']:12s} P={row['P']:5d} count={row['count']:4d} measured={row['measured']:4d}"
        f" (half {row['measured_half']}, seed {row.get('measured_other_seed', '-')}) weak {row['weak_count']}/{row['weak_measured']}"
        f" gap={row['gap']:.1f} generators {row.get('generator_rank', '-')} (Jt {row.get('generator_Jt', float('nan')):.0e})"
        f" {'ok' if row['agree'] else 'DISAGREE'} ({row['seconds']:.1f} s)"
    )


def model_disagreements(df) -> str:
    """'' if every row agrees, else one line per disagreeing case."""
    bad = df[~df["agree"].astype(bool)]
    return "\n".join(
        f"{r.case} ({r.label}): count {r.count} weak {r.weak_count}; measured {r.measured} weak {r.weak_measured}"
        f" half {r.measured_half}; P {r.P} vs spec {r.P_spec}; generators {getattr(r, 'generator_rank', '-')}"
        f" weak {getattr(r, 'weak_generator_rank', '-')} Jt {getattr(r, 'generator_Jt', float('nan')):.1e}"
        for r in bad.itertuples()
    )
