// REQUIRES: nvvm-backend
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_80" --convert-attn-to-gpu=chip=sm_80 | FileCheck %s

// NVVM programs store 16-bit outputs a pair per 4-byte store: the two
// adjacent columns a thread holds in each accumulator tile. A head of 24
// pads its MMA steps to 32 columns; only the pairs inside the head are
// stored (the first build also stored columns 24-31, into the next head):
// 4 row slots (two 16-row fragments per warp) x 3 tiles of 8 columns.
// CHECK-LABEL: gpu.func @head_24
// CHECK-COUNT-12: vector.store %{{.*}} {alignment = 4 : i64} : memref<?x4x24xbf16>, vector<2xbf16>
// CHECK-NOT: vector.store {{.*}} memref<?x4x24xbf16>
// CHECK-NOT: memref.store {{.*}} memref<?x4x24xbf16>
// CHECK: gpu.return
func.func @head_24(%q: memref<?x4x24xbf16>, %k: memref<?x4x24xbf16>, %v: memref<?x4x24xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x24xbf16>) {
  attn.flash q(%q : memref<?x4x24xbf16>) k(%k : memref<?x4x24xbf16>) v(%v : memref<?x4x24xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x4x24xbf16>)
  return
}

// -----

// A head dim that is not a multiple of 8 keeps the element stores (a pair
// would cross the end of the head).
// CHECK-LABEL: gpu.func @head_20
// CHECK-NOT: vector.store {{.*}} memref<?x4x20xbf16>
// CHECK: memref.store %{{.*}} : memref<?x4x20xbf16>
func.func @head_20(%q: memref<?x4x20xbf16>, %k: memref<?x4x20xbf16>, %v: memref<?x4x20xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x20xbf16>) {
  attn.flash q(%q : memref<?x4x20xbf16>) k(%k : memref<?x4x20xbf16>) v(%v : memref<?x4x20xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x4x20xbf16>)
  return
}
