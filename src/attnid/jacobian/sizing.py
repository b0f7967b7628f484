r"""How many random tokens a measurement needs, where RoPE positions go, and what it will cost.

Information per token. A token's output row y_t = sum_h a_h(t) V_g W_O^h + b_O carries at most
    info = min(d, H d_v + 1, H (T - 1))
independent equations: it moves in the row spaces of the W_O^h (at most H d_v directions) plus the
constant b_O, and the query-key parameters reach it only through the H attention rows a_h(t),
each with T - 1 free entries (a softmax row sums to one; with a causal mask a query sees
(T - 1) / 2 other keys on average, so that term is halved). Unless the caller fixes T we take
    T = max(3, p + 2, ceil(c d / H) + 1)      (c = 2 if causal, else 1)
so that the attention rows do not limit info, and so that RoPE is seen: a rotated plane's score
varies with the query-key offset n as cos/sin(n w_i) over p/2 frequencies, p + 1 functions of n
with the constant, which need at least p + 1 distinct offsets. Then N = ceil(oversample * P /
info) tokens (oversample = 3 dense, 1.25 certificate) in B = max(2, ceil(N / T)) independent
Gaussian sequences, so the N d rows of J exceed the identified dimension by the oversampling
factor. Measured (tests): with too few tokens the rank drops, with the rule it does not, and
halving the batch (oversample 1.5) leaves it unchanged.

RoPE positions (:func:`position_ids`). The scores depend on query-key offsets only, so the
positions need not be 0..T-1. With base b and p rotated dims the slowest plane turns by
w_min = b^{-(p-2)/p} per position: over 0..T-1 it barely moves when T w_min << 2 pi (p = 64,
b = 10^4: w_min = 1.3e-4), and the Jacobian columns of that plane are then nearly those of an
unrotated one; the smallest kept singular value collapses towards the tolerance. Rule "spread":
each sequence draws T distinct integer positions uniformly from the context [0, L),
    L = max(T, ceil(2 pi / w_min)),
sorted (so a causal mask still means "earlier position"): the slowest plane sees offsets up to
one full turn, and every faster plane sees offsets spread over many turns. Positions stay integers,
so the frequency hypothesis (w_i not in pi Z, w_i != +-w_j mod 2 pi) is the same as in a model.
Rule "contiguous": 0..T-1 in every sequence. Without RoPE the positions are unused. Measured: the
sequence-length hypothesis of the count (T >= T_min) is about the offsets the data shows; with
contiguous positions every sequence shows the same T - 1 offsets (full RoPE d4 k4 causal at T = 2
measures 22, not 20), with spread positions each sequence brings its own (T = 2 measures 20).

Cost (:func:`estimate_cost`), from the sizes alone, before anything is allocated: the dense
method holds J (rows x P, rows = B T d) and its copy inside the SVD; the certificate holds the
Gram (P - m)^2, the null-space samples and basis (2 P m) and the jacrev workspace of a row block,
and its time is the Gram (rows (P - m)^2 / 2), J Q (2 rows P m: larger than the Gram when m > P / 4),
Cholesky ((P - m)^3 / 3), the basis of the null-space samples (QR and SVD) and the rows of J.
Seconds use the rates measured on this kind of CPU (float64: a dense SVD ~1e10 flop/s on one core, a matrix
product ~3e10 flop/s, the small vmapped autograd products ~1e9 flop/s); a busy machine is slower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..layer.counting import count
from ..float64 import DTYPE
from ..layer.layout import Layout
from ..layer.spec import AttentionSpec

POSITION_RULES = ("spread", "contiguous")
POSITION_SEED_OFFSET = 104729  # positions use their own stream, so theta and X do not depend on the rule
SVD_FLOPS = 1.0e10  # measured on one core: svdvals of a 4224 x 4224 factor (4 n^3 flops) in ~23 s; two
# threads spinning on a busy machine took several times that (benchmarks/jacobian.py)
MATMUL_FLOPS = 3.0e10  # measured: float64 matmul 8192 x 8192 in 33 s
AUTOGRAD_FLOPS = 1.0e9  # effective rate of the small vmapped jacrev/jvp products (fitted to measured runs)
SPEC_OVERHEAD_SECONDS = 1.0  # set-up of one measurement (layout, random point, projector)
ROW_BLOCK_BYTES = 2**28  # Jacobian rows held at once by the per-sequence jacrev


@dataclass(frozen=True)
class Sizing:
    """How many random tokens the measurement uses (rule in the module docstring)."""

    info_per_token: int  # min(d, H d_v + 1, H (T - 1) [/2 if causal]): equations one token's output can carry
    tokens: int  # N = ceil(oversample * P / info)
    seq_len: int  # T = max(3, p + 2, ceil(d / H [x2 if causal]) + 1) (measurement_seq_len), or the caller's T
    batch: int  # B = max(2, ceil(N / T)) sequences (two at least, so that half the batch is a batch)


def measurement_seq_len(spec: AttentionSpec) -> int:
    """The T a measurement uses unless the caller fixes it: max(3, p + 2, ceil(c d / H) + 1), c = 2 if
    causal else 1, so that the attention rows do not limit the information per token and every rotary
    frequency is seen (module docstring). Not T_min, the least T the count holds at (attnid.layer.counting)."""
    causal = 2 if spec.causal else 1
    return max(3, spec.rope_dims + 2, math.ceil(causal * spec.d_model / spec.n_heads) + 1)


def input_sizing(spec: AttentionSpec, oversample: float = 3.0, seq_len: int | None = None) -> Sizing:
    """Tokens and sequence length by information per token (rule in the module docstring)."""
    if not oversample > 0:
        raise ValueError(f"oversample: must be positive, got {oversample}")
    P, d, H = spec.n_params, spec.d_model, spec.n_heads
    causal = 2 if spec.causal else 1  # a causal query sees (T - 1) / 2 other keys on average
    T = measurement_seq_len(spec) if seq_len is None else int(seq_len)
    info = max(1, min(d, H * spec.d_head_v + 1, H * (T - 1) // causal))
    tokens = math.ceil(oversample * P / info)
    return Sizing(info, tokens, T, max(2, math.ceil(tokens / T)))


def slowest_frequency(spec: AttentionSpec) -> float:
    """w_min = base^{-(p-2)/p} (1 without RoPE or with one plane)."""
    p = spec.rope_dims
    return spec.rope_base ** (-(p - 2) / p) if p > 2 else 1.0


def context_length(spec: AttentionSpec, seq_len: int) -> int:
    """L = max(T, ceil(2 pi / w_min)): the range the "spread" positions are drawn from."""
    return max(seq_len, math.ceil(2 * math.pi / slowest_frequency(spec)))


def position_ids(spec: AttentionSpec, sizing: Sizing, seed: int, rule: str = "spread", device=None) -> torch.Tensor:
    """RoPE position ids (B, T), float64, by `rule` ("spread" or "contiguous"; module docstring)."""
    if rule not in POSITION_RULES:
        raise ValueError(f"positions: must be one of {', '.join(POSITION_RULES)}, got {rule!r}")
    B, T = sizing.batch, sizing.seq_len
    if rule == "contiguous" or spec.rope_dims == 0:
        return torch.arange(T, dtype=torch.float64, device=device).expand(B, T)
    L = context_length(spec, T)
    gen = torch.Generator().manual_seed(int(seed) + POSITION_SEED_OFFSET)
    if L <= 4 * T:  # small context: sample without replacement exactly
        ids = torch.stack([torch.randperm(L, generator=gen)[:T] for _ in range(B)])
    else:  # large context: draw with replacement and redraw duplicates (rare when L >> T)
        ids = torch.randint(L, (B, T), generator=gen)
        for b in range(B):
            while ids[b].unique().numel() < T:
                ids[b] = torch.randint(L, (T,), generator=gen)
    return ids.sort(dim=1).values.to(dtype=torch.float64, device=device)


def random_point(spec: AttentionSpec, sizing: Sizing, seed: int, device=None, dtype=DTYPE):
    """(theta (P,), X (B, T, d)): Layout.init weights and standard Gaussian inputs from one seed."""
    gen = torch.Generator().manual_seed(int(seed))
    theta = Layout(spec).init(gen, dtype=dtype, device=device)
    x = torch.randn(sizing.batch, sizing.seq_len, spec.d_model, generator=gen, dtype=dtype).to(device)
    return theta, x


@dataclass(frozen=True)
class Cost:
    """What a measurement will need, estimated from the sizes (module docstring)."""

    method: str  # "dense" or "certificate"
    params: int  # P
    rows: int  # rows of J: B T d
    bytes: float  # peak memory, estimated
    seconds: float  # on 2 CPU cores, estimated

    def describe(self) -> str:
        return (
            f"{self.method} method: P = {self.params:,}, {self.rows:,} Jacobian rows, about "
            f"{self.bytes / 2**30:.3g} GiB and {self.seconds:.3g} s on 2 CPU cores"
        )


def estimate_cost(spec: AttentionSpec, method: str, oversample: float, seq_len: int | None = None) -> Cost:
    """Memory and time of one measurement of `spec` by `method`, from arithmetic only."""
    P = spec.n_params
    sizing = input_sizing(spec, oversample, seq_len=seq_len)
    rows = sizing.batch * sizing.seq_len * spec.d_model
    # one forward pass over a sequence: the projections and the T x T scores and mixing of every head
    T, H, G, d = sizing.seq_len, spec.n_heads, spec.n_kv_heads, spec.d_model
    k, v = spec.d_head_qk, spec.d_head_v
    forward = 2 * T * d * ((H + G) * k + G * v + H * v) + 2 * H * T * T * (k + v)
    jacobian = sizing.batch * T * d * 3 * forward  # one backward pass (about 2 forwards) per output of a sequence
    m = count(spec, check=False).unidentified
    if method == "dense":
        memory = 8.0 * (2 * rows * P + P) + ROW_BLOCK_BYTES
        k = min(rows, P)  # Householder QR of J (BLAS-3), then the SVD of its k x P factor
        seconds = (2 * rows * P * k - 2 * k**3 / 3) / MATMUL_FLOPS + 4.0 * k**3 / SVD_FLOPS + jacobian / AUTOGRAD_FLOPS
    else:
        n, samples = P - m, m + 8  # complement of the null space; the null-space samples (count + 8)
        memory = 8.0 * (n * n + 2 * P * (m + 16)) + 6 * ROW_BLOCK_BYTES  # Gram, null-space samples and basis, jacrev
        # one pass over the rows: the Gram's lower triangle, J Q and J U (Q: m columns, U: <= 3); then Cholesky;
        # the basis of the samples: QR (2 P s^2) and the SVD of its s x s factor
        gram = rows * n * n / 2 + 2 * rows * P * (m + 3) + n**3 / 3 + 2 * P * samples**2
        seconds = gram / MATMUL_FLOPS + 4.0 * samples**3 / SVD_FLOPS + jacobian / AUTOGRAD_FLOPS
    return Cost(method, P, rows, memory, seconds + SPEC_OVERHEAD_SECONDS)
