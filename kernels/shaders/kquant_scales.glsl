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
#endif
