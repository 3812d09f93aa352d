// Which forms of cp.async with an L2 cache hint run on sm_90a? One kernel
// per form; one process per form (a fault ends the context):
//   nvcc -arch=sm_90a -o t cpasync_hint_fault.cu
//   for m in $(seq 0 14); do ./t $m; done; cuobjdump -sass t | grep LDGSTS
// With CUDA 13.0, the forms where ptxas splits the shared address into a
// register and a uniform offset ([R + UR0]) put the policy's memory
// descriptor in an odd uniform pair (desc[UR1]) and fault with "an illegal
// instruction" (3, 7, 14); the address through a shuffle of the active
// lanes stays one register and runs (11-13). attn-nvvm-streaming-copies
// emits that form (bench/results/2026-12-01-h200-cpasync-hint-fault.log).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
__device__ __forceinline__ uint64_t policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
#define PRE                                                                  \
  __shared__ __align__(128) int4 buf[256];                                   \
  unsigned s = (unsigned)__cvta_generic_to_shared(&buf[threadIdx.x]);        \
  const int4 *g = src + blockIdx.x * 128 + threadIdx.x;
#define POST                                                                 \
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory"); \
  __syncthreads();                                                           \
  dst[blockIdx.x * 128 + threadIdx.x] = buf[threadIdx.x];
__global__ void m0(const int4 *src, int4 *dst) { PRE
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g));
  POST }
__global__ void m1(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "l"(p));
  POST }
__global__ void m2(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, 16, %2;" ::"r"(s), "l"(g), "l"(p));
  POST }
__global__ void m3(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  unsigned n = (threadIdx.x & 1) ? 0 : 16;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(s), "l"(g), "r"(n), "l"(p));
  POST }
__global__ void m4(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  uint64_t s64 = s;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"l"(s64), "l"(g), "l"(p));
  POST }
__global__ void m5(const int4 *src, int4 *dst) { PRE
  uint64_t p = 0x12F0000000000000ull;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "l"(p));
  POST }
__global__ void m6(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  if (threadIdx.x & 1)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "l"(p));
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g));
  POST }
__global__ void m7(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  // a hinted whole copy and a plain zero-filling one in one kernel
  unsigned n = (threadIdx.x & 1) ? 0 : 16;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "l"(p));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s + 2048), "l"(g), "r"(n));
  POST }
__global__ void m8(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  // predicated (@p) hinted copy
  asm volatile("{\n.reg .pred q;\nsetp.ne.u32 q, %3, 0;\n@q cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n}" ::"r"(s), "l"(g), "l"(p), "r"(threadIdx.x & 1));
  POST }
__global__ void m9(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  // ca (L1) form
  asm volatile("cp.async.ca.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "l"(p));
  POST }
__global__ void m10(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  // a hinted whole copy whose shared address comes from a 64-bit value
  // truncated (as our PTX: mov.b64 of the dynamic shared symbol)
  asm volatile("{\n.reg .b64 a;\n.reg .b32 b;\nmov.b64 a, %0;\ncvt.u32.u64 b, a;\ncp.async.cg.shared.global.L2::cache_hint [b], [%1], 16, %2;\n}" ::"l"((uint64_t)s), "l"(g), "l"(p));
  POST }
__device__ __forceinline__ unsigned opaque(unsigned a) {
  unsigned r;
  asm volatile("{\n.reg .b32 l;\nmov.u32 l, %%laneid;\nshfl.sync.idx.b32 %0, %1, l, 0x1f, -1;\n}" : "=r"(r) : "r"(a));
  return r;
}
__global__ void m11(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  // m7 with the hinted copy's shared address through a shuffle
  unsigned n = (threadIdx.x & 1) ? 0 : 16;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(opaque(s)), "l"(g), "l"(p));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s + 2048), "l"(g), "r"(n));
  POST }
__global__ void m12(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  // m3 (hinted, register src-size) with the address through a shuffle
  unsigned n = (threadIdx.x & 1) ? 0 : 16;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(opaque(s)), "l"(g), "r"(n), "l"(p));
  POST }
__global__ void m13(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  // many hinted zero-filling copies at offsets of one base (the decode's
  // pattern: base + per-thread offset + constant), addresses shuffled
  unsigned n = (threadIdx.x & 1) ? 0 : 16;
  for (int i = 0; i < 2; ++i)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(opaque(s + i * 2048)), "l"(g), "r"(n), "l"(p));
  POST }
__global__ void m14(const int4 *src, int4 *dst) { PRE uint64_t p = policy();
  // the same without the shuffle
  unsigned n = (threadIdx.x & 1) ? 0 : 16;
  for (int i = 0; i < 2; ++i)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(s + i * 2048), "l"(g), "r"(n), "l"(p));
  POST }
typedef void (*K)(const int4 *, int4 *);
int main(int argc, char **argv) {
  K ks[] = {m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14};
  int m = atoi(argv[1]);
  int4 *a, *b;
  cudaMalloc(&a, 1 << 20); cudaMalloc(&b, 1 << 20);
  cudaMemset(a, 1, 1 << 20); cudaMemset(b, 0, 1 << 20);
  ks[m]<<<64, 128>>>(a, b);
  cudaError_t e = cudaDeviceSynchronize();
  int4 h[4]; cudaMemcpy(h, b, sizeof h, cudaMemcpyDeviceToHost);
  printf("mode %d: %s (dst[0].x = %#x)\n", m, cudaGetErrorString(e), h[0].x);
  return e != 0;
}
