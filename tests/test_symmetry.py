"""The symmetry toolkit (attnid.symmetry): subspace, projection, group action, balance, conserved quantities.

The Jacobian is the judge: projected vectors must lie in the null space of theta -> Y(X; theta)
(torch.func.jacfwd of attnid.layer.forward.attention), and dim T must equal attnid.layer.counting's count.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import attention_specs

from attnid import symmetry as S
from attnid.layer.forward import attention
from attnid.layer.counting import count
from attnid.jacobian import BIAS_SUBSETS
from attnid.layer.layout import Layout
from attnid.layer.spec import AttentionSpec

F64 = torch.float64

# Corner specs: MHA, GQA, MQA, head sizes above d_model (k > d, v > d), d_v != d_k, partial and
# full RoPE, value bias without output bias with G v < d and G v > d, causal.
SPECS = [
    AttentionSpec(8, 2),
    AttentionSpec(8, 4, 2, biases="qkvo"),
    AttentionSpec(8, 4, 1, d_head_qk=3, d_head_v=2, biases="kv"),
    AttentionSpec(8, 4, 2, rope_dims=2, biases="qkvo", causal=True),
    AttentionSpec(8, 4, 1, d_head_qk=4, d_head_v=4, rope_dims=4, biases="qkvo"),
    AttentionSpec(4, 2, 1, d_head_qk=6, d_head_v=6),
    AttentionSpec(4, 2, 1, d_head_qk=6, d_head_v=6, biases="qkvo"),
    AttentionSpec(4, 2, 2, d_head_qk=6, d_head_v=5, biases="v"),
    AttentionSpec(3, 3, 1, d_head_qk=5, d_head_v=4, rope_dims=2, biases="qv"),
    AttentionSpec(8, 4, 4, d_head_qk=2, d_head_v=1, biases="v"),
    AttentionSpec(4, 1, d_head_qk=10, d_head_v=9, rope_dims=4, biases="qkv"),
    AttentionSpec(4, 4, 2, d_head_qk=5, d_head_v=3, rope_dims=2, biases="ko"),
]


def ids(specs):
    return [s.label for s in specs]


def point(spec, seed=0, dtype=F64):
    return Layout(spec).init(torch.Generator().manual_seed(seed), dtype=dtype)


def inputs(spec, seed=1, B=2, T=5):
    return torch.randn(B, T, spec.d_model, generator=torch.Generator().manual_seed(seed), dtype=F64)


def projection_matrix(spec, theta, part=None):
    """P_T as a dense matrix (tests only): row i is P_T e_i."""
    return S.Projector(spec, theta)(torch.eye(Layout(spec).size, dtype=theta.dtype), part)


def jacobian(spec, theta, x):
    return torch.func.jacfwd(lambda t: attention(t, x, spec))(theta).reshape(-1, theta.numel())


def check_projector(spec, seed=0, jac=True):
    theta = point(spec, seed)
    E = projection_matrix(spec, theta)
    dim = S.subspace_dim(spec)
    assert dim == count(spec).unidentified
    assert abs(torch.trace(E).item() - dim) < 1e-8, "trace of an orthogonal projector = its rank = dim T"
    assert (E - E.T).abs().max() < 1e-12, "self-adjoint"
    assert (E @ E - E).abs().max() < 1e-12, "idempotent"
    if jac:
        J = jacobian(spec, theta, inputs(spec))
        assert (J @ E.T).norm() / (J.norm() * E.norm()) < 1e-12, "projected vectors lie in the Jacobian null space"


@pytest.mark.parametrize("spec", SPECS, ids=ids(SPECS))
def test_projector_is_the_orthogonal_projection_onto_the_jacobian_null_space(spec):
    check_projector(spec)


@pytest.mark.parametrize("biases", BIAS_SUBSETS)
def test_projector_every_bias_subset(biases):
    check_projector(AttentionSpec(4, 4, 2, d_head_qk=3, d_head_v=3, rope_dims=2, biases=biases))
    check_projector(AttentionSpec(3, 2, 1, d_head_qk=4, d_head_v=5, biases=biases), jac=False)


@settings(max_examples=40, deadline=None)
@given(spec=attention_specs(d=(2, 6), groups=(1, 3), heads_per_group=(1, 3), head=(1, 8), causal=False), seed=st.integers(0, 2**16))
def test_dim_equals_count_on_random_specs(spec, seed):
    check_projector(spec, seed, jac=False)


@pytest.mark.parametrize("spec", SPECS[:5], ids=ids(SPECS[:5]))
def test_parts_are_orthogonal_pieces_of_the_projection(spec):
    theta = point(spec)
    E = projection_matrix(spec, theta)
    Eqk, Evo = projection_matrix(spec, theta, "query_key"), projection_matrix(spec, theta, "value_output")
    assert (Eqk + Evo - E).abs().max() < 1e-13
    for part, Ep in (("query_key", Eqk), ("value_output", Evo)):
        mask = S.part_mask(spec, part)
        assert abs(torch.trace(Ep).item() - S.subspace_dim(spec, part)) < 1e-8
        assert Ep[:, ~mask].abs().max() == 0 and Ep[~mask].abs().max() == 0  # supported on the part
    assert (S.part_mask(spec, "query_key") ^ S.part_mask(spec, "value_output")).all()
    assert S.subspace_dim(spec, "query_key") + S.subspace_dim(spec, "value_output") == S.subspace_dim(spec)


def test_gradient_is_orthogonal_to_the_subspace():
    for spec in SPECS:
        theta, x = point(spec, 3), inputs(spec, 4)
        target = torch.randn(x.shape, generator=torch.Generator().manual_seed(5), dtype=F64)
        ov = S.overlap(spec, theta, grad_of(spec, theta, x, target))
        assert ov["all"] < 1e-8 and ov["query_key"] < 1e-8 and ov["value_output"] < 1e-8, (spec.label, ov)
        noise = torch.randn(theta.shape, generator=torch.Generator().manual_seed(6), dtype=F64)
        assert S.overlap(spec, theta, noise)["all"] > 0.2 * S.chance_overlap(spec)  # a random vector is not


def test_project_out_batch_basis_and_chance():
    spec = SPECS[3]
    theta = point(spec)
    vec = torch.randn(3, Layout(spec).size, generator=torch.Generator().manual_seed(2), dtype=F64)
    batched = S.project(spec, theta, vec)
    assert torch.allclose(batched[1], S.project(spec, theta, vec[1]), atol=1e-14)
    assert torch.allclose(S.project_out(spec, theta, vec) + batched, vec, atol=1e-14)
    Bs = S.basis(spec, theta, torch.Generator().manual_seed(0))
    assert Bs.shape == (Layout(spec).size, S.subspace_dim(spec))
    assert torch.allclose(Bs.T @ Bs, torch.eye(Bs.shape[1], dtype=F64), atol=1e-12)
    assert torch.allclose(S.project(spec, theta, Bs.T), Bs.T, atol=1e-12)
    assert S.chance_overlap(spec) == pytest.approx((S.subspace_dim(spec) / Layout(spec).size) ** 0.5)
    # the rms overlap of isotropic vectors is the chance level
    many = torch.randn(400, Layout(spec).size, generator=torch.Generator().manual_seed(1), dtype=F64)
    rms = (S.project(spec, theta, many).norm(dim=1) ** 2 / many.norm(dim=1) ** 2).mean().sqrt()
    assert rms.item() == pytest.approx(S.chance_overlap(spec), rel=0.1)


def test_float32_projection_matches_float64():
    spec = AttentionSpec(16, 4, 2, rope_dims=2, biases="qkvo")
    theta = point(spec, dtype=torch.float32)
    vec = torch.randn(theta.shape, generator=torch.Generator().manual_seed(1))
    p32 = S.project(spec, theta, vec)
    p64 = S.project(spec, theta.double(), vec.double())
    assert p32.dtype == torch.float32
    assert (p32.double() - p64).norm() / vec.norm() < 1e-5
    assert (S.project(spec, theta, p32) - p32).norm() / p32.norm() < 1e-5


def test_degenerate_point_zero_output_weights():
    spec = AttentionSpec(6, 2, biases="vo")
    theta = point(spec)
    Layout(spec).unflatten(theta)["W_O"].zero_()
    E = projection_matrix(spec, theta)
    assert (E - E.T).abs().max() < 1e-12 and (E @ E - E).abs().max() < 1e-12
    J = jacobian(spec, theta, inputs(spec))
    assert (J @ E.T).norm() / (J.norm() * E.norm()) < 1e-12


# --------------------------------------------------------------------------------------------
# Group action and head permutations
# --------------------------------------------------------------------------------------------


def rel_change(spec, theta, theta2, x):
    y = attention(theta, x, spec)
    return ((attention(theta2, x, spec) - y).abs().max() / y.abs().max()).item()


@pytest.mark.parametrize("spec", SPECS, ids=ids(SPECS))
def test_allowed_group_elements_keep_the_function(spec):
    theta, x = point(spec), inputs(spec)
    qk, vo = S.group_element(spec, torch.Generator().manual_seed(7))
    moved = S.act(spec, theta, qk, vo)
    assert rel_change(spec, theta, moved, x) < 1e-10
    assert (moved - theta).abs().max() > 1e-2  # it did move
    if spec.rope_dims:  # a generic matrix does not commute with the rotations
        bad, _ = S.group_element(spec, torch.Generator().manual_seed(7), allowed=False)
        assert rel_change(spec, theta, S.act(spec, theta, bad, None), x) > 1e-3
    if spec.group_size > 1:  # a GQA group shares its key: one element per group, not per query head
        k = spec.d_head_qk
        per_head = S.commutant(
            spec,
            torch.eye(k, dtype=F64)
            + 0.3 * torch.randn(spec.n_heads, k, k, dtype=F64, generator=torch.Generator().manual_seed(8)),
        )
        assert rel_change(spec, theta, S.act_heads(spec, theta, per_head), x) > 1e-3
        shared = qk.repeat_interleave(spec.group_size, dim=0)
        assert (S.act_heads(spec, theta, shared) - S.act(spec, theta, qk)).abs().max() < 1e-12
    # the tangent of the orbit: d/dt act(exp(t X)) at 0 lies in T
    X = S.commutant(spec, torch.randn(spec.n_kv_heads, spec.d_head_qk, spec.d_head_qk, dtype=F64))
    eps = 1e-6
    tangent = (
        S.act(spec, theta, torch.linalg.matrix_exp(eps * X)) - S.act(spec, theta, torch.linalg.matrix_exp(-eps * X))
    ) / (2 * eps)
    assert (S.project(spec, theta, tangent) - tangent).norm() / tangent.norm() < 1e-8


def test_commutant_is_a_projection_onto_rope_commuting_matrices():
    from attnid.layer.forward import rope_angles

    spec = AttentionSpec(8, 2, d_head_qk=6, rope_dims=4)
    M = S.commutant(spec, torch.randn(6, 6, dtype=F64))
    assert torch.equal(S.commutant(spec, M), M)
    angles = rope_angles(spec, 5, F64, None)[3]  # (p/2,) at position 3
    R = torch.eye(6, dtype=F64)
    for i, a in enumerate(angles):
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[a.cos(), -a.sin()], [a.sin(), a.cos()]])
    assert torch.allclose(M @ R, R @ M, atol=1e-14)


def test_permute_heads():
    spec = AttentionSpec(8, 6, 3, d_head_qk=3, rope_dims=2, biases="qkvo")
    theta, x = point(spec), inputs(spec)
    within = [1, 0, 2, 3, 5, 4]
    across = [4, 5, 0, 1, 3, 2]  # groups permuted as wholes, heads inside them too
    for perm in (within, across):
        moved = S.permute_heads(spec, theta, perm)
        assert rel_change(spec, theta, moved, x) < 1e-12 and not torch.equal(moved, theta)
    with pytest.raises(ValueError, match="splits KV group"):
        S.permute_heads(spec, theta, [2, 1, 0, 3, 4, 5])
    with pytest.raises(ValueError, match="permutation"):
        S.permute_heads(spec, theta, [0, 0, 1, 2, 3, 4])


# --------------------------------------------------------------------------------------------
# Balance and conserved quantities
# --------------------------------------------------------------------------------------------


def total_norm2(spec, theta, part):
    return theta[S.part_mask(spec, part)].pow(2).sum().item()


@pytest.mark.parametrize("spec", SPECS, ids=ids(SPECS))
def test_balance(spec):
    theta, x = point(spec, 2), inputs(spec)
    balanced = S.balance(spec, theta)
    assert rel_change(spec, theta, balanced, x) < 1e-10
    assert (S.balance(spec, balanced) - balanced).abs().max() < 1e-10, "idempotent"
    imb = S.imbalance(spec, balanced)
    assert imb["query_key"].abs().max() < 1e-10 and imb["value_output"].abs().max() < 1e-10, "balanced"
    for part in S.PARTS:
        assert total_norm2(spec, balanced, part) <= total_norm2(spec, theta, part) + 1e-12
    # any other point of the orbit has at least the balanced norm
    qk, vo = S.group_element(spec, torch.Generator().manual_seed(3), scale=0.2)
    moved = S.act(spec, balanced, qk, vo)
    assert moved.pow(2).sum() >= balanced.pow(2).sum() - 1e-12


def test_balance_norm_matches_the_matrix_geometric_mean():
    """For k <= d, the orbit's minimum norm is reached at A X^{1/2}, X = (A^T A)^{-1} # (B^T B) (Bhatia ch. 4)."""
    spec = AttentionSpec(12, 3, 3, biases="qk")
    theta = point(spec, 4)
    Q, K = S.qk_stack(spec, Layout(spec).unflatten(theta))
    Ga, Gb = Q.mT @ Q, K.mT @ K

    def sqrtm(X, power=0.5):
        e, U = torch.linalg.eigh(X)
        return (U * e[..., None, :] ** power) @ U.mT

    Ga_h, Ga_ih = sqrtm(Ga), sqrtm(Ga, -0.5)
    X = Ga_ih @ sqrtm(Ga_h @ Gb @ Ga_h) @ Ga_ih  # geometric mean Ga^{-1} # Gb
    assert torch.allclose(X @ Ga @ X, Gb, atol=1e-10)
    Xh = sqrtm(X)
    geo = (Q @ Xh).pow(2).sum() + (K @ torch.linalg.inv(Xh)).pow(2).sum()
    Qb, Kb = S.qk_stack(spec, Layout(spec).unflatten(S.balance(spec, theta)))
    assert (Qb.pow(2).sum() + Kb.pow(2).sum()).item() == pytest.approx(geo.item(), rel=1e-12)


