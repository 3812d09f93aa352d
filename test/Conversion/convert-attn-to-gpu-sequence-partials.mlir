// REQUIRES: nvvm-backend, rocdl-backend
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu="target=nvvm chip=sm_90a" | FileCheck %s --check-prefix=GPU
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_80" --convert-attn-to-gpu="target=nvvm chip=sm_80" | FileCheck %s --check-prefix=GPU
// RUN: attn-opt %s --attn-plan="target=rocdl chip=gfx942" --convert-attn-to-gpu="target=rocdl chip=gfx942" | FileCheck %s --check-prefix=GPU
// RUN: attn-opt %s --attn-plan --convert-attn-to-scf | FileCheck %s --check-prefix=CPU

// Partials by sequence (sequence_partials, max_query_len = 16): a mixed
// batch's split decode op stores its partials and statistics, and counts
// its arrivals, at row b * 16 + (tile's first query) + token; the fused
// merge reads them there and writes merged_out at the token's row
// (cu_seqlens_q[b] + the same offset).

// CPU-LABEL: func.func @unified_sequence_partials
// CPU: memref.load %arg5[%[[B:.*]]] : memref<?xi32>
// CPU: scf.if %{{.*}} {
// CPU-NEXT: %[[TILE:.*]] = arith.muli %{{.*}}, %c4 : index
// CPU-NEXT: %[[QROW:.*]] = arith.addi %{{.*}}, %[[TILE]] : index
// CPU: %[[BASE:.*]] = arith.muli %[[B]], %c16 : index
// CPU-NEXT: %[[PROW:.*]] = arith.addi %[[BASE]], %[[TILE]] : index
// CPU: %[[R:.*]] = arith.addi %[[PROW]], %{{.*}} : index
// CPU: memref.store %{{.*}}, %arg8[%[[R]], %{{.*}}, %{{.*}}] : memref<?x32x?xf32>
// CPU: memref.store %{{.*}}, %arg7[%[[R]], %{{.*}}, %{{.*}}, %{{.*}}] : memref<?x32x?x128xf32>
// CPU: memref.atomic_rmw addi %{{.*}}, %arg11[%[[PROW]], %{{.*}}]
// CPU: %[[MR:.*]] = arith.addi %[[PROW]], %{{.*}} : index
// CPU-NEXT: %[[OR:.*]] = arith.addi %[[QROW]], %{{.*}} : index
// CPU: memref.load %arg8[%[[MR]], %{{.*}}, %{{.*}}] : memref<?x32x?xf32>
// CPU: memref.store %{{.*}}, %arg10[%[[OR]], %{{.*}}, %{{.*}}] : memref<?x32x128xbf16>

// GPU-LABEL: gpu.func @unified_sequence_partials
// GPU: memref.load %arg5[%[[B:.*]]] : memref<?xi32>
// GPU: %[[TILE:.*]] = arith.muli %{{.*}}, %c16_{{[0-9]+}} : index
// GPU-NEXT: %[[QROW:.*]] = arith.addi %{{.*}}, %[[TILE]] : index
// GPU: %[[BASE:.*]] = arith.muli %[[B]], %c16_{{[0-9]+}} : index
// GPU-NEXT: %[[PROW:.*]] = arith.addi %[[BASE]], %[[TILE]] : index
// GPU: %[[R:.*]] = arith.addi %[[PROW]], %{{.*}} : index
// GPU: memref.store %{{.*}}, %arg8[%[[R]], %{{.*}}, %{{.*}}] : memref<?x32x?xf32>
// GPU: memref.atomic_rmw addi %{{.*}}, %arg11[%[[PROW]], %{{.*}}]
// GPU: memref.load %arg8[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x32x?xf32>
// GPU: memref.store %{{.*}}, %arg10[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x32x128xbf16>
func.func @unified_sequence_partials(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32,
    %o: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>, %mo: memref<?x32x128xbf16>, %c: memref<?x32xi32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)
      out(%o : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>)
      merged_out(%mo : memref<?x32x128xbf16>) merge_counters(%c : memref<?x32xi32>) {max_query_len = 16 : i64, sequence_partials}
  return
}
