r"""verify(spec): the count against the Jacobian, with a verdict that says when it cannot decide.

One call measures P - rank J at a random point (dense SVD for small P, the Cholesky certificate
above ``dense_max_params``) and compares it with :func:`attnid.layer.counting.count`. Before anything
is allocated it validates its options (a ValueError whose message starts with the option's name)
and estimates memory and time (:func:`attnid.jacobian.sizing.estimate_cost`); a spec above
``max_memory_gb`` is refused in one line. The verdict (``status``):

    passed     decided, and measured = predicted, invariant (half the batch, other seeds) and the
               predicted null space checks out (rank V = count, J V = 0, outside directions seen);
    failed     decided, and one of those checks disagrees;
    undecided  the numbers cannot decide: the dense margin log10(sigma_kept / RANK_RTOL) is below
               MIN_MARGIN decades or the gap log10(sigma_kept / sigma_dropped) below MIN_GAP
               decades, or the certificate's shifted Cholesky failed.

A measured rank is a lower bound on the generic rank only when its smallest kept singular value
is far above rounding, so an undecided spec never passes, and the tolerance is never tuned to
make one pass: the row shows sigma_kept, sigma_dropped, gap and margin.

    >>> from attnid import AttentionSpec
    >>> verify(AttentionSpec(8, 2, biases="qkvo"))["status"]
    'passed'
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from numbers import Integral, Real

import torch

from ..errors import SpecError
from ..layer.counting import count
from ..layer.spec import AttentionSpec
from .rank_certificate import certify
from .dense import RANK_RTOL, measure
from .directions import direction_checks
from .sizing import DTYPE, POSITION_RULES, estimate_cost

DENSE_MAX_PARAMS = 6000  # above this, the certificate (a dense float64 SVD of 3P x P takes minutes)
MIN_MARGIN = 2.0  # decades of the smallest kept singular value over RANK_RTOL needed to decide
MIN_GAP = 4.0  # decades between the smallest kept and the largest dropped singular value needed to decide
DEFAULT_MAX_MEMORY_GB = 8.0
METHODS = ("auto", "dense", "certificate")
STATUSES = ("passed", "failed", "undecided")


class TooLargeError(ValueError):
    """The measurement would need more memory than allowed (the message names max_memory_gb)."""


def spec_row(spec: AttentionSpec) -> dict:
    """The spec's table columns (label and fields)."""
    return spec.to_row()