def grad_of(spec, theta, x, target):
    return torch.func.grad(lambda t: ((attention(t, x, spec) - target) ** 2).mean())(theta)


def gd_drift(spec, theta, x, target, lr):
    return S.imbalance_drift(spec, theta, theta - lr * grad_of(spec, theta, x, target))


def adamw_drift(spec, theta, x, target, lr):
    param = torch.nn.Parameter(theta.clone())
    opt = torch.optim.AdamW([param], lr=lr, weight_decay=0.1)
    ((attention(param, x, spec) - target) ** 2).mean().backward()
    opt.step()
    return S.imbalance_drift(spec, theta, param.detach())


@pytest.mark.parametrize("spec", [SPECS[1], SPECS[3], SPECS[6]], ids=ids([SPECS[1], SPECS[3], SPECS[6]]))
def test_the_imbalance_reference_of_stacked_points_is_each_point_s(spec):
    thetas = torch.stack([point(spec, seed) for seed in (1, 2, 3)])  # (3, P)
    stacked = S.imbalance_reference(spec, thetas)
    for m, theta in enumerate(thetas):
        alone = S.imbalance_reference(spec, theta)
        for part in S.PARTS:
            assert stacked["scale"][part].shape == (3,) and alone["scale"][part].dim() == 0
            assert stacked["scale"][part][m] == pytest.approx(alone["scale"][part].item(), rel=1e-14)
            assert torch.allclose(stacked["imbalance"][part][m], alone["imbalance"][part], rtol=1e-14, atol=0)


