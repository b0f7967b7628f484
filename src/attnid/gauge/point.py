"""The point theta of a whole model as the generators read it: named blocks, gains, readers and writers.

The flat vector is `attnid.model.layout.ModelLayout`'s; :class:`FineLayout` names the same vector with
every attention block `layers.l.attn` split into its own layer's blocks (`layers.l.attn.W_Q`, ..., in
`attnid.layer.layout` order, which is contiguous inside the block), so a generator can address W_Q or W_O
directly. :class:`Point` holds those blocks (float64), and lists what the residual stream is made of:

    reader   a linear map that reads a norm's output: (weight block, the axis of its d_model input,
             its bias block or None, output width); q/k/v (or the latent down-projections), the MLP's
             gate/up (router, experts, shared expert), the unembedding (E itself when tied), BERT's dense
    writer   a block whose last axis writes into the stream: E, the position rows in use, token type
             row 0, W_O, b_O, the MLP's down and bias (experts' and shared), an embedding norm's gain and
             bias, a sublayer output norm's gain and bias

Glossary: `attnid.model.spec` (reader / writer, stream, d_c) and `attnid.gauge` (generator, group).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..flat import FlatLayout
from ..model.blocks import MoESpec
from ..model.layout import ModelLayout
from ..model.spec import ModelSpec

DTYPE = torch.float64  # the generators, their Gram and every solve: float64 whatever the parameters' dtype


def fine_shapes(spec: ModelSpec) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of the flat layout with every attention block split into its layer's blocks."""
    out = []
    layers = spec.layer_specs
    for name, shape in spec.block_shapes():
        if name.endswith(".attn"):
            a = layers[int(name.split(".")[1])].attention
            out += [(f"{name}.{block}", s) for block, s in a.block_shapes().items()]
        else:
            out.append((name, shape))
    return out


class FineLayout(FlatLayout):
    """ModelLayout's flat vector, attention blocks split (module docstring)."""

    def __init__(self, spec: ModelSpec):
        super().__init__(fine_shapes(spec), label=f"fine layout of {spec.label}")
        self.spec = spec
        assert self.size == ModelLayout(spec).size

    def flatten_partial(self, blocks: dict[str, torch.Tensor], lead: tuple = (), dtype=DTYPE, device=None):
        """(..., P) with the given blocks in place and zeros elsewhere (lead: the leading dims)."""
        some = next(iter(blocks.values()), None)
        if some is not None:
            lead = tuple(some.shape[: some.dim() - len(self.blocks[next(iter(blocks))].shape)])
            dtype, device = some.dtype, some.device
        out = torch.zeros(*lead, self.size, dtype=dtype, device=device)
        for name, t in blocks.items():
            b = self.blocks[name]
            out[..., b.slice] = t.reshape(*lead, b.size)
        return out


@dataclass(frozen=True)
class Reader:
    """A linear map reading a norm's output (module docstring)."""

    weight: str  # fine block name
    axis: int  # the axis of the block that contracts with the d_model input
    bias: str | None  # its bias block (None: no bias)
    width: int  # outputs


