"""Training tasks generated from seeds: teacher-student regression and in-context associative recall.

Both tasks draw every batch from a `torch.Generator` seeded by (run seed, stream), on the CPU, in
float64, then move it to the run's device and dtype, so a run's data are the same on every machine
and device, and a float32 run sees the float64 run's data rounded (the two dtypes are paired).

Teacher-student regression (one attention layer). A teacher layer with parameters theta* drawn
from `Layout.init` maps random sequences X (B, T, d), X_ij ~ N(0, 1), to targets Y = f(theta*, X).
The student f(theta, .) has the same spec; the loss

    L(theta) = mean_{b,t,i} (f(theta, X)_bti - Y_bti)^2

depends on theta only through the function f(theta, .), so it is exactly invariant under the
student's symmetry group (per-head GL on (W_Q, W_K) and (W_V, W_O)); its gradient is orthogonal
to the orbit at every theta. Held-out data: one fixed batch from its own stream.

In-context associative recall (tiny 2-layer transformer). A sequence holds n key-value pairs
followed by a query key,

    k_1 v_1 k_2 v_2 ... k_n v_n q        (T = 2n + 1 tokens)

with n distinct keys out of `vocab` key tokens (ids 0..vocab-1), values drawn uniformly with
replacement from `vocab` value tokens (ids vocab..2 vocab-1), and q one of the k_j; the model
must output v_j at the last position (cross-entropy over the value tokens; accuracy = argmax
correct, chance 1/vocab).

Why this task. Associative recall cannot be solved from token statistics: the answer to the same
query differs from sequence to sequence, so the model has to retrieve it by matching the query
against the keys in its context and copying the value next to the match. The standard solution
is the two-layer induction circuit (Olsson et al. 2022, "In-context learning and induction
heads"; the multi-query form is Zoology's MQAR, Arora et al. 2023): a first-layer head copies
each key into its value's position, a second-layer head matches the query against those copies
and moves the value out. So the task needs both layers, uses the query-key part (matching) and
the value-output part (copying) of attention, is generated from a seed with no data files, has an
exact accuracy, and is cheap on a CPU at d_model = 32 and T ~ 10.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..attention import AttentionLayer
from ..spec import AttentionSpec

# Independent random streams of one run (seeded with `seed * N_STREAMS + stream`).
N_STREAMS = 16
STREAM_MODEL, STREAM_TEACHER, STREAM_TRAIN, STREAM_EVAL, STREAM_PROBE = 0, 1, 2, 3, 4


def generator(seed: int, stream: int) -> torch.Generator:
    """A CPU generator for one stream of one run; distinct (seed, stream) give distinct seeds."""
    if not 0 <= stream < N_STREAMS:
        raise ValueError(f"stream must be in [0, {N_STREAMS}), got {stream}")
    return torch.Generator().manual_seed(seed * N_STREAMS + stream)


@dataclass
class Batch:
    inputs: torch.Tensor  # (B, T, d) float for teacher-student, (B, T) token ids for recall
    targets: torch.Tensor  # (B, T, d) for teacher-student, (B,) value index in [0, vocab) for recall


class TeacherStudent:
    """Regression of a random teacher attention layer; see the module docstring."""

    has_accuracy = False

    def __init__(self, spec: AttentionSpec, seq_len: int, seed: int, dtype=torch.float64, device="cpu"):
        self.spec, self.seq_len, self.dtype, self.device = spec, seq_len, dtype, device
        # drawn in float64 and rounded, so a float32 run's teacher and data are the float64 run's, rounded
        self.teacher = AttentionLayer(spec, generator(seed, STREAM_TEACHER), dtype=torch.float64).to(
            device=device, dtype=dtype
        )
        self.teacher.requires_grad_(False)
        self._train = generator(seed, STREAM_TRAIN)
        self._seed = seed

    def draw_inputs(self, batch: int, stream: int | None = None) -> torch.Tensor:
        """Inputs X (B, T, d) of the next training batch (stream None) or of a fixed batch; targets are f(theta*, X)."""
        gen = self._train if stream is None else generator(self._seed, stream)
        x = torch.randn(batch, self.seq_len, self.spec.d_model, generator=gen, dtype=torch.float64)  # (B, T, d)
        return x.to(self.device, self.dtype)

    def _sample(self, gen: torch.Generator, batch: int) -> Batch:
        x = torch.randn(batch, self.seq_len, self.spec.d_model, generator=gen, dtype=torch.float64)  # (B, T, d)
        x = x.to(self.device, self.dtype)
        with torch.no_grad():
            y = self.teacher(x)  # (B, T, d)
        return Batch(x, y)

    def train_batch(self, batch: int) -> Batch:
        """The next training batch (fresh samples from the run's train stream)."""
        return self._sample(self._train, batch)

    def fixed_batch(self, batch: int, stream: int = STREAM_EVAL) -> Batch:
        """A batch that depends only on (seed, stream): held-out data or the probe batch."""
        return self._sample(generator(self._seed, stream), batch)

    @staticmethod
    def loss(outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Mean squared error over all output entries."""
        return F.mse_loss(outputs, batch.targets)

    @staticmethod
    def accuracy(outputs: torch.Tensor, batch: Batch) -> float:
        return float("nan")


class AssociativeRecall:
    """In-context associative recall; see the module docstring (why this task)."""

    has_accuracy = True

    def __init__(self, vocab: int, pairs: int, seed: int, device="cpu"):
        if pairs > vocab:
            raise ValueError(f"recall: pairs={pairs} needs at least that many distinct keys, vocab={vocab}")
        if pairs < 1:
            raise ValueError(f"recall: pairs must be >= 1, got {pairs}")
        self.vocab, self.pairs, self.device = vocab, pairs, device
        self.seq_len = 2 * pairs + 1
        self.n_tokens = 2 * vocab  # keys 0..vocab-1, values vocab..2 vocab-1
        self._train = generator(seed, STREAM_TRAIN)
        self._seed = seed

    def _sample(self, gen: torch.Generator, batch: int) -> Batch:
        n, V = self.pairs, self.vocab
        keys = torch.rand(batch, V, generator=gen).argsort(dim=-1)[:, :n]  # (B, n) distinct keys
        values = torch.randint(0, V, (batch, n), generator=gen)  # (B, n)
        which = torch.randint(0, n, (batch,), generator=gen)  # (B,) the pair asked for
        tokens = torch.empty(batch, self.seq_len, dtype=torch.long)  # (B, T)
        tokens[:, 0 : 2 * n : 2] = keys
        tokens[:, 1 : 2 * n : 2] = values + V
        rows = torch.arange(batch)
        tokens[:, -1] = keys[rows, which]
        return Batch(tokens.to(self.device), values[rows, which].to(self.device))

    def train_batch(self, batch: int) -> Batch:
        return self._sample(self._train, batch)

    def fixed_batch(self, batch: int, stream: int = STREAM_EVAL) -> Batch:
        return self._sample(generator(self._seed, stream), batch)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Cross-entropy of the value tokens at the last position; logits (B, T, 2 vocab)."""
        return F.cross_entropy(self._answer_logits(logits), batch.targets)

    def accuracy(self, logits: torch.Tensor, batch: Batch) -> float:
        return (self._answer_logits(logits).argmax(dim=-1) == batch.targets).double().mean().item()

    def _answer_logits(self, logits: torch.Tensor) -> torch.Tensor:
        return logits[:, -1, self.vocab :]  # (B, vocab): value tokens at the query position
