// RUN: attn-opt %s --attn-raise-sdpa | FileCheck %s


// attn-raise-sdpa: scaled dot-product attention in linalg on tensors becomes
// attn.flash on one head and B equal-length sequences when, and only when,
// the two compute the same function (docs/raising.md). Shapes: B = 2,
// S = 4 queries, Sk = 6 keys, D = 8, unless a case says otherwise.

// Transposing indexing maps, scale, causal (bottom-right: Sk - S = 2),
// linalg.softmax: one head, B = 2 sequences of 4 queries and 6 keys.
// CHECK-LABEL: func.func @maps_scale_causal(
// CHECK: %[[Q:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<8x1x8xf32> to memref<8x1x8xf32>
// CHECK: %[[CQ:.*]] = arith.constant dense<[0, 4, 8]> : tensor<3xi32>
// CHECK: %[[BQ:.*]] = bufferization.to_buffer %[[CQ]] read_only
// CHECK: %[[CK:.*]] = arith.constant dense<[0, 6, 12]> : tensor<3xi32>
// CHECK: %[[BK:.*]] = bufferization.to_buffer %[[CK]] read_only
// CHECK: %[[SC:.*]] = arith.constant 0.353553385 : f32
// CHECK: %[[O:.*]] = memref.alloc() : memref<8x1x8xf32>
// CHECK: attn.flash q(%[[Q]] : memref<8x1x8xf32>) k(%{{.*}} : memref<12x1x8xf32>) v(%{{.*}} : memref<12x1x8xf32>) cu_seqlens_q(%[[BQ]] : memref<3xi32>) cu_seqlens_k(%[[BK]] : memref<3xi32>) scale(%[[SC]]) out(%[[O]] : memref<8x1x8xf32>) {causal}
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[O]] restrict writable
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[T]] {{\[\[}}0], [1, 2]]
// CHECK: %[[R:.*]] = tensor.expand_shape %[[C]] {{\[\[}}0, 1], [2]] output_shape [2, 4, 8]
// CHECK-NOT: linalg.
// CHECK: return %[[R]]
func.func @maps_scale_causal(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
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

// K transposed by linalg.transpose, divided by sqrt(D), decomposed softmax
// (max from NaN under maxnumf, as linalg.softmax decomposes); no mask.
// CHECK-LABEL: func.func @transpose_div_decomposed(
// CHECK: %[[SC:.*]] = arith.constant 0.353553385 : f32
// CHECK: attn.flash {{.*}} scale(%[[SC]]) out(%{{.*}} : memref<8x1x8xf32>){{$}}
// CHECK-NOT: linalg.
func.func @transpose_div_decomposed(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
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
  %er = tensor.empty() : tensor<2x4xf32>
  %minit = arith.constant 0xFFC00000 : f32
  %mi = linalg.fill ins(%minit : f32) outs(%er : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%ss : tensor<2x4x6xf32>) outs(%mi : tensor<2x4xf32>) {
  ^bb0(%x: f32, %a: f32):
    %r = arith.maxnumf %x, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ss, %mx : tensor<2x4x6xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4x6xf32>) {
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

// No scale, a causal mask added as a tensor built from indices (sle
// selecting 0 for visible keys), softmax decomposed with sub and exp apart.
// CHECK-LABEL: func.func @index_mask_unfused(
// CHECK: %[[SC:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: attn.flash {{.*}} scale(%[[SC]]) out(%{{.*}}) {causal}
// CHECK-NOT: linalg.
func.func @index_mask_unfused(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : tensor<2x4x8xf32>, tensor<2x6x8xf32>) outs(%z : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %em = tensor.empty() : tensor<4x6xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %mask = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} outs(%em : tensor<4x6xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %lim = arith.addi %i, %c2 : index
    %vis = arith.cmpi sle, %j, %lim : index
    %r = arith.select %vis, %zero, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %msk = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %mask : tensor<2x4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<2x4x6xf32>
  %er = tensor.empty() : tensor<2x4xf32>
  %minit = arith.constant 0xFF800000 : f32
  %mi = linalg.fill ins(%minit : f32) outs(%er : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%msk : tensor<2x4x6xf32>) outs(%mi : tensor<2x4xf32>) {
  ^bb0(%x: f32, %a: f32):
    %r = arith.maxnumf %x, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %df = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%msk, %mx : tensor<2x4x6xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %d = arith.subf %x, %m : f32
    linalg.yield %d : f32
  } -> tensor<2x4x6xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%df : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.exp %x : f32
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

// f16 inputs accumulated in f32 (mixed-type batch_matmul), an f16 bias
// per batch row, P rounded to f16 before P.V, the result truncated to f16.
// CHECK-LABEL: func.func @f16_bias(
// CHECK: %[[B:.*]] = tensor.expand_shape %arg3 {{\[\[}}0, 1], [2], [3]] output_shape [2, 1, 4, 6] : tensor<2x4x6xf16> into tensor<2x1x4x6xf16>
// CHECK: %[[BB:.*]] = bufferization.to_buffer %[[B]] read_only
// CHECK: attn.flash q(%{{.*}} : memref<8x1x8xf16>) {{.*}} bias(%[[BB]] : memref<2x1x4x6xf16>) out(%{{.*}} : memref<8x1x8xf16>){{$}}
// CHECK-NOT: linalg.
func.func @f16_bias(%q: tensor<2x4x8xf16>, %k: tensor<2x6x8xf16>, %v: tensor<2x6x8xf16>, %bias: tensor<2x4x6xf16>) -> tensor<2x4x8xf16> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : tensor<2x4x8xf16>, tensor<2x6x8xf16>) outs(%z : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %c = arith.constant 0.353553385 : f32
  %ss = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.mulf %x, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x4x6xf32>
  %bs = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ss, %bias : tensor<2x4x6xf32>, tensor<2x4x6xf16>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %y: f16, %o: f32):
    %b = arith.extf %y : f16 to f32
    %r = arith.addf %x, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x4x6xf32>
  %p = linalg.softmax dimension(2) ins(%bs : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %ph = tensor.empty() : tensor<2x4x6xf16>
  %p16 = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p : tensor<2x4x6xf32>) outs(%ph : tensor<2x4x6xf16>) {
  ^bb0(%x: f32, %o: f16):
    %t = arith.truncf %x : f32 to f16
    linalg.yield %t : f16
  } -> tensor<2x4x6xf16>
  %eo = tensor.empty() : tensor<2x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.batch_matmul ins(%p16, %v : tensor<2x4x6xf16>, tensor<2x6x8xf16>) outs(%zo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %eh = tensor.empty() : tensor<2x4x8xf16>
  %res = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%out : tensor<2x4x8xf32>) outs(%eh : tensor<2x4x8xf16>) {
  ^bb0(%x: f32, %o: f16):
    %t = arith.truncf %x : f32 to f16
    linalg.yield %t : f16
  } -> tensor<2x4x8xf16>
  return %res : tensor<2x4x8xf16>
}

// 2-D linalg.matmul (no batch): one sequence, no scale (1.0).
// CHECK-LABEL: func.func @matmul_2d(
// CHECK: tensor.expand_shape %arg0 {{\[\[}}0], [1, 2]] output_shape [4, 1, 8]
// CHECK: arith.constant dense<[0, 4]> : tensor<2xi32>
// CHECK: arith.constant dense<[0, 6]> : tensor<2xi32>
// CHECK: %[[SC:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: attn.flash {{.*}} scale(%[[SC]]) out(%{{.*}} : memref<4x1x8xf32>){{$}}
// CHECK-NOT: linalg.
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2]] : tensor<4x1x8xf32> into tensor<4x8xf32>
func.func @matmul_2d(%q: tensor<4x8xf32>, %k: tensor<6x8xf32>, %v: tensor<6x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %s = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] ins(%q, %k : tensor<4x8xf32>, tensor<6x8xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.softmax dimension(1) ins(%s : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %eo = tensor.empty() : tensor<4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<4x8xf32>) -> tensor<4x8xf32>
  %out = linalg.matmul ins(%p, %v : tensor<4x6xf32>, tensor<6x8xf32>) outs(%zo : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %out : tensor<4x8xf32>
}

// Near-miss: softmax over the query dim, not the keys.
// CHECK-LABEL: func.func @softmax_wrong_dim(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax dimension(1)
func.func @softmax_wrong_dim(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
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
  %p = linalg.softmax dimension(1) ins(%ss : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %eo = tensor.empty() : tensor<2x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.batch_matmul ins(%p, %v : tensor<2x4x6xf32>, tensor<2x6x8xf32>) outs(%zo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

// Near-miss: the scale is a function argument, not a constant.
// CHECK-LABEL: func.func @scale_not_constant(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @scale_not_constant(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>, %c: f32) -> tensor<2x4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : tensor<2x4x8xf32>, tensor<2x6x8xf32>) outs(%z : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.mulf %x, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x4x6xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %eo = tensor.empty() : tensor<2x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.batch_matmul ins(%p, %v : tensor<2x4x6xf32>, tensor<2x6x8xf32>) outs(%zo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

// Near-miss: the scale tensor differs per element.
// CHECK-LABEL: func.func @scale_not_splat(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @scale_not_splat(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : tensor<2x4x8xf32>, tensor<2x6x8xf32>) outs(%z : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %cs = arith.constant dense<[[[1.0, 2.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]], [[1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]]> : tensor<2x4x6xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %cs : tensor<2x4x6xf32>, tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    linalg.yield %m : f32
  } -> tensor<2x4x6xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %eo = tensor.empty() : tensor<2x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.batch_matmul ins(%p, %v : tensor<2x4x6xf32>, tensor<2x6x8xf32>) outs(%zo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

// Near-miss: the raw scores are also returned, so they must stay.
// CHECK-LABEL: func.func @scores_used_twice(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @scores_used_twice(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x6xf32>) {
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
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %eo = tensor.empty() : tensor<2x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.batch_matmul ins(%p, %v : tensor<2x4x6xf32>, tensor<2x6x8xf32>) outs(%zo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %out, %s : tensor<2x4x8xf32>, tensor<2x4x6xf32>
}

// Near-miss: top-left causal (j > i) with S = 4 < Sk = 6: attn.flash's
// Near-miss: causal is bottom-right (j > i + 2).
// CHECK-LABEL: func.func @causal_top_left(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @causal_top_left(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
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
    %off = arith.constant 0 : index
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

// Near-miss: hidden keys get -1e4, which still weighs in softmax.
// CHECK-LABEL: func.func @causal_fill_small(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @causal_fill_small(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
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
  %fill = arith.constant -1.0e+04 : f32
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

// Near-miss: S = 6 > Sk = 4: bottom-right causal hides every key of the first two
// Near-miss: rows; flash writes 0 there, softmax NaN.
// CHECK-LABEL: func.func @causal_more_queries(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @causal_more_queries(%q: tensor<2x6x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x6x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x6x4xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x6x4xf32>) -> tensor<2x6x4xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : tensor<2x6x8xf32>, tensor<2x4x8xf32>) outs(%z : tensor<2x6x4xf32>) -> tensor<2x6x4xf32>
  %c = arith.constant 0.353553385 : f32
  %ss = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x6x4xf32>) outs(%e : tensor<2x6x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.mulf %x, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x6x4xf32>
  %fill = arith.constant 0xFF800000 : f32
  %msk = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ss : tensor<2x6x4xf32>) outs(%e : tensor<2x6x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %off = arith.constant -2 : index
    %lim = arith.addi %i, %off : index
    %hide = arith.cmpi ugt, %j, %lim : index
    %r = arith.select %hide, %fill, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x6x4xf32>
  %p = linalg.softmax dimension(2) ins(%msk : tensor<2x6x4xf32>) outs(%e : tensor<2x6x4xf32>) -> tensor<2x6x4xf32>
  %eo = tensor.empty() : tensor<2x6x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x6x8xf32>) -> tensor<2x6x8xf32>
  %out = linalg.batch_matmul ins(%p, %v : tensor<2x6x4xf32>, tensor<2x4x8xf32>) outs(%zo : tensor<2x6x8xf32>) -> tensor<2x6x8xf32>
  return %out : tensor<2x6x8xf32>
}

// Near-miss: P.V^T contracts V over its head dim, not its keys.
// CHECK-LABEL: func.func @pv_transposed_v(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @pv_transposed_v(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x8x6xf32>) -> tensor<2x4x8xf32> {
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
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %eo = tensor.empty() : tensor<2x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%p, %v : tensor<2x4x6xf32>, tensor<2x8x6xf32>) outs(%zo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

// Near-miss: V's head dim (16) differs from Q's (8); attn.flash has one D.
// CHECK-LABEL: func.func @head_dim_mismatch(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @head_dim_mismatch(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x16xf32>) -> tensor<2x4x16xf32> {
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
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %eo = tensor.empty() : tensor<2x4x16xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %out = linalg.batch_matmul ins(%p, %v : tensor<2x4x6xf32>, tensor<2x6x16xf32>) outs(%zo : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %out : tensor<2x4x16xf32>
}

// Near-miss: f16 inputs accumulated in f16: not flash's f32 accumulation.
// CHECK-LABEL: func.func @f16_accumulation(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @f16_accumulation(%q: tensor<2x4x8xf16>, %k: tensor<2x6x8xf16>, %v: tensor<2x6x8xf16>) -> tensor<2x4x8xf16> {
  %c0 = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<2x4x6xf16>
  %z = linalg.fill ins(%c0 : f16) outs(%e : tensor<2x4x6xf16>) -> tensor<2x4x6xf16>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : tensor<2x4x8xf16>, tensor<2x6x8xf16>) outs(%z : tensor<2x4x6xf16>) -> tensor<2x4x6xf16>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x4x6xf16>) outs(%e : tensor<2x4x6xf16>) -> tensor<2x4x6xf16>
  %eo = tensor.empty() : tensor<2x4x8xf16>
  %zo = linalg.fill ins(%c0 : f16) outs(%eo : tensor<2x4x8xf16>) -> tensor<2x4x8xf16>
  %out = linalg.batch_matmul ins(%p, %v : tensor<2x4x6xf16>, tensor<2x6x8xf16>) outs(%zo : tensor<2x4x8xf16>) -> tensor<2x4x8xf16>
  return %out : tensor<2x4x8xf16>
}

