// REQUIRES: nvvm-backend
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu=chip=sm_90a | FileCheck %s

// A mixed batch over an fp8 cache as ops.unified emits it: a decode op
// (max_query_len: its sequences of at most 4 queries) and a prefill op
// (min_query_len), each planned for its rows, launched one after the other
// over the same operands.
// The decode kernel's record: V decoded into the K tile's place (QK reads
// K raw), 63,744 bytes (three blocks an SM), and the two-an-SM footprint
// for grids of fewer than 4 programs an SM.
// CHECK: \22name\22:\22mixed_fp8\22,\22op\22:\22attn.unified\22,
// CHECK-SAME: \22shared_bytes\22:63744,\22small_grid\22:{\22programs_per_sm\22:4,\22shared_bytes\22:81152},\22threads\22:128
// The decode op: one program per (sequence, KV head) (4 queries fit one
// 16-row slab of GQA 4: a grid of batch = dim(cu_seqlens_q) - 1 tiles, no
// per-token term), four warps splitting the keys.
// CHECK: func.func @mixed_fp8
// CHECK: %[[NCU:.*]] = memref.dim %arg4, %c0
// CHECK: %[[B:.*]] = arith.addi %c-1, %[[NCU]]
// CHECK: gpu.launch_func @attn_kernels::@mixed_fp8 blocks in (%[[B]], %c8, %c1) threads in (%c128,
// The prefill op: floor(tokens / 32) + batch tiles of 32 queries x 4 heads
// on the producer/consumer pipeline (384 threads, tensor maps first).
// CHECK: memref.dim %arg0, %c0
// CHECK: arith.divui %{{.*}}, %c32
// CHECK: gpu.launch_func @attn_kernels::@mixed_fp8_0 blocks in ({{.*}}) threads in (%c384,
// CHECK-SAME: args(%{{.*}} : !llvm.ptr,
// Each kernel skips the sequences of the other: the decode kernel those of
// more than 4 queries, the prefill kernel those of fewer than 5.
// CHECK: gpu.func @mixed_fp8(
// CHECK: arith.cmpi ule, %{{.*}}, %c4
// CHECK: gpu.func @mixed_fp8_0(
// CHECK: arith.cmpi uge, %{{.*}}, %c5
func.func @mixed_fp8(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %kd: memref<1xf32>, %vd: memref<1xf32>,
    %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)
      k_descale(%kd : memref<1xf32>) v_descale(%vd : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
      {attn.decode_rows, max_query_len = 4 : i64}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)
      k_descale(%kd : memref<1xf32>) v_descale(%vd : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
      {attn.prefill_rows, min_query_len = 5 : i64}
  return
}
