// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K superblock, from its 12 scale bytes as
// three words s (bytes 0-3, 4-7, 8-11). Sub-blocks 0-3 keep both in the low 6 bits of bytes j and j + 4;
// 4-7 split them into a nibble of byte j + 4 and the top 2 bits of bytes j - 4 and j. Branch-free: lanes
// decoding different sub-blocks side by side do not diverge.
#ifndef KQUANT_SCALES_GLSL
#define KQUANT_SCALES_GLSL
vec2 kq_scale_min(uvec3 s, uint j) {
  uint sh = (j & 3u) * 8u;
  bool low = j < 4u;
  uint b = ((low ? s.x : s.y) >> sh) & 0xFFu;   // byte j
  uint b4 = ((low ? s.y : s.z) >> sh) & 0xFFu;  // byte j + 4
  uint b0 = (s.x >> sh) & 0xFFu;                // byte j - 4 (j >= 4)
  uint sc = low ? (b & 63u) : ((b4 & 0xFu) | ((b0 >> 6) << 4));
  uint mn = low ? (b4 & 63u) : ((b4 >> 4) | ((b >> 6) << 4));
  return vec2(float(sc), float(mn));
}

// The scales and mins of sub-blocks 2p and 2p + 1 (p = 0..3) together, as bytes 0 and 1 of x (scales) and y
// (mins): both bytes of a pair come from neighbouring bytes at the same shift, so each is one shift and mask
// for the low 4 or 6 bits (and for sub-blocks 4-7 one more for the top 2).
uvec2 kq_pair_scales_mins(uvec3 s, uint p) {
  uint sh = 16u * (p & 1u);
  bool low = p < 2u;
  uint low_mask = low ? 0x3F3Fu : 0x0F0Fu, top_mask = low ? 0u : 0x3030u;
  uint sc = (((low ? s.x : s.z) >> sh) & low_mask) | ((s.x >> (sh + 2u)) & top_mask);
  uint mn = (((low ? s.y : s.z) >> (low ? sh : sh + 4u)) & low_mask) | ((s.y >> (sh + 2u)) & top_mask);
  return uvec2(sc, mn);
}
#endif
