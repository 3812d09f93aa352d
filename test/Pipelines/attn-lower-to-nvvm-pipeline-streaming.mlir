// REQUIRES: nvvm-backend
// REQUIRES: ptxas
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_90a" --attn-lower-to-nvvm-pipeline="chip=sm_90a format=isa" | %python %S/extract_gpu_binary.py > %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// The vLLM drop-in's short split-KV segments (attn.stream_pages, the fp8
// and 16-bit caches alike): every 16-byte copy of the kernel (Q, K and V)
// carries the one evict-first policy made at the entry, its shared address
// shuffled from the lane itself (ptxas then keeps it in one register; see
// attn-nvvm-streaming-copies); no plain cg copy is left.
// CHECK: .visible .entry stream(
// CHECK-NOT: .maxnreg
// CHECK: createpolicy.fractional.L2::evict_first.b64 [[POL:%rd[0-9]+]], 1.0;
// CHECK: activemask.b32
// CHECK-NEXT: mov.u32 {{.*}}, %laneid;
// CHECK-NEXT: shfl.sync.idx.b32
// CHECK-NEXT: cp.async.cg.shared.global.L2::cache_hint [{{.*}}], [{{.*}}], 16, {{.*}}, [[POL]];
// CHECK-NOT: cp.async.cg.shared.global [
// The fp8 programs read K raw and launch three an SM: their registers are
// capped for that (the fused merge's whole rounds would take more).
// CHECK: .visible .entry stream_fp8(
// CHECK: .maxntid 128, 1, 1
// CHECK-NEXT: .maxnreg 168
// CHECK: createpolicy.fractional.L2::evict_first.b64
// CHECK: cp.async.cg.shared.global.L2::cache_hint
// CHECK-NOT: cp.async.cg.shared.global [
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
func.func @stream(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>, %mo: memref<?x32x128xbf16>, %mc: memref<?x32xi32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>) merged_out(%mo : memref<?x32x128xbf16>) merge_counters(%mc : memref<?x32xi32>) {attn.stream_pages}
  return
}
func.func @stream_fp8(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %kd: memref<1xf32>, %vd: memref<1xf32>, %o: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>, %mo: memref<?x32x128xbf16>, %mc: memref<?x32xi32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%kd : memref<1xf32>) v_descale(%vd : memref<1xf32>) out(%o : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>) merged_out(%mo : memref<?x32x128xbf16>) merge_counters(%mc : memref<?x32xi32>) {attn.decode_rows, attn.stream_pages}
  return
}
