"""The whole-model vocabulary: :class:`ModelSpec`, one transformer language model as a function, and the
glossary of the model level (the layer level's is `attnid.layer.spec`).

A model maps token ids (B, T), T <= seq_len <= max_positions, to logits (B, T, V):

    h_0 = s E[tok] (+ E_pos[0..T-1] if positions == "learned") (+ E_type[0])   (B, T, d)   s = embed_scale
          with a pad token (pad_token, pad_row; RoBERTa's padding_idx): the pad reads row pad_row wherever it
          stands, every other token row n - 1, n its place among the tokens that are not the pad (1, 2, ...)
          (+ S[0..T-1] if positions == "sinusoidal": a fixed table, no parameters; `sinusoidal_table`)
    (h_0 = Norm_emb(h_0) if embedding_norm)
    block, pre-LN sequential:   h = h + Attn(Norm_1 h);  h = h + MLP(Norm_2 h)
           with output_norms:   h = h + Norm(Attn(Norm_1 h));  h = h + Norm(MLP(Norm_2 h))
           and no input_norms:  h = h + Norm(Attn(h));  h = h + Norm(MLP(h))     (OLMo-2: the raw stream read)
           pre-LN parallel:     h = h + Attn(Norm_1 h) + MLP(Norm_2 h)   (Norm_2 = Norm_1 if shared_norm)
           post-LN:             h = Norm_1(h + Attn h);  h = Norm_2(h + MLP h)
    logits = Head(Norm_f(h)) U (+ c)    U = E^T if tied, else its own (d, V) matrix; Norm_f if final_norm;
                                        Head = BERT's dense-GELU-norm transform if mlm_head, else identity

Norm: LayerNorm (x - mean) / sqrt(var + eps) * g (+ b), or RMSNorm x / sqrt(mean x^2 + eps) * g;
Gemma stores the gain as w with g = 1 + w (a change of coordinates: counts are unchanged); without norm_gain
a norm has neither g nor b (OLMo's LayerNorm, NanoChat's RMSNorm: g = 1).

Glossary (one name, one meaning, across `attnid.model`, `attnid.hf` and `attnid.gauge`):

    model spec        this dataclass: every shape and option of the function above; its flat parameter vector
                      is laid out by `attnid.model.layout.ModelLayout` (names like `layers.3.mlp.down`)
    block             one transformer layer, a :class:`attnid.model.blocks.LayerSpec`: an attention layer
                      (:class:`attnid.layer.spec.AttentionSpec`) and an MLP (`MLPSpec`, or a mixture `MoESpec`);
                      `layer_specs` lists every block, `layers` holds them when they differ
    stream            the residual stream h (width d = d_model) that every block reads and writes
    reader / writer   a linear map that reads a norm's output (q, k, v, the MLP's up/gate, the router, the
                      unembedding) / writes into the stream (E, positions, W_O, b_O, the MLP's down and bias)
    d_c               the dims a norm's output spans: d - 1 after a LayerNorm (centred), d after an RMSNorm
    positions         learned (a table of max_positions rows), rope (in the attention specs), none, sinusoidal
                      (a fixed table added to the embeddings: no parameters, but V T distinct first-block inputs)
    seq_len           the positions the model is used on (counted and measured); max_positions the rows of
                      the learned table (rows beyond seq_len are never read, but for the pad's)
    pad row           a learned position row read by one token only, the pad (`pad_token`), wherever it stands:
                      RoBERTa counts position ids from padding_idx; `position_rows` lists the rows read
    count             `attnid.model.count_model`: total P, unidentified and weakly identified dims, and the
                      breakdown by source (each source one function of `attnid.model.counting`)
    attention layers  `attnid.model.count_attention_layers`: every block's attention counted alone, summed
    not_modelled      what a description leaves out that the count would need (from a config the mapping
                      could not describe exactly); `count_model` refuses it by name
    judge             `attnid.model.judge`: P - rank of the Jacobian of all logits at a random point
    case              one row of the whole-model grid (`attnid.gauge.cases`; its Jacobian side `attnid.model.grid`):
                      own (this project's forward of a ModelSpec) or real (a `transformers` class, `attnid.model.real`)
    mapping           `attnid.hf.mapping`: a config.json -> ModelSpec, the one place that reads config keys
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..layer.spec import AttentionSpec, SpecError
from .blocks import MLPS, LayerSpec, MLPSpec, pattern

NORMS = ("layernorm", "rmsnorm")
PAD_READS_POSITIONS = "_pad_reads_positions"  # a config mapping's flag: the class reads position ids from its pad id
POSITIONS = ("learned", "rope", "none", "sinusoidal")
NORM_POSITIONS = ("pre", "post")


@dataclass(frozen=True)
class ModelSpec:
    """Shapes and options of one decoder (or encoder) language model; fields as in the module docstring."""

    vocab_size: int  # V
    n_layers: int  # L
    attention: AttentionSpec  # every block's attention layer (its d_model is the model width d)
    d_ff: int  # m: MLP hidden width
    mlp: str = "gelu"  # relu | gelu | swiglu | geglu
    mlp_bias: bool = False
    mlp_sub_norm: bool = False  # an RMSNorm with a gain on the MLP's hidden units before W_down (BitNet)
    norm: str = "layernorm"  # layernorm | rmsnorm
    norm_bias: bool = True  # LayerNorm's additive b (RMSNorm has none)
    norm_eps: float = 1e-5
    gemma_gain: bool = False  # gain stored as w, applied as 1 + w
    norm_position: str = "pre"  # pre | post
    parallel: bool = False  # attention and MLP read the same stream (GPT-J, GPT-NeoX, Falcon)
    shared_norm: bool = False  # parallel blocks with one norm for both branches (GPT-J, Falcon)
    positions: str = "learned"  # learned | rope | none | sinusoidal
    max_positions: int = 8  # rows of the learned position table (the longest sequence the model takes)
    tied: bool = False  # unembedding = E^T
    final_norm: bool = True
    embedding_norm: bool = False  # a norm right after the embeddings (BERT)
    embed_scale: float = 1.0  # Gemma multiplies the embeddings by sqrt(d)
    lm_head_bias: bool = False
    seq_len: int | None = (
        None  # positions the model is used on (default max_positions); learned rows beyond it are unread
    )
    # every block's own attention and MLP (layer 0 = the fields above); () = every block the fields above
    layers: tuple[LayerSpec, ...] = ()
    token_types: int = 0  # rows of a token-type table (BERT's segments); every position reads row 0
    mlm_head: bool = False  # BERT's masked-LM transform (dense d x d + bias, GELU, a norm) before the unembedding
    output_norms: bool = False  # a norm on each sublayer's output before the residual add (Gemma-2/3)
    input_norms: bool = True  # a norm before each sublayer; False: sublayers read the raw stream (OLMo-2)
    norm_gain: bool = True  # False: norms without learnable parameters (OLMo, NanoChat)
    pad_token: int | None = None  # the token that reads position row pad_row, its own (RoBERTa's padding_idx)
    pad_row: int | None = None  # that row: one of the learned rows the positions in use do not read (>= seq_len)
    # (field or config key, why) of what this description leaves out, so that the whole-model count refuses it
    # (a mapped config whose attention is exact but whose whole model is not modelled); () = nothing
    not_modelled: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if self.seq_len is None:
            object.__setattr__(self, "seq_len", self.max_positions)
        for name in ("vocab_size", "n_layers", "d_ff", "max_positions", "seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SpecError(name, f"must be a positive integer, got {value!r}")
        if not isinstance(self.attention, AttentionSpec):
            raise SpecError("attention", f"must be an AttentionSpec, got {type(self.attention).__name__}")
        for name, allowed in (
            ("mlp", MLPS),
            ("norm", NORMS),
            ("positions", POSITIONS),
            ("norm_position", NORM_POSITIONS),
        ):
            if getattr(self, name) not in allowed:
                raise SpecError(name, f"must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.norm == "rmsnorm" and self.norm_bias:
            raise SpecError("norm_bias", "RMSNorm has no additive bias; set norm_bias false")
        if not (self.norm_eps >= 0 and math.isfinite(self.norm_eps)):
            raise SpecError("norm_eps", f"must be finite and >= 0, got {self.norm_eps!r}")
        self._check_layers()
        tt = self.token_types
        if isinstance(tt, bool) or not isinstance(tt, int) or tt < 0:
            raise SpecError("token_types", f"must be an integer >= 0, got {tt!r}")
        rope = [layer.attention.rope_dims for layer in self.layer_specs]
        if (self.positions == "rope") != (max(rope) > 0):
            raise SpecError(
                "positions", f"'{self.positions}' but the attention specs have rope_dims={sorted(set(rope))}"
            )
        if self.shared_norm and not self.parallel:
            raise SpecError("shared_norm", "only parallel blocks share a norm")
        if not self.input_norms and not self.output_norms:
            raise SpecError("input_norms", "blocks without input norms are modelled with output norms (OLMo-2) only")
        if not self.norm_gain and (self.norm_bias or self.gemma_gain):
            raise SpecError("norm_gain", "a norm without a gain has no bias or stored gain either")
        if self.output_norms and (self.parallel or self.norm_position == "post"):
            raise SpecError("output_norms", "sublayer output norms are defined for sequential pre-LN blocks only")
        if self.parallel and self.norm_position == "post":
            raise SpecError("parallel", "parallel blocks are defined pre-LN only")
        if self.seq_len > self.max_positions:
            raise SpecError("seq_len", f"{self.seq_len} exceeds max_positions={self.max_positions}")
        self._check_pad()
        for layer in self.layer_specs:
            if layer.attention.seq_len is not None and layer.attention.seq_len < self.seq_len:
                raise SpecError(
                    "seq_len", f"{self.seq_len} exceeds the attention spec's seq_len={layer.attention.seq_len}"
                )

    def _check_layers(self) -> None:
        """`layers`: n_layers LayerSpecs of width d, layer 0 the top-level fields; uniform ones are stored as ()."""
        layers = tuple(self.layers)
        if not layers:
            return
        if len(layers) != self.n_layers:
            raise SpecError("layers", f"has {len(layers)} entries for n_layers={self.n_layers}")
        for i, layer in enumerate(layers):
            if not isinstance(layer, LayerSpec):
                raise SpecError("layers", f"entry {i} must be a LayerSpec, got {type(layer).__name__}")
            if layer.attention.d_model != self.d_model:
                raise SpecError("layers", f"layer {i} has d_model {layer.attention.d_model}, layer 0 {self.d_model}")
        first = layers[0]
        if first.attention != self.attention or (isinstance(first.mlp, MLPSpec) and first != self.uniform_layer):
            raise SpecError(
                "layers", "layer 0 must be the top-level attention and MLP: build with ModelSpec.from_layers"
            )
        uniform = first == self.uniform_layer and all(layer == first for layer in layers)
        object.__setattr__(self, "layers", () if uniform else layers)

    def _check_pad(self) -> None:
        """`pad_token` and `pad_row` both or neither; a token id, and a learned row no position in use reads."""
        if (self.pad_token is None) != (self.pad_row is None):
            raise SpecError("pad_row", "give pad_token and pad_row together (the pad token and the row it reads)")
        if self.pad_token is None:
            return
        if self.positions != "learned":
            raise SpecError("pad_row", f"a pad's own position row needs learned positions, not {self.positions!r}")
        for name, value, low, high in (
            ("pad_token", self.pad_token, 0, self.vocab_size),
            ("pad_row", self.pad_row, self.seq_len, self.max_positions),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
                raise SpecError(name, f"must be an integer in [{low}, {high}), got {value!r}")

    @property
    def position_rows(self) -> tuple[int, ...]:
        """The learned position rows read: 0..seq_len-1, then the pad's row (none without learned positions)."""
        if self.positions != "learned":
            return ()
        return tuple(range(self.seq_len)) + (() if self.pad_row is None else (self.pad_row,))

    @classmethod
    def from_layers(cls, layers, **fields) -> ModelSpec:
        """A model whose blocks are `layers` (LayerSpecs, one per block); fields: the other ModelSpec fields."""
        layers = tuple(layers)
        if not layers:
            raise SpecError("layers", "needs at least one block")
        first = layers[0]
        mlp = first.mlp
        top = {"attention": first.attention, "n_layers": len(layers), "layers": layers}
        # an MLP of another kind (its own protocol) leaves the top-level MLP fields to `fields` or its own names
        for name, attr in (("d_ff", "d_ff"), ("mlp", "kind"), ("mlp_bias", "bias"), ("mlp_sub_norm", "sub_norm")):
            if hasattr(mlp, attr) and (isinstance(mlp, MLPSpec) or name not in fields):
                top[name] = getattr(mlp, attr)
        return cls(**{**fields, **top})

    @property
    def uniform_layer(self) -> LayerSpec:
        """The block the top-level fields describe (layer 0)."""
        return LayerSpec(self.attention, MLPSpec(self.d_ff, self.mlp, self.mlp_bias, self.mlp_sub_norm))

    @property
    def layer_specs(self) -> tuple[LayerSpec, ...]:
        """Every block's LayerSpec, in order (n_layers of them)."""
        return self.layers or (self.uniform_layer,) * self.n_layers

    @property
    def d_model(self) -> int:
        return self.attention.d_model

    @property
    def gated(self) -> bool:
        return self.mlp in ("swiglu", "geglu", "relu2glu")

    @property
    def adds_positions(self) -> bool:
        """Whether a position table is added to the embeddings (learned or sinusoidal), so that the first block
        reads V T distinct inputs rather than the V token points."""
        return self.positions in ("learned", "sinusoidal")

    def with_eps(self, scale: float) -> ModelSpec:
        """Every norm's eps (the model's and the attention layer's q/k norms) multiplied by `scale`;
        scale 0 is the exact-symmetry limit, where the weakly identified directions become exact."""

        def scaled(a):
            return dataclasses.replace(a, norm_eps=a.norm_eps * scale)

        layers = tuple(dataclasses.replace(x, attention=scaled(x.attention)) for x in self.layers)
        return self.replace(norm_eps=self.norm_eps * scale, attention=scaled(self.attention), layers=layers)

    def replace(self, **changes) -> ModelSpec:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields.update(changes)
        return ModelSpec(**fields)

    def block_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """The flat layout's blocks in order, (name, shape) (the layout is `attnid.model.layout`)."""
        d, V, T = self.d_model, self.vocab_size, self.max_positions
        shapes: list[tuple[str, tuple[int, ...]]] = [("embed", (V, d))]
        if self.positions == "learned":
            shapes.append(("pos", (T, d)))
        if self.token_types:
            shapes.append(("token_type", (self.token_types, d)))

        def norm(name, present=True):
            if present and self.norm_gain:
                shapes.append((f"{name}.gain", (d,)))
            if present and self.norm_bias:
                shapes.append((f"{name}.bias", (d,)))

        if self.embedding_norm:
            norm("embed_norm")
        for i, layer in enumerate(self.layer_specs):
            prefix = f"layers.{i}"
            norm(f"{prefix}.norm_1", self.input_norms)
            shapes.append((f"{prefix}.attn", (layer.attention.n_params,)))
            if self.output_norms:
                norm(f"{prefix}.out_norm_1")
            if not self.shared_norm:
                norm(f"{prefix}.norm_2", self.input_norms)
            shapes += [(f"{prefix}.mlp.{name}", shape) for name, shape in layer.mlp.shapes(d)]
            if self.output_norms:
                norm(f"{prefix}.out_norm_2")
        if self.final_norm:
            norm("final_norm")
        if self.mlm_head:  # BERT's prediction-head transform: a dense map and its own norm
            shapes += [("mlm.dense", (d, d)), ("mlm.dense_bias", (d,))]
            norm("mlm_norm")
        if not self.tied:
            shapes.append(("unembed", (d, V)))
        if self.lm_head_bias:
            shapes.append(("unembed_bias", (V,)))
        return shapes

    @property
    def n_params(self) -> int:
        """P: every parameter, including rows nothing reads."""
        return sum(math.prod(shape) for _, shape in self.block_shapes())

    def norm_names(self) -> list[str]:
        """Every norm of the model, in layout order."""
        names = ["embed_norm"] if self.embedding_norm else []
        for layer in range(self.n_layers):
            names += [f"layers.{layer}.norm_1"] if self.input_norms else []
            names += [f"layers.{layer}.out_norm_1"] if self.output_norms else []
            if not self.shared_norm and self.input_norms:
                names.append(f"layers.{layer}.norm_2")
            names += [f"layers.{layer}.out_norm_2"] if self.output_norms else []
        if self.final_norm:
            names.append("final_norm")
        return names + (["mlm_norm"] if self.mlm_head else [])

    @property
    def label(self) -> str:
        a = self.attention
        first_mlp = self.layer_specs[0].mlp  # an MLP of another kind (mixture of experts) by its own label
        ff = f"ff{self.d_ff}{self.mlp}" if isinstance(first_mlp, MLPSpec) else first_mlp.label
        parts = [f"V{self.vocab_size}", f"L{self.n_layers}", a.label, ff]
        parts += ["mb" if self.mlp_bias else "", "sn" if self.mlp_sub_norm else "", self.norm + ("" if self.norm_bias or self.norm == "rmsnorm" else "nb")]
        parts += [
            self.norm_position,
            "par" + ("1" if self.shared_norm else "2") if self.parallel else "",
            self.positions,
        ]
        parts += [
            f"T{self.seq_len}" + (f"of{self.max_positions}" if self.seq_len < self.max_positions else ""),
            "tied" if self.tied else "",
            "" if self.final_norm else "nofinal",
        ]
        parts += [
            "embnorm" if self.embedding_norm else "",
            "outnorm" if self.output_norms else "",
            "" if self.input_norms else "noin",
            "" if self.norm_gain else "nogain",
            "hb" if self.lm_head_bias else "",
            f"eps{self.norm_eps:g}",
        ]
        parts += [f"types{self.token_types}" if self.token_types else "", "mlm" if self.mlm_head else ""]
        parts += [f"pad{self.pad_token}at{self.pad_row}" if self.pad_row is not None else ""]
        if self.layers:  # the block pattern, then every block after the first by letter
            order, distinct = pattern(self.layers)
            parts += [f"layers{order}"] + [f"{chr(ord('a') + i)}={x.label}" for i, x in enumerate(distinct) if i]
        return "_".join(p for p in parts if p)
