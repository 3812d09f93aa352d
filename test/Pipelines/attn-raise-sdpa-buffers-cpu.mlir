// End to end on buffers: the same linalg program on memrefs, raised
// (attn.flash on views of the arguments) and not, lowered through the CPU
// pipeline and run on the same pseudo-random inputs; the outputs must agree
// to f32 rounding. Softmax is written decomposed (max, sub, exp, sum, div),
// as bufferized programs carry it.
// REQUIRES: mlir-runner
// RUN: attn-opt %s --attn-raise-sdpa | FileCheck %s --check-prefix=RAISED
// RUN: attn-opt %s --convert-linalg-to-loops --attn-lower-to-cpu-pipeline \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils > %t.ref
// RUN: attn-opt %s --attn-raise-sdpa --convert-linalg-to-loops --attn-lower-to-cpu-pipeline \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils > %t.raised
// RUN: %python %S/Inputs/compare_printed_memrefs.py %t.ref %t.raised | FileCheck %s

// Both functions are raised, so the comparison is flash against linalg.
// RAISED-LABEL: func.func @sdpa_causal(
// RAISED-NOT: memref.alloc()
// RAISED: attn.flash {{.*}} {causal}
// RAISED-NOT: linalg.
// RAISED-LABEL: func.func @sdpa_bias(
// RAISED: attn.flash {{.*}} bias(%{{.*}} : memref<1x1x4x6xf32>)
// RAISED-NOT: linalg.batch_matmul
// RAISED-LABEL: func.func @fill3(
// RAISED-LABEL: func.func @main(

// CHECK: memref 0: 64 values agree
// CHECK: memref 1: 64 values agree
// CHECK: all 2 agree

#id = affine_map<(b, i, j) -> (b, i, j)>
#row = affine_map<(b, i, j) -> (b, i)>
#bias = affine_map<(b, i, j) -> (i, j)>

// scale, bottom-right causal (Sk - S = 2), softmax; B = 2, S = 4, Sk = 6.
func.func @sdpa_causal(%q: memref<2x4x8xf32>, %k: memref<2x6x8xf32>, %v: memref<2x6x8xf32>, %out: memref<2x4x8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.353553385 : f32
  %s = memref.alloc() : memref<2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%s : memref<2x4x6xf32>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : memref<2x4x8xf32>, memref<2x6x8xf32>) outs(%s : memref<2x4x6xf32>)
  %ss = memref.alloc() : memref<2x4x6xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : memref<2x4x6xf32>) outs(%ss : memref<2x4x6xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  }
  memref.dealloc %s : memref<2x4x6xf32>
  %x = memref.alloc() : memref<2x4x6xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ss : memref<2x4x6xf32>) outs(%x : memref<2x4x6xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %off = arith.constant 2 : index
    %lim = arith.addi %i, %off : index
    %hide = arith.cmpi sgt, %j, %lim : index
    %r = arith.select %hide, %ninf, %a : f32
    linalg.yield %r : f32
  }
  memref.dealloc %ss : memref<2x4x6xf32>
  %mx_p = memref.alloc() : memref<2x4xf32>
  linalg.fill ins(%ninf : f32) outs(%mx_p : memref<2x4xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x : memref<2x4x6xf32>) outs(%mx_p : memref<2x4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    linalg.yield %r : f32
  }
  %e_p = memref.alloc() : memref<2x4x6xf32>
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %mx_p : memref<2x4x6xf32>, memref<2x4xf32>) outs(%e_p : memref<2x4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  }
  %sum_p = memref.alloc() : memref<2x4xf32>
  linalg.fill ins(%c0 : f32) outs(%sum_p : memref<2x4xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e_p : memref<2x4x6xf32>) outs(%sum_p : memref<2x4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  }
  %p = memref.alloc() : memref<2x4x6xf32>
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e_p, %sum_p : memref<2x4x6xf32>, memref<2x4xf32>) outs(%p : memref<2x4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  }
  memref.dealloc %mx_p : memref<2x4xf32>
  memref.dealloc %e_p : memref<2x4x6xf32>
  memref.dealloc %sum_p : memref<2x4xf32>
  memref.dealloc %x : memref<2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%out : memref<2x4x8xf32>)
  linalg.batch_matmul ins(%p, %v : memref<2x4x6xf32>, memref<2x6x8xf32>) outs(%out : memref<2x4x8xf32>)
  memref.dealloc %p : memref<2x4x6xf32>
  return
}

