// The KV page layout of kernels/ops/kv_layout.h, for the shaders that read or write pages: page p, layer l
// holds K [page_tokens][kv_dim] then V [page_tokens][kv_dim] (f16), the layers of a page contiguous.
// The f16 element index of (page inside its binding, layer, K (is_v 0) or V (1), slot in the page, channel).
uint kv_element(uint page, uint layer, uint is_v, uint slot, uint channel, uint n_layers, uint page_tokens,
                uint kv_dim) {
  return ((page * n_layers + layer) * 2u + is_v) * page_tokens * kv_dim + slot * kv_dim + channel;
}
