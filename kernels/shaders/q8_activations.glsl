// Activations quantized for the integer products of matvec_q8.comp, by every shader that writes them
// (quantize_q8.comp, the SwiGLU product's QUANT_OUT, attention_combine's), so all round identically: 16
// values to bytes q with scale d = max|x| / 127, q = round(x / d), and s = sum(q).

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
