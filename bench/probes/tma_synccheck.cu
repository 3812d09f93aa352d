// Minimal bulk-copy + mbarrier kernels (no attn-mlir code): does
// compute-sanitizer synccheck run kernels whose shared memory is written
// by the bulk copy engine (cp.async.bulk ... mbarrier::complete_tx), plain
// and through a tensor map passed as a __grid_constant__ parameter?
//   nvcc -arch=sm_90a -o tma_synccheck tma_synccheck.cu -lcuda
//   ./tma_synccheck && compute-sanitizer --tool synccheck ./tma_synccheck
#include <cstdio>
#include <cstdint>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void bulkCopy(const float *src, float *dst, int n) {
  extern __shared__ __align__(128) float tile[];
  __shared__ __align__(8) uint64_t bar;
  uint32_t barAddr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  uint32_t tileAddr = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  uint32_t bytes = n * sizeof(float);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(barAddr));
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(barAddr), "r"(bytes));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(tileAddr), "l"(src + blockIdx.x * n), "r"(bytes), "r"(barAddr) : "memory");
  }
  asm volatile("{\n.reg .pred p;\nWAIT:\n"
               "mbarrier.try_wait.parity.shared.b64 p, [%0], 0;\n"
               "@!p bra WAIT;\n}" ::"r"(barAddr) : "memory");
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    dst[blockIdx.x * n + i] = tile[i] * 2.0f;
}

// The same through a 2-D tensor map: rows of 64 floats, boxes of [32 x 64].
__global__ void tensorCopy(const __grid_constant__ CUtensorMap map, float *dst,
                           uint32_t hint) {
  extern __shared__ __align__(1024) float tile[];
  __shared__ __align__(8) uint64_t bar;
  uint32_t barAddr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  uint32_t tileAddr = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(barAddr));
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(barAddr), "r"(32 * 64 * 4));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(tileAddr), "l"(&map), "r"(0), "r"(int(blockIdx.x * 32)), "r"(barAddr) : "memory");
  }
  // With a suspend-time hint, as MLIR's nvgpu.mbarrier.try_wait.parity
  // lowers it (attn-mlir's kernels).
  asm volatile("{\n.reg .pred p;\nWAIT2:\n"
               "mbarrier.try_wait.parity.shared.b64 p, [%0], 0, %1;\n"
               "@!p bra WAIT2;\n}" ::"r"(barAddr), "r"(hint) : "memory");
  for (int i = threadIdx.x; i < 32 * 64; i += blockDim.x)
    dst[blockIdx.x * 32 * 64 + i] = tile[i] * 2.0f;
}

int main() {
  const int n = 4096, blocks = 8;
  float *src, *dst;
  cudaMallocManaged(&src, blocks * n * sizeof(float));
  cudaMallocManaged(&dst, blocks * n * sizeof(float));
  for (int i = 0; i < blocks * n; ++i) { src[i] = i; dst[i] = -1; }
  bulkCopy<<<blocks, 128, n * sizeof(float)>>>(src, dst, n);
  cudaError_t err = cudaDeviceSynchronize();
  int bad = 0;
  for (int i = 0; err == cudaSuccess && i < blocks * n; ++i)
    bad += dst[i] != 2.0f * i;
  printf("bulk copy: %s, %d wrong of %d\n", cudaGetErrorString(err), bad, blocks * n);
  if (err != cudaSuccess || bad)
    return 1;
  // 256 rows of 64 floats; 8 blocks of 32 rows.
  for (int i = 0; i < blocks * n; ++i) dst[i] = -1;
  CUtensorMap map;
  cuuint64_t dims[2] = {64, 256}, strides[1] = {64 * sizeof(float)};
  cuuint32_t box[2] = {64, 32}, elementStrides[2] = {1, 1};
  CUresult rc = cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, src, dims, strides, box,
      elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
      CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  int failed = 0;
  for (uint32_t hint : {0u, 10000000u}) {
    for (int i = 0; i < blocks * n; ++i) dst[i] = -1;
    tensorCopy<<<8, 128, 32 * 64 * sizeof(float)>>>(map, dst, hint);
    err = cudaDeviceSynchronize();
    bad = 0;
    for (int i = 0; err == cudaSuccess && i < 8 * 32 * 64; ++i)
      bad += dst[i] != 2.0f * i;
    printf("tensor copy, try_wait hint %u: encode %d, %s, %d wrong of %d\n",
           hint, int(rc), cudaGetErrorString(err), bad, 8 * 32 * 64);
    failed += err != cudaSuccess || bad;
  }
  return failed;
}