def _is_int(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _check_options(seq_len, oversample, seed, threads, max_memory_gb, positions, method, progress) -> None:
    """ValueError naming the option when one is out of range."""
    if seq_len is not None and not (_is_int(seq_len) and seq_len >= 2):
        raise ValueError(f"seq_len: must be an integer >= 2 (positions per sequence), got {seq_len!r}")
    if oversample is not None:
        if not isinstance(oversample, Real) or isinstance(oversample, bool) or not math.isfinite(oversample):
            raise ValueError(f"oversample: must be a number >= 1, got {oversample!r}")
        if oversample < 1:
            raise ValueError(
                f"oversample: must be >= 1, got {oversample:g}: with fewer Jacobian rows than parameters the "
                "rank cannot reach P - count, so the measurement could not decide (default 3 dense, 1.25 certificate)"
            )
    if not (_is_int(seed) and seed >= 0):
        raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
    if threads is not None and not (_is_int(threads) and threads >= 1):
        raise ValueError(f"threads: must be an integer >= 1, got {threads!r}")
    if not (isinstance(max_memory_gb, Real) and not isinstance(max_memory_gb, bool) and max_memory_gb > 0):
        raise ValueError(f"max_memory_gb: must be a positive number, got {max_memory_gb!r}")
    if positions not in POSITION_RULES:
        raise ValueError(f"positions: must be one of {', '.join(POSITION_RULES)}, got {positions!r}")
    if method not in METHODS:
        raise ValueError(f"method: must be one of {', '.join(METHODS)}, got {method!r}")
    if not isinstance(progress, bool):
        raise ValueError(f"progress: must be true or false, got {progress!r}")  # noqa: TRY004 (one error type per option)


def resolve_device_option(name) -> torch.device:
    """The `device` option ('cpu', 'cuda', 'cuda:N' or a torch.device) as a torch.device; ValueError naming it."""
    from .. import device as devices

    if isinstance(name, torch.device):
        name = str(name)
    try:
        return devices.resolve_device(name, what="device:")
    except devices.DeviceError as err:
        raise ValueError(str(err)) from None


def directions_ok(row: dict, predicted: int, rtol: float) -> bool:
    """The predicted null space checks out: its dimension is the count, J maps it to rounding level
    (relative to sigma_max), and every outside direction is seen."""
    return row["symmetry_rank"] == predicted and row["symmetry_residual"] <= rtol and row["outside_min"] > rtol


def status_of(decided: bool, ok: bool) -> str:
    """'passed' | 'failed' | 'undecided'."""
    return "undecided" if not decided else ("passed" if ok else "failed")


def verify(
    spec: AttentionSpec,
    *,
    seq_len: int | None = None,
    oversample: float | None = None,
    seed: int = 0,
    device="cpu",
    threads: int | None = None,
    max_memory_gb: float = DEFAULT_MAX_MEMORY_GB,
    progress: bool = False,
    positions: str = "spread",
    method: str = "auto",
    dense_max_params: int = DENSE_MAX_PARAMS,
    other_seeds=None,
    half_batch: bool = True,
    directions: bool = True,
    rtol: float = RANK_RTOL,
    dtype=DTYPE,
    check_validity: bool = True,
    frequencies=None,
) -> dict:
    """Predicted vs measured unidentified dimension of one spec, with margins and a status (module docstring).

    seq_len: T (default the spec's, else the sizing rule); oversample: Jacobian rows over the
    need (default 3 dense, 1.25 certificate); positions: RoPE position rule ("spread" or
    "contiguous", :mod:`attnid.jacobian.sizing`); method: auto | dense | certificate;
    other_seeds: seeds re-measured for invariance (default seed + 1; dense only); half_batch:
    re-measure on half the sequences (dense only); directions: check the predicted null space.
    check_validity=False measures a spec outside the counting's hypotheses (T below T_min) and
    compares with the naive count; frequencies (p/2,) replace base^(-2i/p) in the layer.
    """
    start = time.perf_counter()
    _check_options(seq_len, oversample, seed, threads, max_memory_gb, positions, method, progress)
    if spec.d_cross:  # its keys and values read a second input, which these measurements do not draw
        raise SpecError("d_cross", "this check draws one input X; cross-attention reads the encoder's states too:"
                        " `attnid check --model-type bart` measures it on a real encoder_attn module")  # fmt: skip
    dev = resolve_device_option(device)
    if threads is not None:
        torch.set_num_threads(threads)
    log = (lambda *a: print(*a, file=sys.stderr, flush=True)) if progress else (lambda *a: None)
    if seq_len is not None and seq_len != spec.seq_len:
        spec = dataclasses.replace(spec, seq_len=seq_len)  # the count checks T against its T_min
    seq_len = spec.seq_len
    if method == "auto":
        method = "dense" if spec.n_params <= dense_max_params else "certificate"
    oversample = oversample if oversample is not None else (3.0 if method == "dense" else 1.25)
    cost = estimate_cost(spec, method, oversample, seq_len)
    if cost.bytes > max_memory_gb * 2**30:
        raise TooLargeError(
            f"max_memory_gb: {spec.label} needs about {cost.bytes / 2**30:.3g} GiB by the {method} method "
            f"(P = {cost.params:,}), above the limit of {max_memory_gb:g} GiB; raise max_memory_gb to run it"
        )
    counts = count(spec, check=check_validity)  # check_validity=False: the naive count outside its hypotheses
    log(f"verify {spec.label}: {cost.describe()}")
    row = {**spec_row(spec), "total": counts.total, "predicted": counts.unidentified}
    if method == "dense":
        row.update(_dense(spec, counts, seed, oversample, dev, rtol, other_seeds, half_batch, directions, dtype,
                          seq_len, positions, frequencies, log))  # fmt: skip
    else:
        res = certify(
            spec, seed, oversample, dev, rtol, log=log, dtype=dtype, seq_len=seq_len, positions=positions,
            frequencies=frequencies,
        )  # fmt: skip
        row["measured"] = res.pop("measured")
        row.update(res)
        row["agree"] = row["measured"] == counts.unidentified
        row["directions_ok"] = directions_ok(row, counts.unidentified, rtol)
        decided = bool(row["certified"]) and row["gap"] >= MIN_GAP
        row["status"] = status_of(decided, row["agree"] and row["directions_ok"])
    row["passed"] = row["status"] == "passed"
    row["method"] = method
    row["positions"] = positions
    row["estimated_seconds"] = cost.seconds
    row["seconds"] = time.perf_counter() - start
    log(f"verify {spec.label}: {row['status']} (predicted {row['predicted']}, measured {row['measured']}, "
        f"margin {row['margin']:.1f}, gap {row['gap']:.1f} decades), {row['seconds']:.1f} s")  # fmt: skip
    return row


def _dense(spec, counts, seed, oversample, device, rtol, other_seeds, half_batch, directions, dtype, seq_len,
           positions, frequencies, log) -> dict:  # fmt: skip
    """The dense measurement and its checks (see :func:`verify`)."""
    options = {"device": device, "rtol": rtol, "dtype": dtype, "seq_len": seq_len, "positions": positions,
               "frequencies": frequencies}  # fmt: skip
    res, J, theta, _, _ = measure(spec, seed, oversample, half=half_batch, **options)
    log(f"  seed {seed}: measured {res['measured']}, smallest kept {res['sigma_kept']:.2e}")
    row = {"measured": res["measured"]}
    row.update(
        {key: res[key] for key in ("sigma_kept", "sigma_dropped", "gap", "margin", "tokens", "tokens_per_sequence")}
    )
    row["agree"] = res["measured"] == counts.unidentified
    checks = [row["agree"]]
    other_seeds = (seed + 1,) if other_seeds is None else tuple(other_seeds)
    if half_batch or other_seeds:
        values = [res["measured"]]
        if half_batch:
            row["measured_half"] = res["measured_half"]
            values.append(res["measured_half"])
        if other_seeds:
            others = [measure(spec, s, oversample, **options)[0]["measured"] for s in other_seeds]
            row["measured_other_seeds"] = ";".join(map(str, others))
            values += others
        row["invariant"] = len(set(values)) == 1
        checks.append(row["invariant"])
    if directions:
        dirs = direction_checks(spec, theta, lambda U: U @ J.mT, res["sigma_max"], seed, rtol)
        dirs.pop("_Q")
        row.update(dirs)
        row["directions_ok"] = directions_ok(dirs, counts.unidentified, rtol)
        checks.append(row["directions_ok"])
    decided = res["margin"] >= MIN_MARGIN and res["gap"] >= MIN_GAP
    row["status"] = status_of(decided, all(checks))
    return row
