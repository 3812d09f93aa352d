// End to end: the same linalg program, raised (attn.flash) and not, lowered
// through the CPU pipeline and run on the same pseudo-random inputs; the
// outputs must agree to f32 rounding. The transform library decomposes
// linalg.softmax, which only the program that is not raised still has.
// REQUIRES: mlir-runner
// RUN: attn-opt %s --attn-raise-sdpa | FileCheck %s --check-prefix=RAISED
// RUN: attn-opt %s --transform-preload-library=transform-library-paths=%S/Inputs/decompose-softmax.mlir --transform-interpreter --one-shot-bufferize=bufferize-function-boundaries --convert-linalg-to-loops --attn-lower-to-cpu-pipeline \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils > %t.ref
// RUN: attn-opt %s --attn-raise-sdpa --one-shot-bufferize=bufferize-function-boundaries --convert-linalg-to-loops --attn-lower-to-cpu-pipeline \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils > %t.raised
// RUN: %python %S/Inputs/compare_printed_memrefs.py %t.ref %t.raised | FileCheck %s

// Both functions are raised, so the comparison is flash against linalg.
// RAISED-LABEL: func.func @sdpa_causal(
// RAISED: attn.flash {{.*}} {causal}
// RAISED-LABEL: func.func @sdpa_bias(
// RAISED: attn.flash {{.*}} bias(%{{.*}} : memref<1x1x4x6xf32>)
// RAISED-LABEL: func.func @sdpa_heads(
// RAISED: scf.for
// RAISED: attn.flash {{.*}} bias(%{{.*}} : memref<1x2x4x6xf32>) out(%{{.*}} : memref<4x2x8xf32, strided<[8, 32, 1], offset: ?>>) {causal}
// RAISED-LABEL: func.func @sdpa_gqa(
// RAISED: attn.flash q(%{{.*}} : memref<4x4x8xf32, {{.*}}>) k(%{{.*}} : memref<6x2x8xf32, {{.*}}>) v(%{{.*}} : memref<6x2x8xf32, {{.*}}>)
// RAISED-LABEL: func.func @main(

// CHECK: memref 0: 64 values agree
// CHECK: memref 1: 64 values agree
// CHECK: memref 2: 128 values agree
// CHECK: memref 3: 256 values agree
// CHECK: all 4 agree

#id = affine_map<(b, i, j) -> (b, i, j)>

