// REQUIRES: nvvm-backend
// REQUIRES: ptxas
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_90a" --attn-lower-to-nvvm-pipeline="chip=sm_90a format=isa" | %python %S/extract_gpu_binary.py > %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// The PTX of the Hopper flash program (causal, bf16, D=128): 384 threads
// at 168 registers; tensor maps as 64-byte aligned by-value parameters;
// the producer warpgroup gives registers away and issues Q, K and V by
// the bulk tensor copy engine on mbarriers; the consumers take registers,
// take turns on named barriers 1 and 2, and run QK/PV on wgmma with
// descriptors (m64n128k16), QK(t) in flight with PV(t - 1). The tiles
// live in the launch's dynamic shared memory (`.extern`), which ptxas
// places past the static mbarriers, not in a one-byte static variable
// among them (attn-nvvm-extern-dynamic-shared).
// CHECK: .extern .shared .align 16 .b8 __dynamic_shmem__0[];
// CHECK-NOT: .shared .align 16 .b8 __dynamic_shmem__0;
// CHECK: .visible .entry flash_causal(
// CHECK-NEXT: .param .align 64 .b8 flash_causal_param_0[128],
// CHECK-NEXT: .param .align 64 .b8 flash_causal_param_1[128],
// CHECK-NEXT: .param .align 64 .b8 flash_causal_param_2[128],
// CHECK: .maxntid 384, 1, 1
// CHECK: .maxnreg 168
// CHECK: mbarrier.init.shared.b64
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK: setmaxnreg.dec.sync.aligned.u32 24;
// CHECK: mbarrier.arrive.expect_tx.shared.b64
// CHECK: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK: mbarrier.try_wait.parity.shared.b64
// CHECK: setmaxnreg.inc.sync.aligned.u32 240;
// CHECK: bar.sync {{.*}}, 256;
// CHECK: wgmma.fence.sync.aligned;
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: wgmma.commit_group.sync.aligned;
// CHECK: bar.arrive {{.*}}, 256;
// CHECK: wgmma.wait_group.sync.aligned 1;
// CHECK: mbarrier.arrive.shared.b64
// CHECK: ex2.approx.ftz.f32
// The softmax's lazy rescaling: a warp vote on whether any row moved its
// reference max (O is rescaled under that branch at the next step's
// start, where no MMA is in flight).
// CHECK: vote.sync.any.pred
// CHECK: wgmma.wait_group.sync.aligned 0;
// The epilogue: each quad trades its pairs (xor shuffles) so that each lane
// holds 8 adjacent outputs, stored 16 bytes at a time.
// CHECK: shfl.sync.bfly.b32
// CHECK: st.global.v4.b32
// CHECK-NOT: ld.local
// CHECK-NOT: st.local

// The persistent form: the same roles, each looping over the programs.
// CHECK: .visible .entry flash_persistent(
// CHECK: .maxntid 384, 1, 1
// CHECK: .maxnreg 168
// CHECK: mbarrier.init.shared.b64
// (The roles' blocks lie in either order.)
// CHECK-DAG: setmaxnreg.dec.sync.aligned.u32 32;
// CHECK-DAG: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK-DAG: setmaxnreg.inc.sync.aligned.u32 232;
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK-NOT: ld.local
// CHECK-NOT: st.local

// CHECK: .visible .entry flash_persistent_full(
// CHECK: setmaxnreg.dec.sync.aligned.u32 32;

// Block-sparse over per-head layouts of 64-key blocks: one consumer
// warpgroup of 64 rows beside the producer (256 threads at 128 registers,
// two blocks per SM); the producer walks the CSR blocks and issues K, Q
// and V by TMA; QK on m64n64k16, PV on m64n128k16.
// CHECK: .visible .entry blocksparse_heads(
// CHECK-NEXT: .param .align 64 .b8 blocksparse_heads_param_0[128],
// CHECK-NEXT: .param .align 64 .b8 blocksparse_heads_param_1[128],
// CHECK-NEXT: .param .align 64 .b8 blocksparse_heads_param_2[128],
// CHECK: .maxntid 256, 1, 1
// CHECK: .maxnreg 128
// CHECK: setmaxnreg.dec.sync.aligned.u32 24;
// CHECK: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK: setmaxnreg.inc.sync.aligned.u32 232;
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// The epilogue stores 16 bytes a lane after the quad exchange.
// CHECK: shfl.sync.bfly.b32
// CHECK: st.global.v4.b32
// CHECK-NOT: ld.local
// CHECK-NOT: st.local

// fp8 q, k and v (heads of 128) on fp8 wgmma: the producer keeps 24
// registers, loads by TMA and transposes V (ldmatrix, byte permutes by
// per-lane selectors, stmatrix.trans), fences for the async proxy and
// meets on its own named barrier (4, 128 threads); the consumers (240) run
// QK and PV on m64n128k32 e4m3 and quantize P with saturating conversions.
// CHECK: .visible .entry flash_fp8(
// CHECK-NEXT: .param .align 64 .b8 flash_fp8_param_0[128],
// CHECK-NEXT: .param .align 64 .b8 flash_fp8_param_1[128],
// CHECK-NEXT: .param .align 64 .b8 flash_fp8_param_2[128],
// CHECK: .maxntid 384, 1, 1
// CHECK: .maxnreg 168
// CHECK: setmaxnreg.dec.sync.aligned.u32 24;
// CHECK: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK: prmt.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK: stmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// CHECK: fence.proxy.async.shared::cta;
// CHECK: bar.sync {{.*}}, 128;
// CHECK: setmaxnreg.inc.sync.aligned.u32 240;
// CHECK: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// CHECK: cvt.rn.satfinite.e4m3x2.f32
// CHECK-NOT: ld.local
// CHECK-NOT: st.local

