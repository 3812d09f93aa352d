// RUN: attn-opt %s --attn-raise-sdpa | FileCheck %s

// attn-raise-sdpa on buffers: the linalg program on memrefs becomes one
// attn.flash on views of its arguments when every intermediate buffer is a
// local allocation that only the matched ops use, and nothing between the
// first matched op and P.V touches memory (docs/raising.md). B = 2, S = 4,
// Sk = 6, D = 8. The decomposed softmax on buffers is run end to end in
// test/Pipelines/attn-raise-sdpa-buffers-cpu.mlir.

func.func private @opaque()
func.func private @consume(memref<2x4x6xf32>)

// Q.K^T into a local buffer, linalg.softmax, P.V into the out argument:
// views of the arguments, offsets on the stack, nothing left of the linalg
// program or its buffers.
// CHECK-LABEL: func.func @buffers_softmax(
// CHECK-SAME: %[[Q:[^:]*]]: memref<2x4x8xf32>, %[[K:[^:]*]]: memref<2x6x8xf32>, %[[V:[^:]*]]: memref<2x6x8xf32>, %[[OUT:[^:]*]]: memref<2x4x8xf32>)
// CHECK-NOT: memref.alloc()
// CHECK: %[[QC:.*]] = memref.collapse_shape %[[Q]] {{\[\[}}0, 1], [2]] : memref<2x4x8xf32> into memref<8x8xf32>
// CHECK: %[[QV:.*]] = memref.expand_shape %[[QC]] {{\[\[}}0], [1, 2]] output_shape [8, 1, 8]
// CHECK: %[[CQ:.*]] = memref.alloca() : memref<3xi32>
// CHECK: %[[CK:.*]] = memref.alloca() : memref<3xi32>
// CHECK: %[[OC:.*]] = memref.collapse_shape %[[OUT]]
// CHECK: %[[OV:.*]] = memref.expand_shape %[[OC]]
// CHECK: attn.flash q(%[[QV]] : memref<8x1x8xf32>) k(%{{.*}} : memref<12x1x8xf32>) v(%{{.*}} : memref<12x1x8xf32>) cu_seqlens_q(%[[CQ]] : memref<3xi32>) cu_seqlens_k(%[[CK]] : memref<3xi32>) scale(%{{.*}}) out(%[[OV]] : memref<8x1x8xf32>){{$}}
// CHECK-NOT: linalg.
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @buffers_softmax(%q: memref<2x4x8xf32>, %k: memref<2x6x8xf32>, %v: memref<2x6x8xf32>, %out: memref<2x4x8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %s = memref.alloc() : memref<2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%s : memref<2x4x6xf32>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : memref<2x4x8xf32>, memref<2x6x8xf32>) outs(%s : memref<2x4x6xf32>)
  %p = memref.alloc() : memref<2x4x6xf32>
  linalg.softmax dimension(2) ins(%s : memref<2x4x6xf32>) outs(%p : memref<2x4x6xf32>)
  linalg.fill ins(%c0 : f32) outs(%out : memref<2x4x8xf32>)
  linalg.batch_matmul ins(%p, %v : memref<2x4x6xf32>, memref<2x6x8xf32>) outs(%out : memref<2x4x8xf32>)
  memref.dealloc %s : memref<2x4x6xf32>
  memref.dealloc %p : memref<2x4x6xf32>
  return
}

// The scores are also copied elsewhere: not raised.
// CHECK-LABEL: func.func @scores_read_twice(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @scores_read_twice(%q: memref<2x4x8xf32>, %k: memref<2x6x8xf32>, %v: memref<2x6x8xf32>, %out: memref<2x4x8xf32>, %keep: memref<2x4x6xf32>) {
  %c0 = arith.constant 0.0 : f32
  %s = memref.alloc() : memref<2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%s : memref<2x4x6xf32>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : memref<2x4x8xf32>, memref<2x6x8xf32>) outs(%s : memref<2x4x6xf32>)
  linalg.copy ins(%s : memref<2x4x6xf32>) outs(%keep : memref<2x4x6xf32>)
  %p = memref.alloc() : memref<2x4x6xf32>
  linalg.softmax dimension(2) ins(%s : memref<2x4x6xf32>) outs(%p : memref<2x4x6xf32>)
  linalg.fill ins(%c0 : f32) outs(%out : memref<2x4x8xf32>)
  linalg.batch_matmul ins(%p, %v : memref<2x4x6xf32>, memref<2x6x8xf32>) outs(%out : memref<2x4x8xf32>)
  memref.dealloc %s : memref<2x4x6xf32>
  memref.dealloc %p : memref<2x4x6xf32>
  return
}

