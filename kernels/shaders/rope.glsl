// The rope rotation shared by rope.comp and kv_write.comp's ROPE build, so both rotate with the same
// arithmetic. Pair i of a head at position `pos`: angle pos * base^(-2i/rope_dims), divided by `factor`
// (llama3 rope_freqs; 1.0 when absent). Returns (x0, x1) rotated by that angle.
vec2 rope_rotate(vec2 pair, uint i, uint rope_dims, float base, float factor, int pos) {
  float freq = pow(base, -float(2u * i) / float(rope_dims)) / factor;
  float theta = float(pos) * freq;
  float c = cos(theta);
  float s = sin(theta);
  return vec2(pair.x * c - pair.y * s, pair.x * s + pair.y * c);
}
