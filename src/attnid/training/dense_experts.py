"""A mixture of experts computed densely: every expert on every token, weighted by the routing weights
scattered to (tokens, experts), zero for the experts a token did not choose.

`transformers`' experts (a class decorated with `use_experts_implementation`, transformers/integrations/moe.py;
MixtralExperts, transformers/models/mixtral/modeling_mixtral.py) map tokens x (N, d), the router's choices
top_k_index i (N, k) and weights top_k_weights w (N, k) to

    y_n = sum_{j < k} w_nj f_{i_nj}(x_n),   f_e(x) = W_down,e a_e(W_gate_up,e x + b_gate_up,e) + b_down,e

where a_e is the class's `_apply_gate` (Mixtral's default: the halves [g; u] of W_gate_up,e x to act_fn(g) * u,
act_fn silu; GPT-OSS's clamped, interleaved GLU) or, without a gate, `act_fn` of W_up,e x; gate_up_proj is
(E, 2F, d) and down_proj (E, d, F), or (E, d, 2F) and (E, F, d) where the class is `is_transposed`; biases only
where it `has_bias`. With r (N, E) the weights scattered to the experts,

    r_ne = sum_j w_nj [i_nj = e]   (a router's k choices are distinct: r_ne is w_nj exactly, or 0),

the same sum is over all E experts,

    y_n = sum_{e, f} W_down,e[:, f] r_ne h_nef + sum_e r_ne b_down,e,   h_ne = a_e(W_gate_up,e x_n + b_gate_up,e),

two matrix products over the stacked weights, x (N, d) against gate_up_proj as (d, E 2F) and r h (N, E F)
against down_proj as (E F, d), with no gather and no data-dependent shape: it vmaps over runs (the weights
batched) and is deterministic (no index_add_, no scatter). Against `batched_mm` (each (token, choice) gathers
its expert's weights, an (N k, 2F, d) and an (N k, d, F) copy, and multiplies them one token at a time) it
does E / k times the experts' multiply-adds and no copies, which wins at the training sizes
(attnid.training.archs). The two agree to rounding: a chosen expert's terms are the same products summed in
another order (the weight r_ne applied before the down projection instead of after it), an unchosen expert's
are exact zeros (0 * a finite number), and so are their gradients: the mask [i_nj = e] is a constant, so the
gradient reaching w_nj is the one reaching r_{n i_nj}, and an expert's weights get exactly zero from a token
that did not choose it. One difference by design: an unchosen expert whose output is not finite makes y_n NaN
here, where batched_mm never computes it (a run that far gone has diverged anyway).
"""

from __future__ import annotations

import torch

DENSE = "dense"  # the name registered in transformers' ExpertsInterface (a config's `_experts_implementation`)


def dense_experts_forward(
    self: torch.nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """y (N, d) of tokens (N, d), top_k_index (N, k) and top_k_weights (N, k) through every expert of `self`
    (module docstring); the signature of transformers' experts forwards (integrations/moe.py)."""
    if self.has_post_expert_norm or self._is_expert_parallel:  # a norm per expert output does not distribute over r
        raise NotImplementedError(f"{DENSE} experts: no post-expert norm, no expert parallelism")
    n_experts = self.num_experts
    chosen = (top_k_index.unsqueeze(-1) == torch.arange(n_experts, device=top_k_index.device)).to(top_k_weights.dtype)
    routing = torch.einsum("nk,nke->ne", top_k_weights, chosen)  # (N, E): w scattered to its experts, 0 elsewhere
    up = self.gate_up_proj if self.has_gate else self.up_proj
    pattern = "nd,edo->neo" if self.is_transposed else "nd,eod->neo"  # (E, d, O) or (E, O, d)
    h = torch.einsum(pattern, hidden_states, up)  # (N, E, O), O = 2F or F
    if self.has_bias:
        h = h + (self.gate_up_proj_bias if self.has_gate else self.up_proj_bias)  # (E, O)
    h = self._apply_gate(h) if self.has_gate else self.act_fn(h)  # (N, E, F)
    weighted = h * routing.to(h.dtype).unsqueeze(-1)  # (N, E, F)
    pattern = "nef,efd->nd" if self.is_transposed else "nef,edf->nd"  # down_proj (E, F, d) or (E, d, F)
    out = torch.einsum(pattern, weighted, self.down_proj)  # (N, d)
    if self.has_bias:
        out = out + routing.to(out.dtype) @ self.down_proj_bias  # (N, E) @ (E, d)
    return out.to(hidden_states.dtype)


def register() -> str:
    """Register :func:`dense_experts_forward` as DENSE in transformers' ExpertsInterface (once); return the name."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS, ExpertsInterface

    if DENSE not in ALL_EXPERTS_FUNCTIONS:
        ExpertsInterface.register(DENSE, dense_experts_forward)
    elif ALL_EXPERTS_FUNCTIONS[DENSE] is not dense_experts_forward:
        raise RuntimeError(f"transformers already has an experts implementation named {DENSE!r}")
    return DENSE
