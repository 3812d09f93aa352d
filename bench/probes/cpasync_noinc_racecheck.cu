// Minimal producer/consumer kernel (no attn-mlir code) in the shape of the
// gathering producer warpgroup (WarpSpecialized.cpp, setUpGather): does
// compute-sanitizer racecheck report hazards on shared memory that 128
// producer threads fill with cp.async and hand over with
// cp.async.mbarrier.arrive.noinc (barrier count 128), and that consumer
// warps read after mbarrier.try_wait, when the protocol is correct?
//   nvcc -arch=sm_90a -o cpasync_noinc_racecheck cpasync_noinc_racecheck.cu
//   ./cpasync_noinc_racecheck [16|0 [q]] && \
//     compute-sanitizer --tool racecheck ./cpasync_noinc_racecheck [16|0 [q]]
// Prints "ok" when the consumers read what the producers copied: two
// buffers refilled over several rounds, each released on an `empty`
// mbarrier (count: the 128 consumer threads).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

constexpr int kChunks = 1024; // 16-byte chunks per buffer (16 KB)
constexpr int kRounds = 6;

__device__ uint32_t smem(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ void wait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n.reg .pred p;\nWAIT_%=:\n"
               "mbarrier.try_wait.parity.shared.b64 p, [%0], %1;\n"
               "@!p bra WAIT_%=;\n}" ::"r"(bar),
               "r"(parity)
               : "memory");
}

__global__ void roundTrip(const int4 *src, int *sums, int srcSize,
                          int withQ) {
  __shared__ __align__(16) int4 buf[2][kChunks];
  __shared__ __align__(16) int4 qbuf[kChunks];
  __shared__ __align__(8) uint64_t full[2], empty[2], qfull;
  int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < 2; ++s) {
      asm volatile("mbarrier.init.shared.b64 [%0], 128;" ::"r"(smem(&full[s])));
      asm volatile("mbarrier.init.shared.b64 [%0], 128;" ::"r"(smem(&empty[s])));
    }
    asm volatile("mbarrier.init.shared.b64 [%0], 128;" ::"r"(smem(&qfull)));
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  if (tid >= 128) { // producers
    int p = tid - 128;
    if (withQ) {
      // A first buffer as attn-mlir's producer stages Q: copies, wait for
      // them, then a plain arrival.
      for (int c = p; c < kChunks; c += 128)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                         smem(&qbuf[c])),
                     "l"(src + c), "r"(c % 5 ? 16 : 0)
                     : "memory");
      asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::
                       : "memory");
      asm volatile("mbarrier.arrive.shared.b64 _, [%0];" ::"r"(smem(&qfull))
                   : "memory");
    }
    for (int r = 0; r < kRounds; ++r) {
      int s = r % 2;
      if (r >= 2)
        wait(smem(&empty[s]), ((r - 2) / 2) % 2);
      for (int c = p; c < kChunks; c += 128) {
        if (srcSize < 0)
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                           smem(&buf[s][c])),
                       "l"(src + r * kChunks + c)
                       : "memory");
        else // with a source size (the zero-filling form attn-mlir emits;
             // 0 for every third chunk when the argument is 0)
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                           smem(&buf[s][c])),
                       "l"(src + r * kChunks + c),
                       "r"(srcSize == 0 && c % 3 ? 16 : srcSize)
                       : "memory");
      }
      asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(
                       smem(&full[s]))
                   : "memory");
    }
    return;
  }
  int sum = 0; // consumers
  if (withQ) {
    wait(smem(&qfull), 0);
    for (int c = tid; c < kChunks; c += 128)
      sum += qbuf[c].x + qbuf[c].y + qbuf[c].z + qbuf[c].w;
  }
  for (int r = 0; r < kRounds; ++r) {
    int s = r % 2;
    wait(smem(&full[s]), (r / 2) % 2);
    for (int c = tid; c < kChunks; c += 128)
      sum += buf[s][c].x + buf[s][c].y + buf[s][c].z + buf[s][c].w;
    asm volatile("mbarrier.arrive.shared.b64 _, [%0];" ::"r"(smem(&empty[s]))
                 : "memory");
  }
  atomicAdd(sums, sum);
}

int main(int argc, char **argv) {
  // Arguments: the copies pass a source size (16: the same bytes; 0:
  // every third chunk zero-filled), and "q" adds a first buffer staged
  // as attn-mlir's gathering producer stages Q.
  int srcSize = argc > 1 ? atoi(argv[1]) : -1;
  int withQ = argc > 2;
  int n = kRounds * kChunks * 4;
  int *host = new int[n];
  long expect = 0;
  for (int i = 0; i < n; ++i) {
    host[i] = i % 7;
    int chunk = (i / 4) % kChunks;
    if (srcSize != 0 || chunk % 3)
      expect += host[i];
    if (withQ && i < 4 * kChunks && chunk % 5)
      expect += host[i];
  }
  int4 *src;
  int *sums;
  cudaMalloc(&src, n * sizeof(int));
  cudaMalloc(&sums, sizeof(int));
  cudaMemcpy(src, host, n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemset(sums, 0, sizeof(int));
  roundTrip<<<1, 256>>>(src, sums, srcSize, withQ);
  int got = 0;
  cudaMemcpy(&got, sums, sizeof(int), cudaMemcpyDeviceToHost);
  cudaError_t err = cudaGetLastError();
  printf("%s (sum %d, expected %ld, %s)\n", got == expect ? "ok" : "WRONG",
         got, expect, cudaGetErrorString(err));
  return got == expect ? 0 : 1;
}
