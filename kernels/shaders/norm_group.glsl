// A fused norm's work on a group x of 8 values of x (the values from e0 of a row of k, 0 past its end): their
// squares into sum_sq, in index order, then x times the norm's weights. matvec.comp's one-token NORM_IN
// builds and norm_input.comp both run it, so a token's sum of squares and its normed x have the same bits
// wherever they are computed. The includer declares `norm_w` (float) and `norm_w4` (vec4) on one binding.
void norm_group(inout float x[8], uint e0, uint k, inout float sum_sq) {
  for (uint i = 0u; i < 8u; ++i) sum_sq = fma(x[i], x[i], sum_sq);
  if (e0 + 8u <= k) {
    vec4 a = norm_w4[e0 / 4u], b = norm_w4[e0 / 4u + 1u];
    x[0] *= a.x; x[1] *= a.y; x[2] *= a.z; x[3] *= a.w;
    x[4] *= b.x; x[5] *= b.y; x[6] *= b.z; x[7] *= b.w;
  } else {
    for (uint i = 0u; i < 8u; ++i) x[i] *= (e0 + i < k) ? norm_w[e0 + i] : 0.0;
  }
}