// An additive [S, Sk] bias shared by the batch, no scale.
func.func @sdpa_bias(%q: memref<2x4x8xf32>, %k: memref<2x6x8xf32>, %v: memref<2x6x8xf32>, %bias: memref<4x6xf32>, %out: memref<2x4x8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %s = memref.alloc() : memref<2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%s : memref<2x4x6xf32>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : memref<2x4x8xf32>, memref<2x6x8xf32>) outs(%s : memref<2x4x6xf32>)
  %x = memref.alloc() : memref<2x4x6xf32>
  linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %bias : memref<2x4x6xf32>, memref<4x6xf32>) outs(%x : memref<2x4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  }
  memref.dealloc %s : memref<2x4x6xf32>
  %mx_p = memref.alloc() : memref<2x4xf32>
  linalg.fill ins(%ninf : f32) outs(%mx_p : memref<2x4xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x : memref<2x4x6xf32>) outs(%mx_p : memref<2x4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    linalg.yield %r : f32
  }
  %e_p = memref.alloc() : memref<2x4x6xf32>
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %mx_p : memref<2x4x6xf32>, memref<2x4xf32>) outs(%e_p : memref<2x4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  }
  %sum_p = memref.alloc() : memref<2x4xf32>
  linalg.fill ins(%c0 : f32) outs(%sum_p : memref<2x4xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e_p : memref<2x4x6xf32>) outs(%sum_p : memref<2x4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  }
  %p = memref.alloc() : memref<2x4x6xf32>
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e_p, %sum_p : memref<2x4x6xf32>, memref<2x4xf32>) outs(%p : memref<2x4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  }
  memref.dealloc %mx_p : memref<2x4xf32>
  memref.dealloc %e_p : memref<2x4x6xf32>
  memref.dealloc %sum_p : memref<2x4xf32>
  memref.dealloc %x : memref<2x4x6xf32>
  linalg.fill ins(%c0 : f32) outs(%out : memref<2x4x8xf32>)
  linalg.batch_matmul ins(%p, %v : memref<2x4x6xf32>, memref<2x6x8xf32>) outs(%out : memref<2x4x8xf32>)
  memref.dealloc %p : memref<2x4x6xf32>
  return
}

// Deterministic pseudo-random values in (-2, 2): sin of a scrambled index.
func.func @fill3(%t: memref<?x?x?xf32>, %seed: f32) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel"]} outs(%t : memref<?x?x?xf32>) {
  ^bb0(%o: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %c97 = arith.constant 97 : index
    %c13 = arith.constant 13 : index
    %x = arith.muli %a, %c97 : index
    %y = arith.muli %b, %c13 : index
    %s1 = arith.addi %x, %y : index
    %s2 = arith.addi %s1, %c : index
    %i = arith.index_cast %s2 : index to i64
    %f = arith.sitofp %i : i64 to f32
    %g = arith.mulf %f, %seed : f32
    %h = math.sin %g : f32
    %two = arith.constant 2.0 : f32
    %r = arith.mulf %h, %two : f32
    linalg.yield %r : f32
  }
  return
}

func.func private @printMemrefF32(memref<*xf32>)

func.func @main() {
  %s1 = arith.constant 0.731 : f32
  %s2 = arith.constant 1.313 : f32
  %s3 = arith.constant 2.177 : f32
  %s4 = arith.constant 0.419 : f32
  %poison = arith.constant 1.0e+30 : f32
  %q = memref.alloc() : memref<2x4x8xf32>
  %k = memref.alloc() : memref<2x6x8xf32>
  %v = memref.alloc() : memref<2x6x8xf32>
  %b3 = memref.alloc() : memref<1x4x6xf32>
  %dq = memref.cast %q : memref<2x4x8xf32> to memref<?x?x?xf32>
  %dk = memref.cast %k : memref<2x6x8xf32> to memref<?x?x?xf32>
  %dv = memref.cast %v : memref<2x6x8xf32> to memref<?x?x?xf32>
  %db = memref.cast %b3 : memref<1x4x6xf32> to memref<?x?x?xf32>
  func.call @fill3(%dq, %s1) : (memref<?x?x?xf32>, f32) -> ()
  func.call @fill3(%dk, %s2) : (memref<?x?x?xf32>, f32) -> ()
  func.call @fill3(%dv, %s3) : (memref<?x?x?xf32>, f32) -> ()
  func.call @fill3(%db, %s4) : (memref<?x?x?xf32>, f32) -> ()
  %bias = memref.collapse_shape %b3 [[0, 1], [2]] : memref<1x4x6xf32> into memref<4x6xf32>
  // Outputs poisoned first: every element must be written.
  %o1 = memref.alloc() : memref<2x4x8xf32>
  linalg.fill ins(%poison : f32) outs(%o1 : memref<2x4x8xf32>)
  func.call @sdpa_causal(%q, %k, %v, %o1) : (memref<2x4x8xf32>, memref<2x6x8xf32>, memref<2x6x8xf32>, memref<2x4x8xf32>) -> ()
  %u1 = memref.cast %o1 : memref<2x4x8xf32> to memref<*xf32>
  func.call @printMemrefF32(%u1) : (memref<*xf32>) -> ()
  %o2 = memref.alloc() : memref<2x4x8xf32>
  linalg.fill ins(%poison : f32) outs(%o2 : memref<2x4x8xf32>)
  func.call @sdpa_bias(%q, %k, %v, %bias, %o2) : (memref<2x4x8xf32>, memref<2x6x8xf32>, memref<2x6x8xf32>, memref<4x6xf32>, memref<2x4x8xf32>) -> ()
  %u2 = memref.cast %o2 : memref<2x4x8xf32> to memref<*xf32>
  func.call @printMemrefF32(%u2) : (memref<*xf32>) -> ()
  return
}