// A store into Q between the two contractions: flash would read the new
// value; not raised.
// CHECK-LABEL: func.func @store_into_q_between(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @store_into_q_between(%q: memref<2x4x8xf32>, %k: memref<2x6x8xf32>, %v: memref<2x6x8xf32>, %out: memref<2x4x8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %i0 = arith.constant 0 : index
  %s = memref.alloc() : memref<2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%s : memref<2x4x6xf32>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : memref<2x4x8xf32>, memref<2x6x8xf32>) outs(%s : memref<2x4x6xf32>)
  memref.store %c0, %q[%i0, %i0, %i0] : memref<2x4x8xf32>
  %p = memref.alloc() : memref<2x4x6xf32>
  linalg.softmax dimension(2) ins(%s : memref<2x4x6xf32>) outs(%p : memref<2x4x6xf32>)
  linalg.fill ins(%c0 : f32) outs(%out : memref<2x4x8xf32>)
  linalg.batch_matmul ins(%p, %v : memref<2x4x6xf32>, memref<2x6x8xf32>) outs(%out : memref<2x4x8xf32>)
  memref.dealloc %s : memref<2x4x6xf32>
  memref.dealloc %p : memref<2x4x6xf32>
  return
}

// The scores live in an argument the caller can see: not raised.
// CHECK-LABEL: func.func @scores_in_argument(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @scores_in_argument(%q: memref<2x4x8xf32>, %k: memref<2x6x8xf32>, %v: memref<2x6x8xf32>, %out: memref<2x4x8xf32>, %s: memref<2x4x6xf32>) {
  %c0 = arith.constant 0.0 : f32
  linalg.fill ins(%c0 : f32) outs(%s : memref<2x4x6xf32>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : memref<2x4x8xf32>, memref<2x6x8xf32>) outs(%s : memref<2x4x6xf32>)
  %p = memref.alloc() : memref<2x4x6xf32>
  linalg.softmax dimension(2) ins(%s : memref<2x4x6xf32>) outs(%p : memref<2x4x6xf32>)
  linalg.fill ins(%c0 : f32) outs(%out : memref<2x4x8xf32>)
  linalg.batch_matmul ins(%p, %v : memref<2x4x6xf32>, memref<2x6x8xf32>) outs(%out : memref<2x4x8xf32>)
  memref.dealloc %p : memref<2x4x6xf32>
  return
}

// Out is Q itself: the fill would overwrite Q before Q.K^T reads it in
// flash's order; not raised.
// CHECK-LABEL: func.func @out_is_q(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @out_is_q(%q: memref<2x4x8xf32>, %k: memref<2x6x8xf32>, %v: memref<2x6x8xf32>, %out: memref<2x4x8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %s = memref.alloc() : memref<2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%s : memref<2x4x6xf32>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : memref<2x4x8xf32>, memref<2x6x8xf32>) outs(%s : memref<2x4x6xf32>)
  %p = memref.alloc() : memref<2x4x6xf32>
  linalg.softmax dimension(2) ins(%s : memref<2x4x6xf32>) outs(%p : memref<2x4x6xf32>)
  linalg.fill ins(%c0 : f32) outs(%q : memref<2x4x8xf32>)
  linalg.batch_matmul ins(%p, %v : memref<2x4x6xf32>, memref<2x6x8xf32>) outs(%q : memref<2x4x8xf32>)
  memref.dealloc %s : memref<2x4x6xf32>
  memref.dealloc %p : memref<2x4x6xf32>
  return
}

// An opaque call between the ops may touch any argument: not raised.
// CHECK-LABEL: func.func @call_between(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @call_between(%q: memref<2x4x8xf32>, %k: memref<2x6x8xf32>, %v: memref<2x6x8xf32>, %out: memref<2x4x8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %s = memref.alloc() : memref<2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%s : memref<2x4x6xf32>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : memref<2x4x8xf32>, memref<2x6x8xf32>) outs(%s : memref<2x4x6xf32>)
  func.call @opaque() : () -> ()
  %p = memref.alloc() : memref<2x4x6xf32>
  linalg.softmax dimension(2) ins(%s : memref<2x4x6xf32>) outs(%p : memref<2x4x6xf32>)
  linalg.fill ins(%c0 : f32) outs(%out : memref<2x4x8xf32>)
  linalg.batch_matmul ins(%p, %v : memref<2x4x6xf32>, memref<2x6x8xf32>) outs(%out : memref<2x4x8xf32>)
  memref.dealloc %s : memref<2x4x6xf32>
  memref.dealloc %p : memref<2x4x6xf32>
  return
}

// P is passed on after the product: not raised.
// CHECK-LABEL: func.func @probabilities_escape(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @probabilities_escape(%q: memref<2x4x8xf32>, %k: memref<2x6x8xf32>, %v: memref<2x6x8xf32>, %out: memref<2x4x8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %s = memref.alloc() : memref<2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%s : memref<2x4x6xf32>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : memref<2x4x8xf32>, memref<2x6x8xf32>) outs(%s : memref<2x4x6xf32>)
  %p = memref.alloc() : memref<2x4x6xf32>
  linalg.softmax dimension(2) ins(%s : memref<2x4x6xf32>) outs(%p : memref<2x4x6xf32>)
  linalg.fill ins(%c0 : f32) outs(%out : memref<2x4x8xf32>)
  linalg.batch_matmul ins(%p, %v : memref<2x4x6xf32>, memref<2x6x8xf32>) outs(%out : memref<2x4x8xf32>)
  func.call @consume(%p) : (memref<2x4x6xf32>) -> ()
  memref.dealloc %s : memref<2x4x6xf32>
  memref.dealloc %p : memref<2x4x6xf32>
  return
}

