#version 450
// Probe: any compute shader (a GLSLC that fails this is broken, not merely old).
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Data { float data[]; };
void main() { data[gl_GlobalInvocationID.x] *= 2.0; }
