"""Training tasks generated from seeds: teacher-student regression, in-context associative recall, a
random Markov chain to model, and real text (the docstrings of a pinned package, attnid.training.corpus).

Every task draws every batch from a `torch.Generator` seeded by (run seed, stream), on the CPU, in
float64, then move it to the run's device and dtype, so a run's data are the same on every machine
and device, and a float32 run sees the float64 run's data rounded (the two dtypes are paired).

Teacher-student regression (one attention layer). A teacher layer with parameters theta* drawn
from `Layout.init` maps random sequences X (B, T, d), X_ij ~ N(0, 1), to targets Y = f(theta*, X).
The student f(theta, .) has the same spec; the loss

    L(theta) = mean_{b,t,i} (f(theta, X)_bti - Y_bti)^2

depends on theta only through the function f(theta, .), so it is exactly invariant under the
student's symmetry group (per-head GL on (W_Q, W_K) and (W_V, W_O)); its gradient is orthogonal
to the orbit at every theta. Held-out data: one fixed batch from its own stream.

Label noise. A realizable teacher is learned exactly, so its loss decays geometrically to zero and never
plateaus in relative terms: "converged" would have no meaning. With `noise` = sigma > 0 every target,
training and held-out, is Y + sigma s eps, eps ~ N(0, 1) i.i.d. and s the RMS of the teacher's outputs
(measured once per seed on its own stream), so the held-out loss has a floor, the noise variance
(sigma s)^2 (`loss_floor`), which constant-learning-rate training approaches and then stays near (the
stationary excess of SGD noise). A run has converged when its held-out loss has stopped changing
(attnid.training.sweep.converged). The noise is independent of theta, so the loss is still exactly
invariant under the student's group.

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

A random Markov chain (language modelling, no data files). Each seed draws an order-k chain over V
tokens: every context (x_{t-k}, ..., x_{t-1}) has its own next-token distribution p(. | context) ~
Dirichlet(alpha 1_V). Sequences of T tokens start from the stationary distribution of the chain's
contexts (so every position is stationary) and follow the chain; the loss is the next-token
cross-entropy at the positions t = k, ..., T - 1, whose context is complete. No model can beat the
chain itself there, so the held-out loss has an exact floor, the entropy rate

    H = sum_c pi(c) H(p(. | c)),   pi the stationary distribution of the contexts,

(`loss_floor`; Cover and Thomas, "Elements of Information Theory", ch. 4). With k = 2 the next token
depends on the previous token as well as the current one, which a causal model can only read through
attention (a previous-token head): the task needs the attention layers, like recall, but learns
statistics of the data, not a lookup in context.

Real text (language modelling, no download). The token arrays of a corpus built by the workflow from what
the pinned environment ships (attnid.training.corpus: the docstrings of pandas 3.1.1 by default, split by
file, byte-level BPE). A training sequence is a window of T tokens at a uniform random offset of the train
tokens (the run's train stream); held-out windows come from the held-out files (the eval stream), the probe
from the train tokens (its own stream). The loss is the next-token cross-entropy at the positions
t = 1, ..., T - 1 (the logits at t - 1 predict token t). Its floor, the entropy rate of the text, is unknown
(`loss_floor` NaN): a run has converged when its held-out loss stops changing (attnid.training.sweep.converged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..layer.forward import AttentionLayer
from ..layer.spec import AttentionSpec
from . import corpus as text_corpus

# Independent random streams of one run (seeded with `seed * N_STREAMS + stream`).
N_STREAMS = 16
STREAM_MODEL, STREAM_TEACHER, STREAM_TRAIN, STREAM_EVAL, STREAM_PROBE, STREAM_SCALE = 0, 1, 2, 3, 4, 5


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
    """Regression of a random teacher attention layer, with label noise; see the module docstring."""

    has_accuracy = False
    scale_batch = 256  # sequences on which the RMS of the teacher's outputs is measured

    def __init__(
        self, spec: AttentionSpec, seq_len: int, seed: int, dtype=torch.float64, device="cpu", noise: float = 0.0
    ):
        self.spec, self.seq_len, self.dtype, self.device, self.noise = spec, seq_len, dtype, device, noise
        # drawn in float64 and rounded, so a float32 run's teacher and data are the float64 run's, rounded
        self.teacher = AttentionLayer(spec, generator(seed, STREAM_TEACHER), dtype=torch.float64).to(
            device=device, dtype=dtype
        )
        self.teacher.requires_grad_(False)
        self._train = generator(seed, STREAM_TRAIN)
        self._seed = seed
        with torch.no_grad():
            x = self.draw(self.scale_batch, STREAM_SCALE)[0]
            rms = self.teacher(x).pow(2).mean().sqrt().item()
        self.noise_std = noise * rms  # sigma s: the absolute label-noise std

    @property
    def loss_floor(self) -> float:
        """The noise variance (sigma s)^2: the held-out loss of the teacher itself."""
        return self.noise_std**2

    def draw(self, batch: int, stream: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Inputs X (B, T, d) and the label noise eps (B, T, d) of the next training batch (stream None) or of
        a fixed batch; targets are f(theta*, X) + noise_std eps (eps None without noise)."""
        gen = self._train if stream is None else generator(self._seed, stream)
        shape = (batch, self.seq_len, self.spec.d_model)
        x = torch.randn(shape, generator=gen, dtype=torch.float64)  # (B, T, d)
        eps = torch.randn(shape, generator=gen, dtype=torch.float64) if self.noise else None
        return x.to(self.device, self.dtype), None if eps is None else eps.to(self.device, self.dtype)

    def _sample(self, batch: int, stream: int | None) -> Batch:
        x, eps = self.draw(batch, stream)
        with torch.no_grad():
            y = self.teacher(x)  # (B, T, d)
        return Batch(x, y if eps is None else y + self.noise_std * eps)

    def train_batch(self, batch: int) -> Batch:
        """The next training batch (fresh samples from the run's train stream)."""
        return self._sample(batch, None)

    def fixed_batch(self, batch: int, stream: int = STREAM_EVAL) -> Batch:
        """A batch that depends only on (seed, stream): held-out data or the probe batch."""
        return self._sample(batch, stream)

    @staticmethod
    def per_sample_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """(B,): mean squared error over each sequence's entries."""
        return (outputs - targets).pow(2).flatten(1).mean(1)

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
    reads_last = True  # the loss reads the logits of the last position only
    loss_floor = 0.0  # solvable exactly: accuracy 1

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
        """Cross-entropy of the value tokens at the last position; logits (B, T or 1, 2 vocab)."""
        return F.cross_entropy(self._answer_logits(logits), batch.targets)

    def per_sample_loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """(B,): the cross-entropy of each sequence's answer."""
        return F.cross_entropy(self._answer_logits(logits), targets, reduction="none")

    def correct(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """(B,) bool: the answer's argmax is right."""
        return self._answer_logits(logits).argmax(dim=-1) == targets

    def accuracy(self, logits: torch.Tensor, batch: Batch) -> float:
        return (self._answer_logits(logits).argmax(dim=-1) == batch.targets).double().mean().item()

    def _answer_logits(self, logits: torch.Tensor) -> torch.Tensor:
        return logits[:, -1, self.vocab :]  # (B, vocab): value tokens at the query position


def next_token_loss(logits: torch.Tensor, tokens: torch.Tensor, start: int) -> torch.Tensor:
    """(B,): each sequence's mean next-token cross-entropy -log softmax(logits_{t-1})[x_t] over t = start..T-1
    (logits (B, T, V), tokens (B, T)), with its gradient written down (:class:`_NextTokenLoss`)."""
    return _NextTokenLoss.apply(logits, tokens, start)[0]


class _NextTokenLoss(torch.autograd.Function):
    """L_b = -(1/n) sum_{t=start}^{T-1} log p_{b,t-1}[x_{b,t}], p = softmax(logits) over V, n = T - start; its
    gradient dL_b/dlogits_{b,s} = (p_{b,s} - e_{x_{b,s+1}}) / n for s = start-1..T-2, zero elsewhere.

    One exponential per logit: the forward pass keeps p = softmax(logits) and reads the log-normaliser off the
    largest entries, lse = max logits - log max p (max p = 1 / sum_v exp(logits_v - max) >= 1/V: no underflow), so
    log p[x] = logits[x] - lse to rounding; the backward pass is one scaling of p. Autograd through log_softmax, a slice and a gather
    made seven passes over the (B, T, V) logits (a second exponential, two zero fills, a copy, log_softmax's
    backward reading two tensors), the vocabulary's share of a text step. tests/test_train.py holds value and
    gradient to F.cross_entropy. Under torch.func's vmap and grad it runs through the same operations
    (generate_vmap_rule)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(logits, tokens, start):
        p = logits.softmax(-1)  # (B, T, V), over the whole contiguous tensor
        lse = logits.amax(-1) - p.amax(-1).log()  # (B, T): m + log sum_v exp(logits_v - m), as max p = 1 / sum
        picked = logits[:, start - 1 : -1].gather(-1, tokens[:, start:, None]).squeeze(-1)  # (B, T - start)
        return (lse[:, start - 1 : -1] - picked).mean(1), p

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, tokens, start = inputs
        ctx.save_for_backward(output[1], tokens)
        ctx.start = start
        ctx.mark_non_differentiable(output[1])
        ctx.set_materialize_grads(False)  # no zero-filled (B, T, V) gradient for the probabilities

    @staticmethod
    def backward(ctx, grad_loss, _grad_p):
        p, tokens = ctx.saved_tensors
        start = ctx.start
        scale = grad_loss / (p.shape[1] - start)  # (B,)
        grad = p * scale[:, None, None]  # (B, T, V)
        grad[:, : start - 1] = 0
        grad[:, -1] = 0
        rows = grad[:, start - 1 : -1]  # (B, n, V): a view
        targets = tokens[:, start:, None]
        rows.scatter_add_(-1, targets, -scale[:, None, None].expand(targets.shape).to(grad.dtype))
        return grad, None, None


class MarkovChain:
    """A random order-k Markov chain to model (next-token cross-entropy); see the module docstring."""

    has_accuracy = False
    reads_last = False
    chunk = 64  # training batches drawn at once (the same numbers as one at a time from this object)

    def __init__(self, vocab: int, order: int, alpha: float, seq_len: int, seed: int, device="cpu"):
        if order < 1 or seq_len <= order:
            raise ValueError(f"markov: need 1 <= order < seq_len, got order={order}, seq_len={seq_len}")
        self.vocab, self.order, self.seq_len, self.device = vocab, order, seq_len, device
        self.n_tokens = vocab
        # Dirichlet(alpha) rows from the run's teacher stream (numpy's generator, seeded as torch's streams are)
        rng = np.random.default_rng(seed * N_STREAMS + STREAM_TEACHER)
        rows = rng.dirichlet(np.full(vocab, float(alpha)), size=vocab**order)
        self.transition = torch.from_numpy(rows).clamp_min(1e-300)  # (V^k, V): p(next | context)
        self.transition = self.transition / self.transition.sum(-1, keepdim=True)
        self.stationary = self._stationary()  # (V^k,)
        self.cdf = self.transition.cumsum(-1)  # (V^k, V)
        self.start_cdf = self.stationary.cumsum(0)
        self._train = generator(seed, STREAM_TRAIN)
        self._seed = seed
        self._buffer: list[torch.Tensor] = []

    def _stationary(self) -> torch.Tensor:
        """The stationary distribution of the contexts: the chain on contexts c = (x_1..x_k) -> (x_2..x_k, y)."""
        V, k = self.vocab, self.order
        C = V**k
        step = torch.zeros(C, C, dtype=torch.float64)
        shift = (torch.arange(C) % V ** (k - 1)) * V  # context without its oldest token, shifted
        for y in range(V):
            step[torch.arange(C), shift + y] += self.transition[:, y]
        evals, evecs = torch.linalg.eig(step.T)
        pi = evecs[:, evals.real.argmax()].real
        pi = pi / pi.sum()
        return pi.clamp_min(0) / pi.clamp_min(0).sum()

    @property
    def loss_floor(self) -> float:
        """The entropy rate sum_c pi(c) H(p(. | c)) in nats: the held-out loss of the chain itself."""
        p = self.transition
        entropy = -(p * p.clamp_min(1e-300).log()).sum(-1)
        return float((self.stationary * entropy).sum())

    def _sample(self, gen: torch.Generator, batch: int) -> torch.Tensor:
        """(B, T) token ids: a stationary start context, then the chain."""
        V, k, T = self.vocab, self.order, self.seq_len
        u = torch.rand(batch, T - k + 1, generator=gen, dtype=torch.float64)  # (B, T - k + 1)
        context = torch.searchsorted(self.start_cdf, u[:, 0].contiguous()).clamp_max(V**k - 1)  # (B,)
        tokens = torch.empty(batch, T, dtype=torch.long)
        for j in range(k):  # the start context's tokens, oldest first
            tokens[:, j] = (context // V ** (k - 1 - j)) % V
        for t in range(k, T):
            nxt = torch.searchsorted(self.cdf[context], u[:, t - k + 1, None].contiguous()).clamp_max(V - 1)[:, 0]
            tokens[:, t] = nxt
            context = (context % V ** (k - 1)) * V + nxt
        return tokens

    def train_batch(self, batch: int) -> Batch:
        """The next training batch; drawn `chunk` batches at a time from the run's train stream."""
        if not self._buffer:
            self._buffer = list(self._sample(self._train, batch * self.chunk).split(batch))[::-1]
        tokens = self._buffer.pop()
        return Batch(tokens.to(self.device), tokens.to(self.device))

    def fixed_batch(self, batch: int, stream: int = STREAM_EVAL) -> Batch:
        tokens = self._sample(generator(self._seed, stream), batch)
        return Batch(tokens.to(self.device), tokens.to(self.device))

    def per_sample_loss(self, logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """(B,): mean next-token cross-entropy of each sequence over t = k..T-1."""
        return next_token_loss(logits, tokens, self.order)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        return self.per_sample_loss(logits, batch.targets).mean()

    def accuracy(self, logits: torch.Tensor, batch: Batch) -> float:
        return float("nan")


class TextCorpus:
    """Windows of a built text corpus to model (next-token cross-entropy); see the module docstring."""

    has_accuracy = False
    reads_last = False
    loss_floor = math.nan  # the text's entropy rate is unknown

    def __init__(self, corpus: str, seq_len: int, seed: int, device="cpu"):
        tokens = text_corpus.load(corpus)  # read once per process, shared by every run
        if not 2 <= seq_len <= min(len(tokens.train), len(tokens.heldout)):
            raise ValueError(f"text: seq_len must be in [2, {min(len(tokens.train), len(tokens.heldout))}] "
                             f"(the shorter split's tokens), got {seq_len}")  # fmt: skip
        self.seq_len, self.device, self.n_tokens = seq_len, device, tokens.vocab_size
        self.train_tokens = torch.from_numpy(tokens.train)  # (N_train,) int64, a view of the shared array
        self.heldout_tokens = torch.from_numpy(tokens.heldout)  # (N_heldout,)
        self._train = generator(seed, STREAM_TRAIN)
        self._seed = seed

    def _windows(self, tokens: torch.Tensor, gen: torch.Generator, batch: int) -> Batch:
        """(B, T) windows of `tokens` at uniform random offsets."""
        start = torch.randint(0, len(tokens) - self.seq_len + 1, (batch,), generator=gen)  # (B,)
        ids = tokens[start[:, None] + torch.arange(self.seq_len)].to(self.device)  # (B, T)
        return Batch(ids, ids)

    def train_batch(self, batch: int) -> Batch:
        """The next training batch: windows of the train tokens from the run's train stream."""
        return self._windows(self.train_tokens, self._train, batch)

    def fixed_batch(self, batch: int, stream: int = STREAM_EVAL) -> Batch:
        """Windows that depend only on (seed, stream): of the held-out tokens for STREAM_EVAL, else of the train
        tokens (the probe)."""
        tokens = self.heldout_tokens if stream == STREAM_EVAL else self.train_tokens
        return self._windows(tokens, generator(self._seed, stream), batch)

    def per_sample_loss(self, logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """(B,): mean next-token cross-entropy of each window over t = 1..T-1 (logits (B, T, V))."""
        return next_token_loss(logits, tokens, 1)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        return self.per_sample_loss(logits, batch.targets).mean()

    def accuracy(self, logits: torch.Tensor, batch: Batch) -> float:
        return float("nan")