@pytest.mark.parametrize("spec", [SPECS[1], SPECS[3], SPECS[6]], ids=ids([SPECS[1], SPECS[3], SPECS[6]]))
def test_gradient_descent_conserves_imbalance_to_second_order(spec):
    theta, x = point(spec, 5), inputs(spec, 6)
    target = torch.randn(x.shape, generator=torch.Generator().manual_seed(7), dtype=F64)
    lr = 1e-3
    gd, gd_half = gd_drift(spec, theta, x, target, lr), gd_drift(spec, theta, x, target, lr / 2)
    ad, ad_half = adamw_drift(spec, theta, x, target, lr), adamw_drift(spec, theta, x, target, lr / 2)
    for part in S.PARTS:
        assert 3.8 < gd[part] / gd_half[part] < 4.2, "plain GD: drift O(lr^2)"
        assert 1.8 < ad[part] / ad_half[part] < 2.2, "AdamW: drift O(lr)"
        assert ad[part] > 100 * gd[part]
    assert (
        S.imbalance_drift(spec, None, theta - lr * grad_of(spec, theta, x, target), S.imbalance_reference(spec, theta))
        == gd
    )
    # without the quadratic term the drift is zero: a first-order (infinitesimal) step conserves exactly
    grad = grad_of(spec, theta, x, target)
    _, dI = torch.func.jvp(lambda t: S.imbalance(spec, t)["query_key"], (theta,), (grad,))
    assert dI.abs().max() < 1e-12 * S.imbalance(spec, theta)["query_key"].abs().max().clamp_min(1)


