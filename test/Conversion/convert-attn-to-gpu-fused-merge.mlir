// REQUIRES: nvvm-backend, rocdl-backend
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu="target=nvvm chip=sm_90a" | FileCheck %s --check-prefixes=GPU,NVVM
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_80" --convert-attn-to-gpu="target=nvvm chip=sm_80" | FileCheck %s --check-prefixes=GPU,NVVM
// RUN: attn-opt %s --attn-plan="target=rocdl chip=gfx942" --convert-attn-to-gpu="target=rocdl chip=gfx942" | FileCheck %s --check-prefixes=GPU,ROCDL
// RUN: attn-opt %s --attn-plan --convert-attn-to-scf | FileCheck %s --check-prefix=CPU

// The fused merge of the split-KV form (merged_out, merge_counters): after
// a program's partial stores, a block barrier; thread 0 fences (acq_rel at
// device scope: fence.acq_rel.gpu on NVPTX, "agent" on AMDGPU), counts the program at merge_counters[first token,
// first head], resets the counter when it was the last of the S = out's
// dim 2 segments, fences again and broadcasts that through shared memory;
// after a second barrier the last program merges the tile's rows (one pass
// over the segments, sinks once) into merged_out. The kernel takes the two
// operands last.

// GPU-LABEL: gpu.func @unified_fused_merge
// GPU-SAME: %[[OUT:arg8]]: memref<?x32x?x128xf32>
// GPU-SAME: %[[MERGED:arg11]]: memref<?x32x128xbf16>, %[[COUNTERS:arg12]]: memref<?x32xi32>
// GPU: %[[S:.*]] = memref.dim %[[OUT]], %c2
// GPU: memref.store {{.*}}, %[[OUT]][{{.*}}] : memref<?x32x?x128xf32>
// GPU: gpu.barrier
// GPU-NEXT: %[[ZERO:.*]] = arith.constant 0 : index
// GPU-NEXT: %[[WORD:.*]] = memref.view %{{.*}}[%[[ZERO]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<1xi32, #gpu.address_space<workgroup>>
// GPU: scf.if
// NVVM-NEXT: llvm.fence syncscope("device") acq_rel
// ROCDL-NEXT: llvm.fence syncscope("agent") acq_rel
// GPU: %[[OLD:.*]] = memref.atomic_rmw addi %{{.*}}, %[[COUNTERS]][{{.*}}] : (i32, memref<?x32xi32>) -> i32
// GPU: %[[LAST:.*]] = arith.cmpi eq, %[[OLD]]
// GPU: scf.if %[[LAST]] {
// GPU-NEXT: %[[Z:.*]] = arith.constant 0 : i32
// GPU-NEXT: memref.store %[[Z]], %[[COUNTERS]]
// GPU-NEXT: }
// NVVM-NEXT: llvm.fence syncscope("device") acq_rel
// ROCDL-NEXT: llvm.fence syncscope("agent") acq_rel
// GPU: memref.store %{{.*}}, %[[WORD]]
// GPU: gpu.barrier
// GPU: %[[FLAG:.*]] = memref.load %[[WORD]]
// GPU: %[[MERGES:.*]] = arith.cmpi ne, %[[FLAG]]
// GPU: scf.if %[[MERGES]] {
// GPU: scf.for
// 16-bit programs read every round of 16 segments through one copy, its
// indices clamped to the last segment (ProgramTarget::wholeMergeRounds).
// GPU-NOT: scf.if {{.*}} -> (f32, f32, f32, f32, f32, f32)
// GPU: arith.minsi
// GPU: memref.load %arg9
// GPU: memref.load %arg10
// GPU: memref.load %[[OUT]]
// GPU: memref.load %arg7
// GPU: memref.store %{{.*}}, %[[MERGED]]

// CPU-LABEL: func.func @unified_fused_merge
// CPU: scf.parallel
// CPU: memref.atomic_rmw addi %{{.*}}, %arg12
// The CPU merge takes whole rounds: a round of 16 segments all there reads
// them at constant offsets from its first, unclamped; the last round of
// fewer clamps its copies past the end to the last segment.
// CPU: %[[ROUNDS:.*]]:6 = scf.for {{.*}} -> (f32, f32, f32, f32, f32, f32) {
// CPU: %[[WHOLE:.*]] = arith.cmpi sle
// CPU: scf.if %[[WHOLE]] -> (f32, f32, f32, f32, f32, f32) {
// CPU-NOT: arith.minsi
// CPU: } else {
// CPU: arith.minsi
// CPU: memref.store %{{.*}}, %arg11
func.func @unified_fused_merge(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %sk: memref<32xf32>, %o: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>, %mo: memref<?x32x128xbf16>, %c: memref<?x32xi32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) sinks(%sk : memref<32xf32>) out(%o : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>) merged_out(%mo : memref<?x32x128xbf16>) merge_counters(%c : memref<?x32xi32>)
  return
}

// With an lse operand the merge also stores each merged row's log-sum-exp
// (over every segment, sinks included), before its outputs; the segment
// programs store none.
// GPU-LABEL: gpu.func @unified_fused_merge_lse
// GPU-SAME: %[[LSE:arg11]]: memref<?x32xf32>, %[[MO:arg12]]: memref<?x32x128xbf16>
// GPU-NOT: memref.store %{{.*}}, %[[LSE]]
// GPU: memref.atomic_rmw addi
// GPU: memref.store %{{.*}}, %[[LSE]][{{.*}}] : memref<?x32xf32>
// GPU: memref.store %{{.*}}, %[[MO]]

// CPU-LABEL: func.func @unified_fused_merge_lse
// CPU: memref.atomic_rmw addi
// CPU: memref.store %{{.*}}, %arg11[{{.*}}] : memref<?x32xf32>
// CPU: memref.store %{{.*}}, %arg12
func.func @unified_fused_merge_lse(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %sk: memref<32xf32>, %o: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>, %lse: memref<?x32xf32>, %mo: memref<?x32x128xbf16>, %c: memref<?x32xi32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) sinks(%sk : memref<32xf32>) out(%o : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>) lse(%lse : memref<?x32xf32>) merged_out(%mo : memref<?x32x128xbf16>) merge_counters(%c : memref<?x32xi32>)
  return
}
