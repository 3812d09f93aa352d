// REQUIRES: nvvm-backend
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu=chip=sm_90a | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_80" --convert-attn-to-gpu=chip=sm_80 | FileCheck %s --check-prefix=AMPERE

// Warpgroup programs (sm_90a) mask causal and windowed tiles by intervals:
// per row, the count of visible columns and the offset of the thread's
// first column from the first visible one, in 32 bits
// (AttentionMath::visibleColumns); per element, one add of a constant and
// one unsigned compare. mma.sync programs (sm_80), whose threads hold more
// rows, keep the 64-bit position compares of visible().
// CHECK-LABEL: gpu.func @causal
// CHECK: %[[OFFSET:.*]] = arith.subi %{{.*}}, %{{.*}} : i32
// CHECK: %[[C0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[REL:.*]] = arith.addi %[[OFFSET]], %[[C0]] : i32
// CHECK-NEXT: %[[OK:.*]] = arith.cmpi ult, %[[REL]], %{{.*}} : i32
// CHECK-NEXT: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT: arith.select %[[OK]], %{{.*}}, %[[NEGINF]] : f32
// AMPERE-LABEL: gpu.func @causal
// AMPERE-NOT: arith.cmpi ult
// AMPERE: gpu.return
func.func @causal(%q: memref<?x4x64xbf16>, %k: memref<?x4x64xbf16>, %v: memref<?x4x64xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x64xbf16>) {
  attn.flash q(%q : memref<?x4x64xbf16>) k(%k : memref<?x4x64xbf16>) v(%v : memref<?x4x64xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x4x64xbf16>) {causal}
  return
}

// -----

// ALiBi's distances are i32s converted to f32 on every NVVM program: on
// sm_90a the row's distance to the thread's first key plus a constant, on
// sm_80 the key minus the row's reference. 64-bit subtractions and
// conversions per element made windowed and ALiBi prefix kernels of vLLM's
// grid spill (test/Pipelines/vllm_grid_kernels.mlir), sm_80's GQA-64 ALiBi
// one 104 bytes.
// CHECK-LABEL: gpu.func @window_alibi
// CHECK-NOT: arith.sitofp %{{.*}} : i64 to f32
// CHECK: arith.sitofp %{{.*}} : i32 to f32
// CHECK-NOT: arith.sitofp %{{.*}} : i64 to f32
// CHECK: arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK-NOT: arith.sitofp %{{.*}} : i64 to f32
// CHECK: gpu.return
// AMPERE-LABEL: gpu.func @window_alibi
// AMPERE-NOT: arith.sitofp %{{.*}} : i64 to f32
// AMPERE: arith.sitofp %{{.*}} : i32 to f32
// AMPERE-NOT: arith.sitofp %{{.*}} : i64 to f32
// AMPERE-NOT: arith.cmpi ult
// AMPERE: gpu.return
func.func @window_alibi(%q: memref<?x8x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>, %k_cache: memref<?x2x8x16x8xbf16>, %v_cache: memref<?x2x64x16xbf16>, %block_table: memref<?x?xi32>, %query_start: memref<?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %alibi_slopes: memref<8xf32>, %out: memref<?x8x64xbf16>) {
  attn.prefix_prefill q(%q : memref<?x8x64xbf16>) k(%k : memref<?x2x64xbf16>) v(%v : memref<?x2x64xbf16>) k_cache(%k_cache : memref<?x2x8x16x8xbf16>) v_cache(%v_cache : memref<?x2x64x16xbf16>) block_table(%block_table : memref<?x?xi32>) query_start(%query_start : memref<?xi32>) seq_lens(%seq_lens : memref<?xi32>) scale(%scale) alibi_slopes(%alibi_slopes : memref<8xf32>) out(%out : memref<?x8x64xbf16>) {sliding_window = 256 : i64}
  return
}

// -----

// A bias is no interval (its masked elements branch around the bias
// load): the per-element compare stays.
// CHECK-LABEL: gpu.func @bias
// CHECK-NOT: arith.cmpi ult
// CHECK: gpu.return
func.func @bias(%q: memref<?x4x64xbf16>, %k: memref<?x4x64xbf16>, %v: memref<?x4x64xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %bias: memref<1x4x?x?xf32>, %o: memref<?x4x64xbf16>) {
  attn.flash q(%q : memref<?x4x64xbf16>) k(%k : memref<?x4x64xbf16>) v(%v : memref<?x4x64xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) bias(%bias : memref<1x4x?x?xf32>) out(%o : memref<?x4x64xbf16>) {causal}
  return
}

// -----

// Non-causal tiles are masked by their end alone: one bound for every row,
// compared as before (intervals cost registers there).
// CHECK-LABEL: gpu.func @full
// CHECK-NOT: arith.cmpi ult
// CHECK: gpu.return
func.func @full(%q: memref<?x4x64xbf16>, %k: memref<?x4x64xbf16>, %v: memref<?x4x64xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x64xbf16>) {
  attn.flash q(%q : memref<?x4x64xbf16>) k(%k : memref<?x4x64xbf16>) v(%v : memref<?x4x64xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x4x64xbf16>)
  return
}
