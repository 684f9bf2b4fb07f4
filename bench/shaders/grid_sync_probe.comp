#version 450
// grid_sync_probe (benchmarks only, never dispatched by the engine): what a level of dependent work costs
// inside one dispatch, against a barrier between dispatches. Each of `phases` phases adds 1 to one word per
// work group; with `sync` every work group then waits at a grid-wide barrier (a counter in device memory,
// zero before the dispatch) until all have arrived. Every work group must be resident at once (the caller
// keeps the grid within the device; lavapipe runs a few at a time, so never there). The wait gives up after
// a bounded number of polls and counts the give-up in `timeouts`, so a grid too large ends instead of hanging.
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) coherent buffer Sync { uint arrived; uint timeouts; };
layout(set = 0, binding = 1) coherent buffer Data { uint data[]; };
layout(push_constant) uniform Push {
  uint phases;
  uint sync;
} pc;

void main() {
  uint groups = gl_NumWorkGroups.x;
  for (uint p = 0u; p < pc.phases; ++p) {
    if (gl_LocalInvocationID.x == 0u) data[gl_WorkGroupID.x] += 1u;
    if (pc.sync == 0u) continue;
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationID.x == 0u) {
      atomicAdd(arrived, 1u);
      uint target = (p + 1u) * groups, polls = 0u;
      while (atomicAdd(arrived, 0u) < target && ++polls < (1u << 24)) {
      }
      if (polls == (1u << 24)) atomicAdd(timeouts, 1u);
    }
    barrier();
  }
}
