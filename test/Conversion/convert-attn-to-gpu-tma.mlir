// REQUIRES: nvvm-backend
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu=chip=sm_90a | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_80" --convert-attn-to-gpu=chip=sm_80 | FileCheck %s --check-prefix=AMPERE

// sm_90a flash of bf16 Q/K/V with a head dim of 64-column atoms takes the
// Hopper pipeline (the plan's tma, producer_warps, pingpong). K, V and Q
// come through tensor maps, the kernel's three leading parameters. The
// manifest names the operand each describes and its box (Q's: block_q
// tokens x heads_per_program heads x 64); the host models them with
// upstream's descriptor op.
// CHECK: module attributes {attn.manifest = "{\22format_version\22:2,
// CHECK-SAME: \22params\22:[{\22arg\22:1,\22box\22:[128,1,64],\22dtype\22:\22bf16\22,\22kind\22:\22tensor_map\22,\22operand\22:1,\22swizzle\22:128},{\22arg\22:2,\22box\22:[128,1,64],\22dtype\22:\22bf16\22,\22kind\22:\22tensor_map\22,\22operand\22:2,\22swizzle\22:128},{\22arg\22:0,\22box\22:[128,1,64],\22dtype\22:\22bf16\22,\22kind\22:\22tensor_map\22,\22operand\22:0,\22swizzle\22:128},{\22arg\22:0,
// CHECK-SAME: \22threads\22:384
// CHECK-LABEL: func.func @dense
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%{{.*}}, %{{.*}}, %{{.*}}] : memref<*xbf16> -> <tensor = memref<128x1x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: gpu.launch_func @attn_kernels::@dense {{.*}} args(%{{.*}} : !llvm.ptr, %{{.*}} : !llvm.ptr, %{{.*}} : !llvm.ptr, %arg0 : memref<?x16x128xbf16>
// CHECK: gpu.func @dense(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: memref<?x16x128xbf16>
// CHECK-SAME: attn.tensor_map_params = 3 : i64, known_block_size = array<i32: 384, 1, 1>, nvvm.maxnreg = 168 : i32
// Nine mbarriers: full (one arrival and the copy engine's bytes) and empty
// (the 256 consumer threads) for K and V of each buffer, and Q's.
// CHECK: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 9>
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c0{{.*}}], %c1
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c4{{.*}}], %c256
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c8{{.*}}], %c1
// CHECK: nvvm.fence.mbarrier.init
// The roles split right away: warps 8-11 give registers away and one
// thread issues K(t), then (for t = 0) Q (two atoms of [128 x 64]), then
// V(t), each on its own full barrier once the consumers freed the buffer
// (tile t - 2).
// CHECK: gpu.barrier
// CHECK: nvvm.setmaxregister  decrease 24
// CHECK: scf.for
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c32768
// CHECK-COUNT-2: nvgpu.tma.async.load
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}[%c8{{.*}}], %c32768
// CHECK-COUNT-2: nvgpu.tma.async.load {{.*}} to %{{.*}} : <tensor = memref<128x1x64xbf16
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c32768
// CHECK-COUNT-2: nvgpu.tma.async.load
// The consumers take the registers. Step 0 (QK(0) only): warpgroup 0
// starts without waiting for its turn, then hands it to warpgroup 1.
// CHECK: nvvm.setmaxregister  increase 240
// The consumers wait for Q (no per-thread staging left).
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvgpu.mbarrier.try_wait.parity %{{.*}}[%c8
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: nvgpu.mbarrier.arrive
// Steps 1 .. T - 1: QK(t) (8 k steps over D = 128) and PV(t - 1) (8 key
// steps, P from registers) issued in one turn; the softmax of tile t runs
// under PV(t - 1) (wait_group 1 waits for QK(t) only), K(t) is released,
// then V(t - 1) once PV(t - 1) is done.
// CHECK: scf.for
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvvm.barrier id =
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {$0, {{.*}}}, {$128, $129, $130, $131}, $132, p, 1, 1, 1;
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK: nvvm.barrier.arrive id =
// CHECK: "wgmma.wait_group.sync.aligned 1;"
// CHECK: nvgpu.mbarrier.arrive
// CHECK: llvm.nvvm.ex2.approx.ftz.f
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: nvgpu.mbarrier.arrive
// Step T: PV(T - 1).
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {$0, {{.*}}}, {$128, $129, $130, $131}, $132, p, 1, 1, 1;
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: gpu.return
// AMPERE-LABEL: func.func @dense
// AMPERE-NOT: tensor_map
// AMPERE-NOT: nvgpu.tma
// AMPERE: nvgpu.device_async_copy
func.func @dense(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {causal}
  return
}

// -----

// fp8 K/V of heads other than 64, 128 and 256 (dequantized while staged;
// those run on fp8 wgmma: convert-attn-to-gpu-fp8-wgmma.mlir) and head dims
// that do not fill whole 64-column atoms keep per-thread staging.
// CHECK-LABEL: func.func @fp8_kv
// CHECK-NOT: nvgpu.tma
// CHECK: gpu.func @fp8_kv(%{{.*}}: memref<?x8x192xf8E4M3FN>
// CHECK-NOT: nvgpu.tma.async.load
// CHECK: return
func.func @fp8_kv(%q: memref<?x8x192xf8E4M3FN>, %k: memref<?x8x192xf8E4M3FN>, %v: memref<?x8x192xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x8x192xbf16>) {
  attn.flash q(%q : memref<?x8x192xf8E4M3FN>) k(%k : memref<?x8x192xf8E4M3FN>) v(%v : memref<?x8x192xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x8x192xbf16>)
  return
}

// -----

// CHECK-LABEL: func.func @head_dim_96
// CHECK-NOT: nvgpu.tma
// CHECK: return
func.func @head_dim_96(%q: memref<?x8x96xbf16>, %k: memref<?x8x96xbf16>, %v: memref<?x8x96xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x8x96xbf16>) {
  attn.flash q(%q : memref<?x8x96xbf16>) k(%k : memref<?x8x96xbf16>) v(%v : memref<?x8x96xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x8x96xbf16>)
  return
}

// -----

// sm_90a block-sparse over per-head layouts of 64-key blocks: programs of
// two layout rows. The producer merges the rows' CSR lists (a loop over
// both), writes each tile's entry into 16-byte aligned shared words, then
// issues the tile's K and V as two blocks' boxes of 64 rows each (per
// 64-column atom); the consumers loop on the entries until the one that
// ends the walk. Other chips keep their programs of one layout row.
// CHECK-LABEL: func.func @blocksparse_layout_row_pairs
// CHECK: gpu.func @blocksparse_layout_row_pairs({{.*}}) workgroup(%[[TILES:.*]] : memref<16xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK: scf.while
// CHECK: memref.store %{{.*}}, %[[TILES]][%{{.*}}] : memref<16xi32, #gpu.address_space<workgroup>>
// CHECK: nvgpu.mbarrier.arrive.expect_tx
// CHECK-COUNT-4: nvgpu.tma.async.load {{.*}} : <tensor = memref<64x1x64xbf16, #gpu.address_space<workgroup>>
// CHECK: scf.while
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: memref.load %[[TILES]]
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// AMPERE-LABEL: func.func @blocksparse_layout_row_pairs
// AMPERE-NOT: workgroup(
// AMPERE: return
func.func @blocksparse_layout_row_pairs(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x?xi32>, %col: memref<16x?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<16x?xi32>) col(%col : memref<16x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64}
  return
}

// -----

// sm_90a block-sparse under one shared layout (GQA packing: 32 tokens x 4
// heads, one layout row a program): the producer pairs the row's blocks
// of 64 into 128-key tiles as it pairs two rows' union above.
// CHECK-LABEL: func.func @blocksparse_paired_blocks
// CHECK: gpu.func @blocksparse_paired_blocks({{.*}}) workgroup(%[[TILES:.*]] : memref<16xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK: memref.store %{{.*}}, %[[TILES]][%{{.*}}] : memref<16xi32, #gpu.address_space<workgroup>>
// CHECK-COUNT-4: nvgpu.tma.async.load {{.*}} : <tensor = memref<64x1x64xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.load %[[TILES]]
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// AMPERE-LABEL: func.func @blocksparse_paired_blocks
// AMPERE-NOT: workgroup(
// AMPERE: return
func.func @blocksparse_paired_blocks(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<1x?xi32>, %col: memref<1x?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<1x?xi32>) col(%col : memref<1x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64}
  return
}