class Point:
    """theta (P,) of `spec` as named float64 blocks, with the model's readers and writers."""

    def __init__(self, spec: ModelSpec, theta: torch.Tensor):
        self.spec = spec
        self.layout = FineLayout(spec)
        self.theta = theta.detach().to(DTYPE)
        self.w = self.layout.unflatten(self.theta)
        self.d = spec.d_model

    # norms -----------------------------------------------------------------------------------------
    def gain(self, norm: str) -> torch.Tensor:
        """The gain a norm applies (Gemma stores w, applies 1 + w)."""
        g = self.w[f"{norm}.gain"]
        return 1.0 + g if self.spec.gemma_gain else g

    def beta(self, norm: str) -> torch.Tensor | None:
        return self.w.get(f"{norm}.bias")

    @property
    def layernorm(self) -> bool:
        return self.spec.norm == "layernorm"

    # readers ---------------------------------------------------------------------------------------
    def attention_readers(self, layer: int) -> list[Reader]:
        a, p = self.spec.layer_specs[layer].attention, f"layers.{layer}.attn."
        if a.kv_lora_rank:
            query = (
                [Reader(p + "W_DQ", 0, None, a.q_lora_rank)]
                if a.q_lora_rank
                else [Reader(p + "W_Q", 1, None, a.n_heads * a.d_head_qk)]
            )
            return query + [Reader(p + "W_DKV", 0, None, a.kv_lora_rank), Reader(p + "W_KR", 0, None, a.rope_dims)]
        out = []
        for w, b, width in (
            ("W_Q", "b_Q", a.n_heads * a.d_head_qk),
            ("W_K", "b_K", a.n_kv_heads * a.d_head_qk),
            ("W_V", "b_V", a.n_kv_heads * a.d_head_v),
        ):
            out.append(Reader(p + w, 1, p + b if p + b in self.layout else None, width))
        return out

    def mlp_readers(self, layer: int) -> list[Reader]:
        mlp, p = self.spec.layer_specs[layer].mlp, f"layers.{layer}.mlp."

        def bias(name):
            return p + name if p + name in self.layout else None

        if isinstance(mlp, MoESpec):
            out = [Reader(p + "router", 0, bias("router_bias"), mlp.n_experts)]
            out += [Reader(p + n, 1, bias(f"{n}_bias"), mlp.n_experts * mlp.d_expert) for n in ("gate", "up")]
            if mlp.n_shared:
                out += [Reader(p + n, 0, None, mlp.d_shared) for n in ("shared_gate", "shared_up")]
            return out
        names = ("gate", "up") if mlp.gated else ("up",)
        return [Reader(p + n, 0, bias(f"{n}_bias"), mlp.d_ff) for n in names]

    def head_reader(self) -> Reader:
        """The map reading the last norm (or the raw stream): the unembedding, E itself when tied, BERT's dense."""
        bias = "unembed_bias" if "unembed_bias" in self.layout else None
        if self.spec.mlm_head:
            return Reader("mlm.dense", 0, "mlm.dense_bias", self.d)
        if self.spec.tied:
            return Reader("embed", 1, bias, self.spec.vocab_size)
        return Reader("unembed", 0, bias, self.spec.vocab_size)

    def norm_readers(self) -> dict[str, list[Reader]]:
        """norm name -> the linear maps reading it, for pre-LN models (the final norm's: the head)."""
        spec, out = self.spec, {}
        for i in range(spec.n_layers):
            attn, mlp = self.attention_readers(i), self.mlp_readers(i)
            if spec.shared_norm:
                out[f"layers.{i}.norm_1"] = attn + mlp
            else:
                out[f"layers.{i}.norm_1"], out[f"layers.{i}.norm_2"] = attn, mlp
        if spec.final_norm:
            out["final_norm"] = [self.head_reader()]
        return out

    # writers ---------------------------------------------------------------------------------------
    def block_writers(self, layer: int) -> list[str]:
        """The blocks of block `layer` that write into the stream (last axis d)."""
        a, mlp = self.spec.layer_specs[layer].attention, self.spec.layer_specs[layer].mlp
        p = f"layers.{layer}."
        names = [p + "attn.W_O"] + ([p + "attn.b_O"] if a.has_bias("o") else [])
        for name, _ in mlp.shapes(self.d):
            if name in ("down", "down_bias", "shared_down"):
                names.append(p + "mlp." + name)
        return names

    def embedding_writers(self) -> list[str]:
        """Blocks that write the stream's initial value: E (or the embedding norm's gain and bias), positions, type row 0."""
        if self.spec.embedding_norm:
            return [n for n in ("embed_norm.gain", "embed_norm.bias") if n in self.layout]
        return [n for n in ("embed", "pos", "token_type") if n in self.layout]

    def writer_rows(self, name: str) -> torch.Tensor:
        """The rows of a writer that the model reads: (rows, d) (the position rows read, token-type row 0)."""
        t = self.w[name]
        if name == "pos":
            return t[list(self.spec.position_rows)]
        if name == "token_type":
            return t[:1]
        return t.reshape(-1, self.d)


def rows_update(point: Point, name: str, new_rows: torch.Tensor) -> torch.Tensor:
    """The block `name` with its rows in use replaced by new_rows (..., rows, d), the others zero."""
    shape = point.w[name].shape
    if name == "pos":  # the rows read: 0..seq_len-1 and a pad's own row
        out = torch.zeros(*new_rows.shape[:-2], *shape, dtype=DTYPE)
        out[..., list(point.spec.position_rows), :] = new_rows
        return out
    rows = point.writer_rows(name).shape[0]
    total = math.prod(shape[:-1]) if len(shape) > 1 else 1
    if rows == total:  # contiguous: new_rows may be an expanded view, whose stride-0 copies change later sums' order
        return new_rows.reshape(*new_rows.shape[:-2], *shape).contiguous()
    out = torch.zeros(*new_rows.shape[:-2], total, shape[-1], dtype=DTYPE)
    out[..., :rows, :] = new_rows
    return out.reshape(*new_rows.shape[:-2], *shape)
