"""One attention layer: its configuration, its exact count, its flat layout and its function.

    spec               AttentionSpec: d_model, heads, KV groups, head sizes, RoPE, biases, mask and the variants
    spec_variants      the variant fields (q/k norms, sinks, softcapping, windows, ALiBi, latent attention, output
                       gates): their validation and parameter shapes
    counting           count(spec): unidentified, identified and weakly identified dimensions, closed form
    counting_variants  what each variant changes in the count (its hypotheses in the docstring)
    symbolic           the closed forms in sympy, checked against `count`, and their LaTeX table
    layout             Layout(spec): the flat parameter vector theta (P,) <-> named blocks W_Q, b_Q, ... (torch)
    forward            attention(theta, x, spec): the layer's function in torch; AttentionLayer, its module
    variants           the variants' parts of the function (q/k norms, score adjustments, sinks, gates; torch)

The whole-model forms of the same ideas are `attnid.model.spec`, `attnid.model.counting`,
`attnid.model.layout` and `attnid.model.forward`; the group acting on one layer is `attnid.symmetry`, on a whole model `attnid.gauge`.
`spec`, `spec_variants`, `counting`, `counting_variants` and `symbolic` import no torch.
"""
