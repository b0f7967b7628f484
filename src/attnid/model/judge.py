"""The judge of whole-model counts: P - rank of the Jacobian of all logits, in float64.

J has one row per (sequence, position, vocabulary entry) and one column per parameter. Sizing
rule (:func:`model_sizing`): a position's logits move, to first order, by dx U + x dU: the
upstream parameters reach them only through the final residual row x, which carries at most
info = min(V, d - k) independent directions, k the directions a norm's output n cannot move along
(its change dn is orthogonal to n, and to 1 after a LayerNorm): k = 2 when the unembedding reads a
LayerNorm, 1 an RMSNorm, 0 the raw stream (at a 2-layer post-LN BERT, d = 8, 3 P / d positions left
the half-data rank one short); fewer for the first tokens of a causal model. So we take
N = ceil(oversample * P / info) positions, oversample = 3, in
B = ceil(N / T) sequences of the full length T = seq_len (every position row in use is read).
Tokens are drawn balanced (each vocabulary entry equally often, then shuffled), so every
embedding row is seen at least N / V >= 3 d times for the sizes used here. The count is
re-measured on the first half of the sequences and at another seed (new theta and tokens).
A mixture of experts routes a position to k of its E experts, and an expert is seen only on the
positions routed to it, each of its gated units through one scalar per position: an expert needs
oversample max(2 (d + [b]), p_e / info) positions on the first half of the data (p_e its parameters),
so N is at least 2 (E / k) times that (:func:`routed_positions`); a random point routes
unevenly, so the grid adds sequences until every expert is routed that many (:func:`routed_tokens`).

Rank: singular values above RANK_RTOL * sigma_max (the attention judge's threshold, 1e-10).
Weakly identified directions: with eps > 0 a norm's exact scale symmetry becomes a direction
whose singular value is ~ eps / var relative (1e-9..1e-6 here): they are kept by the threshold.
So the judge measures twice: at the spec's eps (exact unidentified) and at eps = 0 (exact plus
weak); weak = the difference, and their singular values at the spec's eps are reported (they
must move with eps: measured again at 10 eps they grow about tenfold).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch
from torch.func import jacrev, vmap

from ..jacobian import RANK_RTOL, numerical_rank, triangular_factor
from .blocks import MoESpec
from .forward import expert_loads, logits
from .layout import ModelLayout
from .spec import ModelSpec


@dataclass(frozen=True)
class ModelSizing:
    info_per_position: int  # min(V, d - k)
    positions: int  # N = ceil(oversample * P / info)
    seq_len: int  # T = spec.seq_len
    batch: int  # B = max(2, ceil(N / T))


def _moe_blocks(spec) -> list[MoESpec]:
    return [x.mlp for x in spec.layer_specs if isinstance(x.mlp, MoESpec)]


def expert_params(moe: MoESpec, d: int) -> int:
    """p_e: one routed expert's parameters (gate, up, down and their biases)."""
    return 3 * moe.d_expert * d + moe.expert_bias * (2 * moe.d_expert + d)


def _need(moe: MoESpec, d: int, info: int, oversample: float) -> int:
    """Positions one expert must be routed: a gated unit's 2 (d + [b]) input weights reach the logits through
    one scalar per position (its hidden value times a fixed row of D), so 2 (d + [b]) positions at least, and
    p_e / info for the expert as a whole; times oversample."""
    return math.ceil(oversample * max(2 * (d + moe.expert_bias), expert_params(moe, d) / info))


def expert_need(spec, oversample: float) -> int:
    """Positions each expert must be routed on the first half of the data (the largest over MoE blocks)."""
    info = min(spec.vocab_size, spec.d_model)
    return max((_need(m, spec.d_model, info, oversample) for m in _moe_blocks(spec)), default=0)


def routed_positions(spec, oversample: float) -> int:
    """Positions N such that every expert expects its need on half of them: 2 (E / k) need (an expert sees
    the share k / E of the positions under balanced routing); 0 without MoE."""
    info = min(spec.vocab_size, spec.d_model)
    blocks = _moe_blocks(spec)
    return max(
        (math.ceil(2 * m.n_experts / m.top_k * _need(m, spec.d_model, info, oversample)) for m in blocks), default=0
    )


