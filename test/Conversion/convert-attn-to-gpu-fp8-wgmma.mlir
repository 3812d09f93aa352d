// REQUIRES: nvvm-backend
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu=chip=sm_90a | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_80" --convert-attn-to-gpu=chip=sm_80 | FileCheck %s --check-prefix=AMPERE

// sm_90a flash over fp8 Q, K and V with heads of 128 multiplies them as
// stored on fp8 wgmma. K, V and Q come through tensor maps of 128 fp8 (one
// 128-byte swizzle atom) a row, Q's despite its scale (the scales multiply
// the dot products and the output).
// CHECK-LABEL: func.func @fp8
// CHECK: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<128x1x128xf8E4M3FN, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<128x1x128xf8E4M3FN, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<32x4x128xf8E4M3FN, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// The tiles in fp8 bytes: Q 16 KB, two stages of K and raw V at 16 KB each,
// two V^T of 16 KB past the ring, and 1 KB of alignment slack.
// CHECK: gpu.launch_func {{.*}} dynamic_shared_memory_size %c115712_i32
// Twelve mbarriers: the specialized ring's nine, Q's release slot unused,
// and the raw V tiles' two (one expect_tx each).
// CHECK: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 12>
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c8{{.*}}], %c1
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c10], %c1
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c11], %c1
// The producer keeps 24 registers: its leader loads raw V one tile ahead
// (16 KB tiles of fp8) and K; all its threads wait for the raw tile and
// the consumers' release of V^T, transpose it (a warp's 32 keys in eight
// rounds of 16 dims: ldmatrix.x4, four byte permutes with per-lane
// selectors, stmatrix.x4.trans at V^T rows 16 apart), fence the writes for
// the async proxy, meet on their own barrier, and one arrives on full V.
// CHECK: nvvm.setmaxregister  decrease 24
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c16384
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<128x1x128xf8E4M3FN
// CHECK: scf.for
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c16384
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<128x1x128xf8E4M3FN
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c16384
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<128x1x128xf8E4M3FN
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}[%c8{{.*}}], %c16384
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<32x4x128xf8E4M3FN
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-NOT: ld.shared.b32
// CHECK: "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];"
// CHECK-COUNT-4: "prmt.b32 $0, $1, $2, $3;"
// CHECK: "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [$0+0], {$1, $2, $3, $4};"
// CHECK: "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [$0+2048], {$1, $2, $3, $4};"
// CHECK: "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [$0+14336], {$1, $2, $3, $4};"
// CHECK-NEXT: "fence.proxy.async.shared::cta;"
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK: nvgpu.mbarrier.arrive
// The consumers: QK on fp8 wgmma (4 k steps of 32 over D = 128, Q and K
// from shared memory), PV with P from registers (4 key steps of 32) and
// V^T from shared memory; P quantized with saturating conversions, its
// second value in the low byte.
// CHECK: nvvm.setmaxregister  increase 240
// CHECK: nvgpu.mbarrier.try_wait.parity %{{.*}}[%c8
// CHECK: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}}, $64, $65, p, 1, 1;
// CHECK-COUNT-3: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}}, $128, $129, p, 1, 1;
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-COUNT-16: cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1;\0Acvt.rn.satfinite.e4m3x2.f32 hi, $4, $3;\0Amov.b32 $0, {lo, hi};
// CHECK: scf.for
// CHECK: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}}, $64, $65, p, 1, 1;
// CHECK-COUNT-3: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}}, $128, $129, p, 1, 1;
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}}, {$128, $129, $130, $131}, $132, p, 1, 1;
// On sm_80 the same op keeps the mma.sync program (no tensor maps).
// AMPERE-LABEL: func.func @fp8
// AMPERE-NOT: tma.create.descriptor
// AMPERE: gpu.launch_func
func.func @fp8(%q: memref<?x8x128xf8E4M3FN>, %k: memref<?x2x128xf8E4M3FN>, %v: memref<?x2x128xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x8x128xbf16>) {
  attn.flash q(%q : memref<?x8x128xf8E4M3FN>) k(%k : memref<?x2x128xf8E4M3FN>) v(%v : memref<?x2x128xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x8x128xbf16>) {causal}
  return
}

// -----

// e5m2: QK and PV on e5m2 wgmma, P quantized to e5m2; the consumers take
// log2 |p_scale| once (P / |p_scale| is exp2(s - max - log2 |p_scale|)).
// CHECK-LABEL: func.func @e5m2
// CHECK: nvvm.setmaxregister  increase 240
// CHECK: llvm.nvvm.lg2.approx.f
// CHECK: wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2
// CHECK: cvt.rn.satfinite.e5m2x2.f32
func.func @e5m2(%q: memref<?x4x128xf8E5M2>, %k: memref<?x4x128xf8E5M2>, %v: memref<?x4x128xf8E5M2>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x4x128xf16>) {
  attn.flash q(%q : memref<?x4x128xf8E5M2>) k(%k : memref<?x4x128xf8E5M2>) v(%v : memref<?x4x128xf8E5M2>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x4x128xf16>)
  return
}

