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
// The persistent programs' hand-over words and their module's counter of
// claimed programs (a global, zero when the module loads).
// CHECK: .shared .align 4 .b8 attn_claimed_programs[8];
// CHECK-NEXT: .global .align 4 .u32 attn_program_counter;
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
// A relaxed (default) atomic claims the next program; the launch's last
// claim resets the counter.
// CHECK-DAG: atom.global.add.u32 {{.*}}, [attn_program_counter], 1;
// CHECK-DAG: st.global.b32 [attn_program_counter], 0;
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK-NOT: ld.local
// CHECK-NOT: st.local

// CHECK: .visible .entry flash_persistent_full(
// CHECK: setmaxnreg.dec.sync.aligned.u32 32;

// Block-sparse over per-head layouts of 64-key blocks: programs of two
// layout rows (two consumer warpgroups in pingpong, 384 threads at 168
// registers), QK and PV on m64n128k16 over tiles of two blocks of the
// rows' union. The producer walks the union and writes each tile's entry
// (first keys and valid keys of its blocks) into 16-byte aligned shared
// words before the tile's boxes (two a block's rows, one per atom); the
// consumers read the entries after the tile's full barrier.
// CHECK: .visible .entry blocksparse_heads(
// CHECK-NEXT: .param .align 64 .b8 blocksparse_heads_param_0[128],
// CHECK-NEXT: .param .align 64 .b8 blocksparse_heads_param_1[128],
// CHECK-NEXT: .param .align 64 .b8 blocksparse_heads_param_2[128],
// CHECK: .maxntid 384, 1, 1
// CHECK: .maxnreg 168
// CHECK: .shared .align 16 .b8 __wg_blocksparse_heads_0[64];
// CHECK: setmaxnreg.dec.sync.aligned.u32 24;
// CHECK: st.shared.v4.b32
// CHECK: mbarrier.arrive.expect_tx.shared.b64
// CHECK-COUNT-4: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK: setmaxnreg.inc.sync.aligned.u32 240;
// CHECK: ld.shared.b32
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK-NOT: ld.local
// CHECK-NOT: st.local

// The one-row programs (a layout row of 64 tokens; the plan's where the
// key blocks are not 64): one consumer warpgroup beside the producer (256
// threads at 128 registers, two blocks per SM); the producer walks the CSR
// blocks and issues K, Q and V by TMA; QK on m64n64k16, PV on m64n128k16.
// CHECK: .visible .entry blocksparse_heads_one_row(
// CHECK: .maxntid 256, 1, 1
// CHECK: .maxnreg 128
// CHECK: setmaxnreg.dec.sync.aligned.u32 24;
// CHECK: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK: setmaxnreg.inc.sync.aligned.u32 232;
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16

// fp8 flash (heads of 128) pinned to 224-key tiles: K and raw V come as
// boxes of 224 rows, V^T takes two 128-key atoms (the producer's warps 0-2
// transpose a second 32-key step into the second), QK is one m64n224k32
// per 32 dims, PV seven m64n128k32 key steps.
// CHECK: .visible .entry flash_fp8_keys224(
// CHECK: .maxntid 384, 1, 1
// CHECK: setmaxnreg.dec.sync.aligned.u32 24;
// CHECK: stmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// CHECK: setmaxnreg.inc.sync.aligned.u32 240;
// CHECK: wgmma.mma_async.sync.aligned.m64n224k32.f32.e4m3.e4m3
// CHECK-COUNT-7: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// CHECK-NOT: ld.local
// CHECK-NOT: st.local
// ptxas, per kernel (in the order it compiles them): no spills, no
// serialized wgmma (C7510-C7520 "Potential Performance Loss").
// PTXAS: Compiling entry function 'flash_fp8_keys224' for 'sm_90a'
// PTXAS-NEXT: Function properties for flash_fp8_keys224
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Compiling entry function 'flash_fp8_d64' for 'sm_90a'
// PTXAS-NEXT: Function properties for flash_fp8_d64
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used 128 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Compiling entry function 'flash_fp8_d256' for 'sm_90a'
// PTXAS-NEXT: Function properties for flash_fp8_d256
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Compiling entry function 'flash_d256' for 'sm_90a'
// PTXAS-NEXT: Function properties for flash_d256
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Compiling entry function 'flash_fp8' for 'sm_90a'
// PTXAS-NEXT: Function properties for flash_fp8
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Compiling entry function 'blocksparse_heads_one_row' for 'sm_90a'
// PTXAS-NEXT: Function properties for blocksparse_heads_one_row
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used 128 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Compiling entry function 'blocksparse_heads' for 'sm_90a'
// PTXAS-NEXT: Function properties for blocksparse_heads
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Compiling entry function 'flash_persistent_full' for 'sm_90a'
// PTXAS-NEXT: Function properties for flash_persistent_full
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Compiling entry function 'flash_persistent' for 'sm_90a'
// PTXAS-NEXT: Function properties for flash_persistent
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used 168 registers
// PTXAS-NOT: Potential Performance Loss
// PTXAS: Compiling entry function 'flash_causal' for 'sm_90a'
// PTXAS-NEXT: Function properties for flash_causal
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used 168 registers
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

func.func @blocksparse_heads_one_row(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x257xi32>, %col: memref<16x?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<16x257xi32>) col(%col : memref<16x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64, schedule = #attn.schedule<block_q = 64, block_n = 64, heads_per_program = 1, warps = 4, tma = true, producer_warps = 4>}
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

func.func @flash_fp8_keys224(%q: memref<?x16x128xf8E4M3FN>, %k: memref<?x4x128xf8E4M3FN>, %v: memref<?x4x128xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xf8E4M3FN>) k(%k : memref<?x4x128xf8E4M3FN>) v(%v : memref<?x4x128xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x16x128xbf16>) {schedule = #attn.schedule<block_q = 128, block_n = 224, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, pingpong = true>}
  return
}