// Near-miss: Q.K^T accumulates into 1.0, not 0.
// CHECK-LABEL: func.func @init_not_zero(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @init_not_zero(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
  %c0 = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : tensor<2x4x8xf32>, tensor<2x6x8xf32>) outs(%z : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %eo = tensor.empty() : tensor<2x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.batch_matmul ins(%p, %v : tensor<2x4x6xf32>, tensor<2x6x8xf32>) outs(%zo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

// Near-miss: the scale applies to the masked scores (and so to the bias as well):
// Near-miss: flash scales q.k only.
// CHECK-LABEL: func.func @scale_after_mask(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @scale_after_mask(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : tensor<2x4x8xf32>, tensor<2x6x8xf32>) outs(%z : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %fill = arith.constant 0xFF800000 : f32
  %msk = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %off = arith.constant 2 : index
    %lim = arith.addi %i, %off : index
    %hide = arith.cmpi ugt, %j, %lim : index
    %r = arith.select %hide, %fill, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4x6xf32>
  %c = arith.constant 0.353553385 : f32
  %ss = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%msk : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.mulf %x, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x4x6xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x4x6xf32>) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %eo = tensor.empty() : tensor<2x4x8xf32>
  %zo = linalg.fill ins(%c0 : f32) outs(%eo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.batch_matmul ins(%p, %v : tensor<2x4x6xf32>, tensor<2x6x8xf32>) outs(%zo : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

// Near-miss: the row max starts at 0, not -inf: rows whose scores are all below 0
// Near-miss: subtract 0 and can overflow differently; not linalg.softmax.
// CHECK-LABEL: func.func @max_not_neutral(
// CHECK-NOT: attn.flash
// CHECK: linalg.generic
func.func @max_not_neutral(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%q, %k : tensor<2x4x8xf32>, tensor<2x6x8xf32>) outs(%z : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %er = tensor.empty() : tensor<2x4xf32>
  %minit = arith.constant 0.0 : f32
  %mi = linalg.fill ins(%minit : f32) outs(%er : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x4x6xf32>) outs(%mi : tensor<2x4xf32>) {
  ^bb0(%x: f32, %a: f32):
    %r = arith.maxnumf %x, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %mx : tensor<2x4x6xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4x6xf32>) {
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

// [B, H, S, D] = [2, 2, 4, 8]: contractions as linalg.generic over five
// loops, a per-head bias shared by the batch ([H, S, Sk]), causal. One flash
// per batch entry on [S, H, D] views (subview + transpose).
// CHECK-LABEL: func.func @heads_causal_bias(
// CHECK: %[[Q:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<2x2x4x8xf32> to memref<2x2x4x8xf32>
// CHECK: %[[O:.*]] = memref.alloc() : memref<2x2x4x8xf32>
// CHECK: %[[CQ:.*]] = arith.constant dense<[0, 4]> : tensor<2xi32>
// CHECK: %[[CK:.*]] = arith.constant dense<[0, 6]> : tensor<2xi32>
// CHECK: %[[BIAS:.*]] = memref.expand_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] output_shape [1, 2, 4, 6]
// CHECK: scf.for %[[B:.*]] =
// CHECK: %[[QS:.*]] = memref.subview %[[Q]][%[[B]], 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>
// CHECK: %[[QT:.*]] = memref.transpose %[[QS]] (d0, d1, d2) -> (d1, d0, d2) : {{.*}} to memref<4x2x8xf32, strided<[8, 32, 1], offset: ?>>
// CHECK: attn.flash q(%[[QT]] : {{.*}} bias(%[[BIAS]] : memref<1x2x4x6xf32>) out(%{{.*}} : memref<4x2x8xf32, strided<[8, 32, 1], offset: ?>>) {causal}
// CHECK: %[[R:.*]] = bufferization.to_tensor %[[O]] restrict writable
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.softmax
// CHECK: return %[[R]]
func.func @heads_causal_bias(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x6x8xf32>, %v: tensor<2x2x6x8xf32>, %bias: tensor<2x4x6xf32>) -> tensor<2x2x4x8xf32> {
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

// One K/V for all heads (K [B, Sk, D] read by every head): attn.flash needs
// K with the head dim of Q's heads or a divisor laid out per head; not
// matched.
// CHECK-LABEL: func.func @heads_shared_kv(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @heads_shared_kv(%q: tensor<2x2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x2x6x8xf32>, %bias: tensor<2x4x6xf32>) -> tensor<2x2x4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x2x4x6xf32>) -> tensor<2x2x4x6xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, h, m, n, r) -> (b, h, m, r)>, affine_map<(b, h, m, n, r) -> (b, n, r)>, affine_map<(b, h, m, n, r) -> (b, h, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x2x4x8xf32>, tensor<2x6x8xf32>) outs(%z : tensor<2x2x4x6xf32>) {
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

// A bias [S, Sk] broadcast over batch and heads: flash's bias has a head
// dim; not matched.
// CHECK-LABEL: func.func @heads_bias_over_heads(
// CHECK-NOT: attn.flash
// CHECK: linalg.softmax
func.func @heads_bias_over_heads(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x6x8xf32>, %v: tensor<2x2x6x8xf32>, %bias: tensor<4x6xf32>) -> tensor<2x2x4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x2x4x6xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x2x4x6xf32>) -> tensor<2x2x4x6xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, h, m, n, r) -> (b, h, m, r)>, affine_map<(b, h, m, n, r) -> (b, h, n, r)>, affine_map<(b, h, m, n, r) -> (b, h, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x2x4x8xf32>, tensor<2x2x6x8xf32>) outs(%z : tensor<2x2x4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %pr = arith.mulf %a, %b : f32
    %sum = arith.addf %acc, %pr : f32
    linalg.yield %sum : f32
  } -> tensor<2x2x4x6xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %bias : tensor<2x2x4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<2x2x4x6xf32>) {
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

// GQA written as repeat_interleave (linalg.broadcast of K/V after the head
// dim, collapsed to [B, H, Sk, D]): flash reads the 2 KV heads directly.
// CHECK-LABEL: func.func @heads_gqa(
// CHECK-SAME: %{{[^:]*}}: tensor<2x4x4x8xf32>, %[[K:[^:]*]]: tensor<2x2x6x8xf32>
// CHECK: bufferization.to_buffer %[[K]] read_only : tensor<2x2x6x8xf32>
// CHECK: attn.flash {{.*}} k(%{{.*}} : memref<6x2x8xf32, strided<[8, 48, 1], offset: ?>>) v(%{{.*}} : memref<6x2x8xf32, strided<[8, 48, 1], offset: ?>>)
// CHECK-NOT: linalg.broadcast
// CHECK: return
func.func @heads_gqa(%q: tensor<2x4x4x8xf32>, %kh: tensor<2x2x6x8xf32>, %vh: tensor<2x2x6x8xf32>, %bias: tensor<4x4x6xf32>) -> tensor<2x4x4x8xf32> {
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

// K/V heads tiled (broadcast before the head dim: head h reads h % Hk), not
// attn.flash's GQA (h / G): raised on the repeated [B, H, Sk, D] tensors.
// CHECK-LABEL: func.func @heads_tiled_kv(
// CHECK: linalg.broadcast {{.*}} dimensions = [1]
// CHECK: attn.flash {{.*}} k(%{{.*}} : memref<6x4x8xf32, strided<[8, 48, 1], offset: ?>>)
func.func @heads_tiled_kv(%q: tensor<2x4x4x8xf32>, %kh: tensor<2x2x6x8xf32>, %vh: tensor<2x2x6x8xf32>, %bias: tensor<4x4x6xf32>) -> tensor<2x4x4x8xf32> {
  %ek = tensor.empty() : tensor<2x2x2x6x8xf32>
  %kb = linalg.broadcast ins(%kh : tensor<2x2x6x8xf32>) outs(%ek : tensor<2x2x2x6x8xf32>) dimensions = [1]
  %k = tensor.collapse_shape %kb [[0], [1, 2], [3], [4]] : tensor<2x2x2x6x8xf32> into tensor<2x4x6x8xf32>
  %vb = linalg.broadcast ins(%vh : tensor<2x2x6x8xf32>) outs(%ek : tensor<2x2x2x6x8xf32>) dimensions = [1]
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