// Out is accumulated into, not zero-filled first: not raised.
// CHECK-LABEL: func.func @out_accumulates(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @out_accumulates(%q: memref<2x4x8xf32>, %k: memref<2x6x8xf32>, %v: memref<2x6x8xf32>, %out: memref<2x4x8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %s = memref.alloc() : memref<2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%s : memref<2x4x6xf32>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : memref<2x4x8xf32>, memref<2x6x8xf32>) outs(%s : memref<2x4x6xf32>)
  %p = memref.alloc() : memref<2x4x6xf32>
  linalg.softmax dimension(2) ins(%s : memref<2x4x6xf32>) outs(%p : memref<2x4x6xf32>)
  linalg.batch_matmul ins(%p, %v : memref<2x4x6xf32>, memref<2x6x8xf32>) outs(%out : memref<2x4x8xf32>)
  memref.dealloc %s : memref<2x4x6xf32>
  memref.dealloc %p : memref<2x4x6xf32>
  return
}

// [B, H, S, D] buffers, contractions as linalg.generic: per batch entry, a
// flash on [S, H, D] views of the arguments (subview, then transpose).
// CHECK-LABEL: func.func @heads_buffers_causal(
// CHECK-SAME: %[[Q:[^:]*]]: memref<2x2x4x8xf32>, %{{[^:]*}}: memref<2x2x6x8xf32>, %{{[^:]*}}: memref<2x2x6x8xf32>, %[[OUT:[^:]*]]: memref<2x2x4x8xf32>)
// CHECK-NOT: memref.alloc()
// CHECK: scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[QS:.*]] = memref.subview %[[Q]][%[[B]], 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1]
// CHECK: %[[QT:.*]] = memref.transpose %[[QS]] (d0, d1, d2) -> (d1, d0, d2)
// CHECK: %[[OS:.*]] = memref.subview %[[OUT]][%[[B]], 0, 0, 0]
// CHECK: %[[OT:.*]] = memref.transpose %[[OS]]
// CHECK: attn.flash q(%[[QT]] : memref<4x2x8xf32, strided<[8, 32, 1], offset: ?>>) {{.*}} out(%[[OT]] : {{.*}}) {causal}
// CHECK-NOT: linalg.
// CHECK: return
func.func @heads_buffers_causal(%q: memref<2x2x4x8xf32>, %k: memref<2x2x6x8xf32>, %v: memref<2x2x6x8xf32>, %out: memref<2x2x4x8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %s = memref.alloc() : memref<2x2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%s : memref<2x2x4x6xf32>)
  linalg.generic {indexing_maps = [affine_map<(b, h, m, n, r) -> (b, h, m, r)>, affine_map<(b, h, m, n, r) -> (b, h, n, r)>, affine_map<(b, h, m, n, r) -> (b, h, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : memref<2x2x4x8xf32>, memref<2x2x6x8xf32>) outs(%s : memref<2x2x4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %pr = arith.mulf %a, %b : f32
    %sum = arith.addf %acc, %pr : f32
    linalg.yield %sum : f32
  }
  %ninf = arith.constant 0xFF800000 : f32
  %sm = memref.alloc() : memref<2x2x4x6xf32>
  linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : memref<2x2x4x6xf32>) outs(%sm : memref<2x2x4x6xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %c2 = arith.constant 2 : index
    %lim = arith.addi %i, %c2 : index
    %hide = arith.cmpi sgt, %j, %lim : index
    %r = arith.select %hide, %ninf, %x : f32
    linalg.yield %r : f32
  }
  %p = memref.alloc() : memref<2x2x4x6xf32>
  linalg.softmax dimension(3) ins(%sm : memref<2x2x4x6xf32>) outs(%p : memref<2x2x4x6xf32>)
  linalg.fill ins(%c0 : f32) outs(%out : memref<2x2x4x8xf32>)
  linalg.generic {indexing_maps = [affine_map<(b, h, m, n, r) -> (b, h, m, r)>, affine_map<(b, h, m, n, r) -> (b, h, r, n)>, affine_map<(b, h, m, n, r) -> (b, h, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : memref<2x2x4x6xf32>, memref<2x2x6x8xf32>) outs(%out : memref<2x2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %pr = arith.mulf %a, %b : f32
    %sum = arith.addf %acc, %pr : f32
    linalg.yield %sum : f32
  }
  return
}