// -----

// Dropout keeps the previous sm_90a schedule (its Philox draws spilled next
// to the fp8 wgmma consumers): no tensor maps.
// CHECK-LABEL: func.func @dropout
// CHECK-NOT: tma.create.descriptor
// CHECK: gpu.launch_func
func.func @dropout(%q: memref<?x4x128xf8E4M3FN>, %k: memref<?x4x128xf8E4M3FN>, %v: memref<?x4x128xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %p: f32, %seed: i64, %off: i64, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x4x128xbf16>) {
  attn.flash q(%q : memref<?x4x128xf8E4M3FN>) k(%k : memref<?x4x128xf8E4M3FN>) v(%v : memref<?x4x128xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) dropout(%p, %seed, %off) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x4x128xbf16>)
  return
}

// -----

// Heads of 64 take the same pipeline on three consumer warpgroups (192
// rows: a box of 48 tokens of 4 heads; 160 registers each, the producer
// 24): boxes of 128 fp8 read zeros past the head's 64 (16 KB tiles), QK is
// two k steps of 32 over the first half of each 128-byte row, and V^T
// ([64, 128 keys]) lies past the K/V ring (24576 + 2 * 32768 bytes of
// tiles, 2 * 8192 of V^T, 1024 of alignment slack), where the producer
// transposes the raw tile's first 16 words of each row by 32-bit loads,
// permutes and stores: four rounds a warp, one at a time (ldmatrix and
// stmatrix ran slower beside three consumer warpgroups); PV is m64n64k32.
// CHECK-LABEL: func.func @d64
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c128{{.*}}, %c1{{.*}}, %c128{{.*}}] {{.*}} -> <tensor = memref<128x1x128xf8E4M3FN
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c128{{.*}}, %c1{{.*}}, %c128{{.*}}] {{.*}} -> <tensor = memref<128x1x128xf8E4M3FN
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c48{{.*}}, %c4{{.*}}, %c128{{.*}}] {{.*}} -> <tensor = memref<48x4x128xf8E4M3FN
// CHECK: gpu.launch_func {{.*}} threads in (%c512{{.*}} dynamic_shared_memory_size %c107520_i32
// CHECK: nvvm.setmaxregister  decrease 24
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c16384
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c1
// CHECK-COUNT-4: "ld.shared.b32 $0, [$1+{{0|128|1024|1152}}];"
// CHECK: nvvm.setmaxregister  increase 160
// CHECK: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}}, $64, $65, p, 1, 1;
// CHECK-NOT: m64n128k32
// CHECK: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}}, $128, $129, p, 1, 1;
// CHECK-NOT: m64n128k32
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
func.func @d64(%q: memref<?x8x64xf8E4M3FN>, %k: memref<?x2x64xf8E4M3FN>, %v: memref<?x2x64xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x8x64xbf16>) {
  attn.flash q(%q : memref<?x8x64xf8E4M3FN>) k(%k : memref<?x2x64xf8E4M3FN>) v(%v : memref<?x2x64xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x8x64xbf16>) {causal}
  return
}

// -----

// Heads of 256: rows of two atoms (two boxes of 128 fp8 a tile, 32 KB),
// 230400 bytes of shared memory (Q 32 KB, two stages of K and raw V at
// 32 KB each, two V^T of 32 KB, 1 KB of slack); the producer at 24
// registers transposes a raw row's two atoms (16384 bytes apart: the
// atom's 128 rows) in a loop of two iterations of eight unrolled rounds
// (all sixteen spilled), the consumers at 240; QK is eight k steps of 32
// over the two atoms, PV m64n256k32.
// CHECK-LABEL: func.func @d256
// CHECK: gpu.launch_func {{.*}} threads in (%c384{{.*}} dynamic_shared_memory_size %c230400_i32
// CHECK: nvvm.setmaxregister  decrease 24
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c32768
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c1
// CHECK: arith.muli %{{.*}}, %c16384_i32
// CHECK-COUNT-8: "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];"
// CHECK: nvvm.setmaxregister  increase 240
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// CHECK: wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3
func.func @d256(%q: memref<?x8x256xf8E4M3FN>, %k: memref<?x2x256xf8E4M3FN>, %v: memref<?x2x256xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x8x256xbf16>) {
  attn.flash q(%q : memref<?x8x256xf8E4M3FN>) k(%k : memref<?x2x256xf8E4M3FN>) v(%v : memref<?x2x256xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x8x256xbf16>)
  return
}