func.func @sdpa_causal(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : tensor<2x4x8xf32>, tensor<2x6x8xf32>) outs(%z : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %c = arith.constant 0.353553385 : f32
  %ss = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.mulf %x, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x4x6xf32>
  %fill = arith.constant 0xFF800000 : f32
  %msk = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ss : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %off = arith.constant 2 : index
    %lim = arith.addi %i, %off : index
    %hide = arith.cmpi ugt, %j, %lim : index
    %r = arith.select %hide, %fill, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4x6xf32>
  %p = linalg.softmax dimension(2) ins(%msk : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %eo = tensor.empty() : tensor<2x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.batch_matmul ins(%p, %v : tensor<2x4x6xf32>, tensor<2x6x8xf32>) outs(%zo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

func.func @sdpa_bias(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>, %bias: tensor<4x6xf32>) -> tensor<2x4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %et = tensor.empty() : tensor<2x8x6xf32>
  %kt = linalg.transpose ins(%k : tensor<2x6x8xf32>) outs(%et : tensor<2x8x6xf32>) permutation = [0, 2, 1]
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32>) outs(%z : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %c = arith.constant 2.82842708 : f32
  %ss = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.divf %x, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x4x6xf32>
  %bs = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ss, %bias : tensor<2x4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<2x4x6xf32>
  %er = tensor.empty() : tensor<2x4xf32>
  %minit = arith.constant 0xFFC00000 : f32
  %mi = linalg.fill ins(%minit : f32) outs(%er : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%bs : tensor<2x4x6xf32>) outs(%mi : tensor<2x4xf32>) {
  ^bb0(%x: f32, %a: f32):
    %r = arith.maxnumf %x, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%bs, %mx : tensor<2x4x6xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %d = arith.subf %x, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<2x4x6xf32>
  %z0 = linalg.fill ins(%c0 : f32) outs(%er : tensor<2x4xf32>) -> tensor<2x4xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%ex : tensor<2x4x6xf32>) outs(%z0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %a: f32):
    %r = arith.addf %x, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ex, %sm : tensor<2x4x6xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %r = arith.divf %x, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x6xf32>
  %eo = tensor.empty() : tensor<2x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.batch_matmul ins(%p, %v : tensor<2x4x6xf32>, tensor<2x6x8xf32>) outs(%zo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

// [B, H, S, D] = [2, 2, 4, 8], Sk = 6: contractions as linalg.generic over
// five loops, a per-head bias shared by the batch, causal, softmax over the
// last dim.
func.func @sdpa_heads(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x6x8xf32>, %v: tensor<2x2x6x8xf32>, %bias: tensor<2x4x6xf32>) -> tensor<2x2x4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x2x4x6xf32>) -> tensor<2x2x4x6xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, h, m, n, r) -> (b, h, m, r)>, affine_map<(b, h, m, n, r) -> (b, h, n, r)>, affine_map<(b, h, m, n, r) -> (b, h, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x2x4x8xf32>, tensor<2x2x6x8xf32>) outs(%z : tensor<2x2x4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %pr = arith.mulf %a, %b : f32
    %sum = arith.addf %acc, %pr : f32
    linalg.yield %sum : f32
  } -> tensor<2x2x4x6xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %bias : tensor<2x2x4x6xf32>, tensor<2x4x6xf32>) outs(%e : tensor<2x2x4x6xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<2x2x4x6xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %sm = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sb : tensor<2x2x4x6xf32>) outs(%e : tensor<2x2x4x6xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %c2 = arith.constant 2 : index
    %lim = arith.addi %i, %c2 : index
    %hide = arith.cmpi sgt, %j, %lim : index
    %r = arith.select %hide, %ninf, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x4x6xf32>
  %p = linalg.softmax dimension(3) ins(%sm : tensor<2x2x4x6xf32>) outs(%e : tensor<2x2x4x6xf32>) -> tensor<2x2x4x6xf32>
  %eo = tensor.empty() : tensor<2x2x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(b, h, m, n, r) -> (b, h, m, r)>, affine_map<(b, h, m, n, r) -> (b, h, r, n)>, affine_map<(b, h, m, n, r) -> (b, h, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x2x4x6xf32>, tensor<2x2x6x8xf32>) outs(%zo : tensor<2x2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %pr = arith.mulf %a, %b : f32
    %sum = arith.addf %acc, %pr : f32
    linalg.yield %sum : f32
  } -> tensor<2x2x4x8xf32>
  return %out : tensor<2x2x4x8xf32>
}

// GQA as repeat_interleave of K/V heads (linalg.broadcast after the head
// dim, collapsed): 4 query heads over 2 KV heads.
func.func @sdpa_gqa(%q: tensor<2x4x4x8xf32>, %kh: tensor<2x2x6x8xf32>, %vh: tensor<2x2x6x8xf32>, %bias: tensor<4x4x6xf32>) -> tensor<2x4x4x8xf32> {
  %ek = tensor.empty() : tensor<2x2x2x6x8xf32>
  %kb = linalg.broadcast ins(%kh : tensor<2x2x6x8xf32>) outs(%ek : tensor<2x2x2x6x8xf32>) dimensions = [2]
  %k = tensor.collapse_shape %kb [[0], [1, 2], [3], [4]] : tensor<2x2x2x6x8xf32> into tensor<2x4x6x8xf32>
  %vb = linalg.broadcast ins(%vh : tensor<2x2x6x8xf32>) outs(%ek : tensor<2x2x2x6x8xf32>) dimensions = [2]
  %v = tensor.collapse_shape %vb [[0], [1, 2], [3], [4]] : tensor<2x2x2x6x8xf32> into tensor<2x4x6x8xf32>
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x4x4x6xf32>) -> tensor<2x4x4x6xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, h, m, n, r) -> (b, h, m, r)>, affine_map<(b, h, m, n, r) -> (b, h, n, r)>, affine_map<(b, h, m, n, r) -> (b, h, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x4x4x8xf32>, tensor<2x4x6x8xf32>) outs(%z : tensor<2x4x4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %pr = arith.mulf %a, %b : f32
    %sum = arith.addf %acc, %pr : f32
    linalg.yield %sum : f32
  } -> tensor<2x4x4x6xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %bias : tensor<2x4x4x6xf32>, tensor<4x4x6xf32>) outs(%e : tensor<2x4x4x6xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4x6xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %sm = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sb : tensor<2x4x4x6xf32>) outs(%e : tensor<2x4x4x6xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %c2 = arith.constant 2 : index
    %lim = arith.addi %i, %c2 : index
    %hide = arith.cmpi sgt, %j, %lim : index
    %r = arith.select %hide, %ninf, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4x6xf32>
  %p = linalg.softmax dimension(3) ins(%sm : tensor<2x4x4x6xf32>) outs(%e : tensor<2x4x4x6xf32>) -> tensor<2x4x4x6xf32>
  %eo = tensor.empty() : tensor<2x4x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(b, h, m, n, r) -> (b, h, m, r)>, affine_map<(b, h, m, n, r) -> (b, h, r, n)>, affine_map<(b, h, m, n, r) -> (b, h, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x4x4x6xf32>, tensor<2x4x6x8xf32>) outs(%zo : tensor<2x4x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %pr = arith.mulf %a, %b : f32
    %sum = arith.addf %acc, %pr : f32
    linalg.yield %sum : f32
  } -> tensor<2x4x4x8xf32>
  return %out : tensor<2x4x4x8xf32>
}

