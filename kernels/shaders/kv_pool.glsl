// The KV page pool as the attention split passes read it (attention.comp, attention_coopmat.comp): up to 4
// bindings (1..4) of pages_per_binding whole pages each, for a pool larger than one binding's
// maxStorageBufferRange; unused bindings repeat the first. 8 f16 an element. Include after the page table
// binding and the push constants `pc` (page_size, pages_per_binding, n_layers, layer, n_kv_heads, head_dim).
layout(set = 0, binding = 1) readonly buffer KV0 { uvec4 kv0[]; };
layout(set = 0, binding = 2) readonly buffer KV1 { uvec4 kv1[]; };
layout(set = 0, binding = 3) readonly buffer KV2 { uvec4 kv2[]; };
layout(set = 0, binding = 4) readonly buffer KV3 { uvec4 kv3[]; };

#include "kv_layout.glsl"

// Location of element 0 of the key (is_v 0) or value (is_v 1) row of position j, KV head kh, of the
// sequence whose page table starts at pt_off: the binding in the top 2 bits, the 32-bit word index inside
// it below (a binding holds < 2^30 words).
uint kv_word(uint pt_off, uint j, uint kh, uint is_v) {
  uint page = page_table[pt_off + j / pc.page_size];
  uint chunk = page / pc.pages_per_binding;
  page -= chunk * pc.pages_per_binding;
  uint elem = kv_element(page, pc.layer, is_v, j % pc.page_size, kh * pc.head_dim, pc.n_layers, pc.page_size,
                         pc.n_kv_heads * pc.head_dim);
  return (chunk << 30) | (elem >> 1);
}

// The 16 bytes holding word loc (loc's word index a multiple of 4 where a whole row piece is read).
uvec4 kv_load4(uint loc) {
  uint i = (loc & 0x3FFFFFFFu) >> 2;
  switch (loc >> 30) {
    case 0u: return kv0[i];
    case 1u: return kv1[i];
    case 2u: return kv2[i];
    default: return kv3[i];
  }
}
