// REQUIRES: nvvm-backend
// REQUIRES: ptxas
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_90a" --attn-lower-to-nvvm-pipeline="chip=sm_90a format=isa" | %python %S/extract_gpu_binary.py > %t.90.ptx
// RUN: FileCheck %s < %t.90.ptx
// RUN: %ptxas -arch=sm_90a -v %t.90.ptx -o %t.90.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_80" --attn-lower-to-nvvm-pipeline="chip=sm_80 format=isa" | %python %S/extract_gpu_binary.py > %t.80.ptx
// RUN: FileCheck %s < %t.80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.80.ptx -o %t.80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// Softcap (c * tanh(scale * qk / c)) takes no division per element: the
// program divides scale by c once, and each score is one multiply, ex2,
// add, reciprocal (rcp.approx) and fma (LoopEmitter::scaledTanh). An
// IEEE division per element (two of them before: x / c and tanh's
// 2 / (t + 1)) is a dozen instructions and a branch to a subroutine.
// CHECK: .visible .entry softcap(
// CHECK: div.rn.f32
// CHECK-NOT: div.rn.f32
// CHECK: ex2.approx.ftz.f32
// CHECK-NEXT: add.{{.*}}f32
// CHECK-NEXT: rcp.approx.ftz.f32
// CHECK-NEXT: fma.rn.f32
// CHECK-NOT: div.rn.f32
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
func.func @softcap(%q: memref<?x16x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %cap: f32, %o: memref<?x16x128xbf16>) {
  attn.unified q(%q : memref<?x16x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) softcap(%cap) out(%o : memref<?x16x128xbf16>)
  return
}