// Deterministic pseudo-random values in (-2, 2): sin of a scrambled index.
func.func @fill3(%t: tensor<?x?x?xf32>, %seed: f32) -> tensor<?x?x?xf32> {
  %r = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel"]} outs(%t : tensor<?x?x?xf32>) {
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
  } -> tensor<?x?x?xf32>
  return %r : tensor<?x?x?xf32>
}

func.func private @printMemrefF32(tensor<*xf32>)

func.func @main() {
  %s1 = arith.constant 0.731 : f32
  %s2 = arith.constant 1.313 : f32
  %s3 = arith.constant 2.177 : f32
  %s4 = arith.constant 0.419 : f32
  %eq = tensor.empty() : tensor<2x4x8xf32>
  %ek = tensor.empty() : tensor<2x6x8xf32>
  %eb = tensor.empty() : tensor<1x4x6xf32>
  %dq = tensor.cast %eq : tensor<2x4x8xf32> to tensor<?x?x?xf32>
  %dk = tensor.cast %ek : tensor<2x6x8xf32> to tensor<?x?x?xf32>
  %db = tensor.cast %eb : tensor<1x4x6xf32> to tensor<?x?x?xf32>
  %q0 = func.call @fill3(%dq, %s1) : (tensor<?x?x?xf32>, f32) -> tensor<?x?x?xf32>
  %k0 = func.call @fill3(%dk, %s2) : (tensor<?x?x?xf32>, f32) -> tensor<?x?x?xf32>
  %v0 = func.call @fill3(%dk, %s3) : (tensor<?x?x?xf32>, f32) -> tensor<?x?x?xf32>
  %b0 = func.call @fill3(%db, %s4) : (tensor<?x?x?xf32>, f32) -> tensor<?x?x?xf32>
  %q = tensor.cast %q0 : tensor<?x?x?xf32> to tensor<2x4x8xf32>
  %k = tensor.cast %k0 : tensor<?x?x?xf32> to tensor<2x6x8xf32>
  %v = tensor.cast %v0 : tensor<?x?x?xf32> to tensor<2x6x8xf32>
  %b1 = tensor.cast %b0 : tensor<?x?x?xf32> to tensor<1x4x6xf32>
  %bias = tensor.collapse_shape %b1 [[0, 1], [2]] : tensor<1x4x6xf32> into tensor<4x6xf32>
  %o1 = func.call @sdpa_causal(%q, %k, %v) : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>) -> tensor<2x4x8xf32>
  %u1 = tensor.cast %o1 : tensor<2x4x8xf32> to tensor<*xf32>
  func.call @printMemrefF32(%u1) : (tensor<*xf32>) -> ()
  %o2 = func.call @sdpa_bias(%q, %k, %v, %bias) : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<4x6xf32>) -> tensor<2x4x8xf32>
  %u2 = tensor.cast %o2 : tensor<2x4x8xf32> to tensor<*xf32>
  func.call @printMemrefF32(%u2) : (tensor<*xf32>) -> ()
  %eq4 = tensor.empty() : tensor<4x4x8xf32>
  %ek4 = tensor.empty() : tensor<4x6x8xf32>
  %eb4 = tensor.empty() : tensor<2x4x6xf32>
  %dq4 = tensor.cast %eq4 : tensor<4x4x8xf32> to tensor<?x?x?xf32>
  %dk4 = tensor.cast %ek4 : tensor<4x6x8xf32> to tensor<?x?x?xf32>
  %db4 = tensor.cast %eb4 : tensor<2x4x6xf32> to tensor<?x?x?xf32>
  %q40 = func.call @fill3(%dq4, %s1) : (tensor<?x?x?xf32>, f32) -> tensor<?x?x?xf32>
  %k40 = func.call @fill3(%dk4, %s2) : (tensor<?x?x?xf32>, f32) -> tensor<?x?x?xf32>
  %v40 = func.call @fill3(%dk4, %s3) : (tensor<?x?x?xf32>, f32) -> tensor<?x?x?xf32>
  %b40 = func.call @fill3(%db4, %s4) : (tensor<?x?x?xf32>, f32) -> tensor<?x?x?xf32>
  %q41 = tensor.cast %q40 : tensor<?x?x?xf32> to tensor<4x4x8xf32>
  %k41 = tensor.cast %k40 : tensor<?x?x?xf32> to tensor<4x6x8xf32>
  %v41 = tensor.cast %v40 : tensor<?x?x?xf32> to tensor<4x6x8xf32>
  %bias4 = tensor.cast %b40 : tensor<?x?x?xf32> to tensor<2x4x6xf32>
  %q4 = tensor.expand_shape %q41 [[0, 1], [2], [3]] output_shape [2, 2, 4, 8] : tensor<4x4x8xf32> into tensor<2x2x4x8xf32>
  %k4 = tensor.expand_shape %k41 [[0, 1], [2], [3]] output_shape [2, 2, 6, 8] : tensor<4x6x8xf32> into tensor<2x2x6x8xf32>
  %v4 = tensor.expand_shape %v41 [[0, 1], [2], [3]] output_shape [2, 2, 6, 8] : tensor<4x6x8xf32> into tensor<2x2x6x8xf32>
  %o3 = func.call @sdpa_heads(%q4, %k4, %v4, %bias4) : (tensor<2x2x4x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x4x6xf32>) -> tensor<2x2x4x8xf32>
  %u3 = tensor.cast %o3 : tensor<2x2x4x8xf32> to tensor<*xf32>
  func.call @printMemrefF32(%u3) : (tensor<*xf32>) -> ()
  %eqg = tensor.empty() : tensor<8x4x8xf32>
  %ebg = tensor.empty() : tensor<4x4x6xf32>
  %dqg = tensor.cast %eqg : tensor<8x4x8xf32> to tensor<?x?x?xf32>
  %dbg = tensor.cast %ebg : tensor<4x4x6xf32> to tensor<?x?x?xf32>
  %qg0 = func.call @fill3(%dqg, %s1) : (tensor<?x?x?xf32>, f32) -> tensor<?x?x?xf32>
  %bg0 = func.call @fill3(%dbg, %s4) : (tensor<?x?x?xf32>, f32) -> tensor<?x?x?xf32>
  %qg1 = tensor.cast %qg0 : tensor<?x?x?xf32> to tensor<8x4x8xf32>
  %biasg = tensor.cast %bg0 : tensor<?x?x?xf32> to tensor<4x4x6xf32>
  %qg = tensor.expand_shape %qg1 [[0, 1], [2], [3]] output_shape [2, 4, 4, 8] : tensor<8x4x8xf32> into tensor<2x4x4x8xf32>
  %o4 = func.call @sdpa_gqa(%qg, %k4, %v4, %biasg) : (tensor<2x4x4x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<4x4x6xf32>) -> tensor<2x4x4x8xf32>
  %u4 = tensor.cast %o4 : tensor<2x4x4x8xf32> to tensor<*xf32>
  func.call @printMemrefF32(%u4) : (tensor<*xf32>) -> ()
  return
}