def test_a_plain_gradient_stays_orthogonal_at_an_ill_conditioned_factor():
    """A square factor trained towards low rank (smallest singular value 1e-7 of its largest: full rank to the
    Jacobian's 1e-10 tolerance) keeps the orbit's kernel, so a gradient of any function of A B^T projects to
    rounding. Its Gram's smallest eigenvalue, 1e-14 of the largest, is below a Gram rank tolerance of 1e3 n eps:
    judged on the Gram, the kernel grew by n and the gradient's overlap read ~1e-7 (measured in training)."""
    gen = torch.Generator().manual_seed(0)
    n = 16
    U, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
    W, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
    A = (U * torch.logspace(0, -7, n, dtype=torch.float64)) @ W.mT
    Bt = torch.randn(n, n, generator=gen, dtype=torch.float64)
    A_, Bt_ = A.clone().requires_grad_(), Bt.clone().requires_grad_()
    torch.sin(A_ @ Bt_).sum().backward()
    kernel = S.ProductKernel(A[None], Bt[None])
    assert int(kernel.ma.sum()) == n  # A is full rank
    tA, tBt = kernel(A_.grad[None], Bt_.grad[None])
    overlap = torch.cat([tA.flatten(), tBt.flatten()]).norm() / torch.cat([A_.grad.flatten(), Bt_.grad.flatten()]).norm()
    assert overlap < 1e-12, float(overlap)
