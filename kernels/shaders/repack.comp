#version 450
// repack_<format>: rewrites a weight tensor, in place, from its file layout into a device format
// (kernels/ops/weight_format.h): each group of 8 consecutive blocks (Q4_0: 18 bytes, Q8_0: 34) or
// superblocks (Q6_K: 210) becomes the 8 blocks' bodies (quants; Q6_K also its scales) followed by their 8 f16
// scales. Groups are independent and the same size in both layouts, so a work group stages its groups in
// shared memory, waits, and writes them back permuted; no other work group touches those bytes.
layout(local_size_x = 256) in;

#if FORMAT == 102  // Q4_0x8: block = d, 16 quant bytes
#define BLOCK 18u
#define BODY_AT 2u
#define D_AT 0u
#define GROUPS_PER_WG 16u
#elif FORMAT == 108  // Q8_0x8: block = d, 32 quant bytes
#define BLOCK 34u
#define BODY_AT 2u
#define D_AT 0u
#define GROUPS_PER_WG 8u
#elif FORMAT == 114  // Q6_Kx8: superblock = 128 ql, 64 qh, 16 scales, d
#define BLOCK 210u
#define BODY_AT 0u
#define D_AT 208u
#define GROUPS_PER_WG 1u
#else
#error "repack: unknown FORMAT"
#endif
#define BODY (BLOCK - 2u)
#define GROUP_WORDS (2u * BLOCK)  // 8 blocks = 8 * BLOCK bytes = 2 * BLOCK words

layout(set = 0, binding = 0) buffer W { uint w[]; };

layout(push_constant) uniform Push {
  uint groups;       // groups in the tensor
  uint word_offset;  // word of the tensor's first byte in the binding
} pc;

shared uint staged[GROUPS_PER_WG * GROUP_WORDS];

uint staged_byte(uint i) { return (staged[i >> 2] >> ((i & 3u) * 8u)) & 0xFFu; }

void main() {
  uint g0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * GROUPS_PER_WG;
  if (g0 >= pc.groups) return;  // uniform
  uint n = min(GROUPS_PER_WG, pc.groups - g0) * GROUP_WORDS;
  uint base = pc.word_offset + g0 * GROUP_WORDS;
  for (uint i = gl_LocalInvocationID.x; i < n; i += gl_WorkGroupSize.x) staged[i] = w[base + i];
  barrier();
  for (uint i = gl_LocalInvocationID.x; i < n; i += gl_WorkGroupSize.x) {
    uint group_byte = (i / GROUP_WORDS) * GROUP_WORDS * 4u;
    uint word = 0u;
    for (uint b = 0u; b < 4u; ++b) {
      uint j = (i % GROUP_WORDS) * 4u + b;  // byte j of the group in the device format
      uint src = j < 8u * BODY ? (j / BODY) * BLOCK + BODY_AT + j % BODY
                               : ((j - 8u * BODY) / 2u) * BLOCK + D_AT + (j - 8u * BODY) % 2u;
      word |= staged_byte(group_byte + src) << (8u * b);
    }
    w[base + i] = word;
  }
}
