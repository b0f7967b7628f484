"""Hypothesis strategies shared by the tests: random attention specs within given size ranges."""

from hypothesis import strategies as st

from attnid.layer.spec import AttentionSpec


@st.composite
def attention_specs(draw, d=(1, 40), groups=(1, 6), heads_per_group=(1, 5), head=(1, 48), causal=True):
    """A valid AttentionSpec: G groups of r heads, d_head_qk and d_head_v drawn independently (may exceed
    d_model), rotated dims as an even number up to d_head_qk or a RoPE word (none / half / full), any
    bias subset, causal or not (if `causal`)."""
    G = draw(st.integers(*groups))
    H = G * draw(st.integers(*heads_per_group))
    k = draw(st.integers(*head))
    return AttentionSpec(
        draw(st.integers(*d)),
        H,
        G,
        d_head_qk=k,
        d_head_v=draw(st.integers(*head)),
        rope_dims=draw(
            st.one_of(st.sampled_from(["none", "half", "full"]), st.builds(lambda n: 2 * n, st.integers(0, k // 2)))
        ),
        biases="".join(b for b in "qkvo" if draw(st.booleans())),
        causal=draw(st.booleans()) if causal else False,
    )