def routed_tokens(spec, f, theta, draw, batch: int, oversample: float, tries: int = 4):
    """(tokens, fewest): tokens = draw(batch) (B, T), with B grown until every expert of f at theta is routed
    at least `expert_need` positions in the first half of the sequences (the routing of a random point is
    uneven, so the expected share k / E is not enough); fewest = the smallest such count (None when f records
    no loads: a real `transformers` model, or no MoE)."""
    need = expert_need(spec, oversample)
    for _ in range(tries):
        tokens = draw(batch)
        with expert_loads() as loads:
            f(theta, tokens[: tokens.shape[0] // 2])
        fewest = int(min(x.min() for x in loads)) if loads else None
        if fewest is None or fewest >= need:
            break
        batch = math.ceil(batch * min(4.0, 1.1 * need / max(fewest, 1)))
    return tokens, fewest


def has_eps(spec: ModelSpec) -> bool:
    """Whether some norm of the model (its own, or a layer's q/k norm) has eps > 0."""
    return spec.norm_eps > 0 or any(x.attention.has_norm and x.attention.norm_eps > 0 for x in spec.layer_specs)


def directions_lost(spec: ModelSpec) -> int:
    """k of the sizing rule: 0 when the unembedding reads the raw stream; when it reads a norm's output n
    (a final norm, a post-LN block's, an MLM head's), dn is orthogonal to n (RMSNorm) and to 1 (LayerNorm)."""
    if not (spec.final_norm or spec.norm_position == "post" or spec.mlm_head):
        return 0
    return 2 if spec.norm == "layernorm" else 1


def model_sizing(spec: ModelSpec, oversample: float = 3.0) -> ModelSizing:
    """Positions and sequences by information per position (rule in the module docstring)."""
    P = ModelLayout(spec).size
    info = max(1, min(spec.vocab_size, spec.d_model - directions_lost(spec)))
    positions = max(math.ceil(oversample * P / info), routed_positions(spec, oversample))
    T = spec.seq_len
    return ModelSizing(info, positions, T, max(2, math.ceil(positions / T)))


def random_tokens(spec: ModelSpec, sizing: ModelSizing, generator: torch.Generator) -> torch.Tensor:
    """(B, T) token ids, every vocabulary entry equally often (up to one), in random order."""
    n = sizing.batch * sizing.seq_len
    V = spec.vocab_size
    balanced = torch.arange(V).repeat(math.ceil(n / V))[:n]
    return balanced[torch.randperm(n, generator=generator)].view(sizing.batch, sizing.seq_len)


def logits_jacobian(
    f, theta: torch.Tensor, tokens: torch.Tensor, max_bytes: float = 2**28, sketch: torch.Tensor | None = None
) -> torch.Tensor:
    """J (B T V, P) of f(theta, tokens (T,)) -> (T, V), per sequence, vmapped in chunks; with sketch S (B, T, V, r)
    the sketched J (B T r, P): row (b, t, j) is sum_v S[b, t, v, j] dz[b, t, v] / dtheta (r backward passes a
    position instead of V)."""
    if sketch is not None:
        return _sketched_jacobian(f, theta, tokens, sketch, max_bytes)
    out_per_seq = f(theta, tokens[0]).numel()
    chunk = max(1, int(max_bytes // (out_per_seq * theta.numel() * theta.element_size())))
    jac = vmap(jacrev(f), in_dims=(None, 0), chunk_size=chunk)(theta, tokens)  # (B, T, V, P)
    return jac.reshape(-1, theta.numel())


def _sketched_jacobian(f, theta, tokens, sketch, max_bytes):
    def g(th, tok, S):  # (T,), (T, V, r) -> (T, r)
        return torch.einsum("tv,tvr->tr", f(th, tok), S)

    out_per_seq = sketch.shape[1] * sketch.shape[3]
    chunk = max(1, int(max_bytes // (out_per_seq * theta.numel() * theta.element_size())))
    jac = vmap(jacrev(g), in_dims=(None, 0, 0), chunk_size=chunk)(theta, tokens, sketch)  # (B, T, r, P)
    return jac.reshape(-1, theta.numel())


SKETCH_SEED = 20_260_901  # the Gaussian sketches' seed (one draw per measurement, the same for every call)


def sketch_rows(spec: ModelSpec) -> int:
    """r of a sketched measurement: 2 info + 2 rows a position (info = the directions a position's final
    residual row carries, the sizing rule's), the whole V where that is not fewer."""
    info = max(1, min(spec.vocab_size, spec.d_model - directions_lost(spec)))
    return min(spec.vocab_size, 2 * info + 2)


def gaussian_sketch(tokens: torch.Tensor, V: int, r: int) -> torch.Tensor | None:
    """S (B, T, V, r) / sqrt(r), standard Gaussian from SKETCH_SEED; None when r >= V (nothing to save)."""
    if r >= V:
        return None
    gen = torch.Generator().manual_seed(SKETCH_SEED)
    return torch.randn(*tokens.shape, V, r, generator=gen, dtype=torch.float64) / math.sqrt(r)


def rank_of(J: torch.Tensor, rtol: float = RANK_RTOL) -> tuple[dict, torch.Tensor]:
    """numerical_rank of J (rows >= columns, or its R factor) and its singular values / sigma_max (descending)."""
    sigma = torch.linalg.svdvals(J)
    return numerical_rank(sigma, rtol), (sigma / sigma.max()).cpu()


def concurrently(calls, workers: int) -> list:
    """The results of zero-argument callables, run on `workers` threads (torch kernels release the GIL)."""
    if workers <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return [future.result() for future in [pool.submit(call) for call in calls]]


def measure_function(
    f,
    theta: torch.Tensor,
    tokens: torch.Tensor,
    half: bool = True,
    rtol: float = RANK_RTOL,
    keep_factor: bool = False,
    sketch: torch.Tensor | None = None,
) -> dict:
    """P - rank of the logits Jacobian of f at theta over tokens; with half, also on the first half of the sequences;
    keep_factor: also J's triangular factor R (P, P) under "R" (||J t|| = ||R t||) and sigma_max; sketch
    (B, T, V, r): the rank of the sketched Jacobian S J instead (`logits_jacobian`; rank S J <= rank J, so
    a sketch can only add unidentified directions, never hide one).

    The two halves of the sequences are independent until the end: with torch threads >= 2 their
    Jacobians and R factors are computed side by side on two single-threaded workers (f must then be
    safe to call from two threads), then J's R comes from [R_half; R_rest] while R_half's singular
    values are taken beside it (one dense SVD per worker: the serial SVD is the cost at P ~ 3,000)."""
    start = time.perf_counter()
    threads = torch.get_num_threads()
    workers = 2 if threads >= 2 else 1
    half_seqs = tokens.shape[0] // 2

    def part(S, second):
        return None if S is None else (S[half_seqs:] if second else S[:half_seqs])

    torch.set_num_threads(max(1, threads // workers))
    try:
        R_half, R_rest = concurrently(
            [
                lambda: triangular_factor(logits_jacobian(f, theta, tokens[:half_seqs], sketch=part(sketch, 0))),
                lambda: triangular_factor(logits_jacobian(f, theta, tokens[half_seqs:], sketch=part(sketch, 1))),
            ],
            workers,
        )
        factor = {}

        def whole():  # J's R from the halves'
            factor["R"] = triangular_factor(torch.cat([R_half, R_rest]))
            sigma = torch.linalg.svdvals(factor["R"])
            factor["sigma_max"] = float(sigma.max())
            return numerical_rank(sigma, rtol), (sigma / sigma.max()).cpu()

        calls = [whole]
        if half:
            calls.append(lambda: rank_of(R_half, rtol))
        results = concurrently(calls, workers)
    finally:
        torch.set_num_threads(threads)
    (rank, sigma), P = results[0], theta.numel()
    out = {"measured": P - rank["rank"], **rank, "sigma": sigma, "positions": tokens.numel()}
    if half:
        out["measured_half"] = P - results[1][0]["rank"]
    if keep_factor:
        out["R"] = factor["R"]
        out["sigma_max"] = factor["sigma_max"]
    out["seconds"] = time.perf_counter() - start
    return out


def measure_model(
    spec: ModelSpec, seed: int = 0, oversample: float = 3.0, half: bool = True, rtol: float = RANK_RTOL
) -> dict:
    """Dense measurement of the model's own function at a random point (theta, tokens) drawn from `seed`."""
    layout = ModelLayout(spec)
    gen = torch.Generator().manual_seed(int(seed))
    theta = layout.init(gen)
    tokens = random_tokens(spec, model_sizing(spec, oversample), gen)
    return measure_function(lambda th, tok: logits(th, tok, spec, layout), theta, tokens, half, rtol)


def measure_model_weak(spec: ModelSpec, seed: int = 0, oversample: float = 3.0, rtol: float = RANK_RTOL) -> dict:
    """Exact (at the spec's eps) and exact-plus-weak (eps = 0) unidentified dims, the weak singular
    values at eps and at 10 eps, and the half-data / other-seed re-measurements."""
    at_eps = measure_model(spec, seed, oversample, True, rtol)
    row = {"P": ModelLayout(spec).size, "measured": at_eps["measured"], "measured_half": at_eps["measured_half"]}
    row.update({k: at_eps[k] for k in ("sigma_kept", "sigma_dropped", "gap", "positions", "seconds")})
    row["weak"] = 0
    if has_eps(spec):
        free = measure_model(spec.with_eps(0.0), seed, oversample, False, rtol)
        row["weak"] = free["measured"] - at_eps["measured"]
        rank = at_eps["rank"]
        if row["weak"] > 0:
            weak_sigma = at_eps["sigma"][rank - row["weak"] : rank]
            ten = measure_model(spec.with_eps(10.0), seed, oversample, False, rtol)["sigma"][rank - row["weak"] : rank]
            row["weak_sigma_min"], row["weak_sigma_max"] = float(weak_sigma.min()), float(weak_sigma.max())
            row["weak_move"] = float((ten / weak_sigma).median())
            row["sigma_strong"] = float(at_eps["sigma"][rank - row["weak"] - 1])
    other = measure_model(spec, seed + 1, oversample, False, rtol)
    row["measured_other_seed"] = other["measured"]
    row["seconds"] = at_eps["seconds"] + other["seconds"]
    return row