// Heads of 256 on the plan's 80-key tiles: 64 KB of Q and 160 KB of two K/V
// stages in the launch's shared memory, TMA boxes of 80 keys, QK on
// m64n80k16 and PV on m64n256k16 (five 16-key steps); the consumers' 240
// registers hold O, S and P without spilling (the masked tiles finish
// PV(t - 1) before their softmax, and the epilogue indexes rows in 32 bits).
// CHECK: .visible .entry flash_d256(
// CHECK: .maxntid 384, 1, 1
// CHECK: .maxnreg 168
// CHECK: setmaxnreg.dec.sync.aligned.u32 24;
// CHECK: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK: setmaxnreg.inc.sync.aligned.u32 240;
// CHECK: wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16
// CHECK: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK-NOT: ld.local
// CHECK-NOT: st.local

// fp8 heads of 256 on fp8 wgmma: 128 x 128 tiles sized in fp8 bytes, the
// producer at 24 registers (transposing by ldmatrix/stmatrix, an atom of
// its raw V rows a loop iteration), the consumers at 240 for O, S and P;
// QK on m64n128k32 over two atoms of 128 fp8, PV on m64n256k32.
// CHECK: .visible .entry flash_fp8_d256(
// CHECK: .maxntid 384, 1, 1
// CHECK: .maxnreg 168
// CHECK: setmaxnreg.dec.sync.aligned.u32 24;
// CHECK: stmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// CHECK: setmaxnreg.inc.sync.aligned.u32 240;
// CHECK: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// CHECK: wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3
// CHECK-NOT: ld.local
// CHECK-NOT: st.local

// fp8 heads of 64 on three consumer warpgroups (192 rows, 160 registers
// each) in a three-way pingpong (turn barriers 1-3), the producer at 24
// (transposing by 32-bit words: ldmatrix/stmatrix ran slower here).
// CHECK: .visible .entry flash_fp8_d64(
// CHECK: .maxntid 512, 1, 1
// CHECK: .maxnreg 128
// CHECK: setmaxnreg.dec.sync.aligned.u32 24;
// CHECK-NOT: stmatrix
// CHECK: st.shared.b32
// CHECK: setmaxnreg.inc.sync.aligned.u32 160;
// CHECK: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// CHECK: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// CHECK-NOT: ld.local
// CHECK-NOT: st.local

// ptxas keeps every MMA of the kernels asynchronous and spills nothing
// (it reports the kernels last first).
// PTXAS-NOT: Potential Performance Loss
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Used 128 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Used 128 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
func.func @flash_causal(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {causal}
  return
}

func.func @flash_persistent(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {causal, schedule = #attn.schedule<block_q = 128, block_n = 128, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, pingpong = true, persistent = true>}
  return
}

func.func @flash_persistent_full(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {schedule = #attn.schedule<block_q = 128, block_n = 128, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, pingpong = true, persistent = true>}
  return
}

func.func @blocksparse_heads(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x257xi32>, %col: memref<16x?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<16x257xi32>) col(%col : memref<16x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64}
  return
}

func.func @flash_fp8(%q: memref<?x16x128xf8E4M3FN>, %k: memref<?x4x128xf8E4M3FN>, %v: memref<?x4x128xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xf8E4M3FN>) k(%k : memref<?x4x128xf8E4M3FN>) v(%v : memref<?x4x128xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x16x128xbf16>) {causal}
  return
}

func.func @flash_d256(%q: memref<?x8x256xbf16>, %k: memref<?x8x256xbf16>, %v: memref<?x8x256xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x8x256xbf16>) {
  attn.flash q(%q : memref<?x8x256xbf16>) k(%k : memref<?x8x256xbf16>) v(%v : memref<?x8x256xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x8x256xbf16>)
  return
}

func.func @flash_fp8_d256(%q: memref<?x16x256xf8E4M3FN>, %k: memref<?x4x256xf8E4M3FN>, %v: memref<?x4x256xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x16x256xbf16>) {
  attn.flash q(%q : memref<?x16x256xf8E4M3FN>) k(%k : memref<?x4x256xf8E4M3FN>) v(%v : memref<?x4x256xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x16x256xbf16>) {causal}
  return
}

func.func @flash_fp8_d64(%q: memref<?x16x64xf8E4M3FN>, %k: memref<?x4x64xf8E4M3FN>, %v: memref<?x4x64xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x16x64xbf16>) {
  attn.flash q(%q : memref<?x16x64xf8E4M3FN>) k(%k : memref<?x4x64xf8E4M3FN>) v(%v : memref<?x4x64xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x16x64xbf16>) {causal}
  return
}
