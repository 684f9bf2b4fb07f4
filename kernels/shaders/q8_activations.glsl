// Activations quantized for the integer products of matvec_q8.comp, by every shader that writes them
// (quantize_q8.comp, a product's QUANT_OUT, attention_combine's), so all round identically: 16 values to
// bytes q with scale d = max|x| / 127, q = round(x / d), and s = sum(q). A normed input also carries each
// group's sum of squares (before the norm weight), taken in one fixed order by sum_squares16, from which the
// product computes the token's 1 / rms (matvec_q8.comp), so every writer gives the same bits.

// 16 x values as bytes: x ~= d * q, s = sum(q).
struct XGroup {
  uvec4 q;
  float d;
  int s;
};

uint pack_bytes(ivec4 q) {
  return uint(q.x & 0xFF) | (uint(q.y & 0xFF) << 8) | (uint(q.z & 0xFF) << 16) | (uint(q.w) << 24);
}

XGroup quantize16(vec4 v0, vec4 v1, vec4 v2, vec4 v3) {
  vec4 m = max(max(abs(v0), abs(v1)), max(abs(v2), abs(v3)));
  float amax = max(max(m.x, m.y), max(m.z, m.w));
  float id = amax > 0.0 ? 127.0 / amax : 0.0;
  ivec4 q0 = ivec4(round(v0 * id)), q1 = ivec4(round(v1 * id)), q2 = ivec4(round(v2 * id)), q3 = ivec4(round(v3 * id));
  ivec4 s4 = (q0 + q1) + (q2 + q3);
  XGroup g;
  g.q = uvec4(pack_bytes(q0), pack_bytes(q1), pack_bytes(q2), pack_bytes(q3));
  g.d = amax / 127.0;
  g.s = (s4.x + s4.y) + (s4.z + s4.w);
  return g;
}

// The sum of squares of 16 values, x[0]^2 + x[1]^2 + ... in index order: one fma chain, the same in every
// shader that writes it.
float sum_squares16(vec4 v0, vec4 v1, vec4 v2, vec4 v3) {
  precise float ss = 0.0;
  ss = fma(v0.x, v0.x, ss);
  ss = fma(v0.y, v0.y, ss);
  ss = fma(v0.z, v0.z, ss);
  ss = fma(v0.w, v0.w, ss);
  ss = fma(v1.x, v1.x, ss);
  ss = fma(v1.y, v1.y, ss);
  ss = fma(v1.z, v1.z, ss);
  ss = fma(v1.w, v1.w, ss);
  ss = fma(v2.x, v2.x, ss);
  ss = fma(v2.y, v2.y, ss);
  ss = fma(v2.z, v2.z, ss);
  ss = fma(v2.w, v2.w, ss);
  ss = fma(v3.x, v3.x, ss);
  ss = fma(v3.y, v3.y, ss);
  ss = fma(v3.z, v3.z, ss);
  ss = fma(v3.w, v3.w, ss);
  return ss;
}
