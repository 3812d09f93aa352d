// REQUIRES: nvvm-backend
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu=chip=sm_90a --verify-diagnostics | FileCheck %s

// sm_90a prefix prefill over bf16 caches in vLLM's layouts (split-x K
// cache, [D, page] V cache): the Hopper pipeline whose producer warpgroup
// gathers the cache pages instead of issuing TMA boxes (schedule
// producer_warps = 4 without tma). Q and the new tokens' K and V are dense:
// tensor maps (Q's boxes [32 tokens, 4 heads, 64 columns], K's and V's
// [128 keys, 1 head, 64]), the kernel's first three arguments; 384 threads.
// CHECK-LABEL: func.func @prefix
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%{{.*}}, %c4, %c64]
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%c128, %c1{{.*}}, %c64{{.*}}]
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%c128{{.*}}, %c1{{.*}}, %c64{{.*}}]
// CHECK-NOT: nvgpu.tma.create.descriptor
// CHECK: gpu.func @prefix(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %{{.*}}: memref<?x32x128xbf16>
// CHECK-SAME: attn.tensor_map_params = 3 : i64, known_block_size = array<i32: 384, 1, 1>, nvvm.maxnreg = 168 : i32
// The full barriers (K and V of each buffer, 0-3) count the 128 producer
// threads, Q's (8) the one expect_tx; the empty ones (4-7) the 256
// consumer threads.
// CHECK: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 9>
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c0{{.*}}], %c128
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c4{{.*}}], %c256
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c8{{.*}}], %c1
// The producer keeps 56 registers; its first thread loads Q by TMA, two
// 64-column atoms, and no thread copies Q.
// CHECK: nvvm.setmaxregister  decrease 56
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}[%c8{{.*}}], %c32768
// CHECK-NEXT: arith.constant
// CHECK-NOT: nvgpu.device_async_copy
// CHECK-COUNT-2: nvgpu.tma.async.load %{{.*}}[%{{.*}}], %{{.*}}[%c8
// The cache walk: once the consumers freed the buffer (tile t - 2), K(t)
// from the split-x cache and V(t) from the [D, page] cache, 16 copies each
// per thread, each tile's full barrier tracking them (noinc: it counts
// the threads), without waiting for them. Both keep the cache's layout
// (16-byte units: K in core matrices, V in 32-byte swizzled k steps, each
// [2048, 8]); V's full tiles copy whole chunks, a ragged one its bytes.
// CHECK: scf.for
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-COUNT-16: nvgpu.device_async_copy %arg6{{.*}} to memref<2048x8xbf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true} : !llvm.ptr<3>
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: scf.if
// CHECK-COUNT-16: nvgpu.device_async_copy %arg7{{.*}} to memref<2048x8xbf16, #gpu.address_space<workgroup>>
// CHECK: } else {
// CHECK-COUNT-16: nvgpu.device_async_copy %arg7{{.*}} to memref<2048x8xbf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true} : !llvm.ptr<3>
// Then the new tokens, ring positions numbered on, into 128-byte swizzled
// tiles ([atoms * rows, 64]) by TMA: once the buffer is free, the first
// producer thread expects a tile's bytes and issues its two atoms, the
// other 127 arrive plainly (the full barriers count 128 arrivals); no
// thread copies them.
// CHECK: scf.for
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c32768
// CHECK-COUNT-2: nvgpu.tma.async.load
// CHECK: } else {
// CHECK-NEXT: nvgpu.mbarrier.arrive
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c32768
// CHECK-COUNT-2: nvgpu.tma.async.load
// CHECK: } else {
// CHECK-NEXT: nvgpu.mbarrier.arrive
// The consumers take 224 registers, wait for Q (no staging of their own;
// TMA wrote it through the async proxy: no fence) and fence each buffer
// the producer filled before their MMAs read it.
// CHECK: nvvm.setmaxregister  increase 224
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvgpu.mbarrier.try_wait.parity %{{.*}}[%c8
// CHECK-NEXT: arith.constant 1.44269502
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-NEXT: "fence.proxy.async.shared::cta;"
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// The cache's K through no-swizzle descriptors (leading byte offset 2048
// between chunk columns, stride 128 between 8-key groups, mode 0):
// (2048 >> 4) << 16 | (128 >> 4) << 32.
// CHECK: arith.constant 34368126976 : i64
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// The cache's V through 32-byte swizzled ones (stride 256, mode 3):
// 1 << 16 | (256 >> 4) << 32 | 3 << 62, as i64.
// CHECK: arith.constant -4611685949707845632 : i64
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: gpu.return
func.func @prefix(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

// The pipeline's step across walks: the first PV of the new tokens' walk
// is that of the cache walk's last tile, whose V is key-major ([D, keys]:
// the MMA's B operand not transposed), while the new tokens' V is
// row-major (transposed). The last PV of the program may be either: the
// consumers pick it from the pending layout at run time.
// CHECK-LABEL: gpu.func @prefix_layouts
// CHECK: nvvm.setmaxregister  increase 224
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {$0, {{.*}}}, {$128, $129, $130, $131}, $132, p, 1, 1, 0;
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {$0, {{.*}}}, {$128, $129, $130, $131}, $132, p, 1, 1, 1;
func.func @prefix_layouts(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

// fp8 caches: the producer copies their bytes (16-byte cp.async of a
// key's 16 dims of the x = 16 K cache and a dim's 16 keys of a V page,
// the cache walk starting at a multiple of 16; no registers held) into
// a raw ring of two slots past the K/V ring, one tile
// ahead, then, once every producer thread's copies landed (its own
// barrier, id 5), reads them back 16 bytes at a time, converts them by
// pairs, applies the scales and writes K and V^T in the layouts the
// consumers read; fenced for the async proxy, released with a plain
// arrival. 230400 bytes of shared memory (161 KB + 64 KB of raw ring).
// CHECK-LABEL: func.func @prefix_fp8
// CHECK: gpu.launch_func @attn_kernels::@prefix_fp8 {{.*}} dynamic_shared_memory_size %c230400_i32
// CHECK: gpu.func @prefix_fp8
// CHECK: nvvm.setmaxregister  decrease 56
// CHECK: nvgpu.device_async_copy %arg6{{.*}}, 16, %{{.*}} {bypassL1} : memref<?x8x8x16x16xf8E4M3FN> to memref<1024x16xf8E4M3FN, #gpu.address_space<workgroup>>
// CHECK: scf.for
// CHECK: nvvm.barrier id = %c5_i32{{.*}} number_of_threads = %c128_i32
// CHECK: nvgpu.device_async_copy %arg7{{.*}}, 16, %{{.*}} {bypassL1} : memref<?x8x128x16xf8E4M3FN> to memref<1024x16xf8E4M3FN, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK: nvvm.barrier id = %c5_i32{{.*}} number_of_threads = %c128_i32
// CHECK: vector.load {{.*}} : memref<1024x16xf8E4M3FN, #gpu.address_space<workgroup>>, vector<16xf8E4M3FN>
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: "fence.proxy.async.shared::cta;"
// CHECK-NEXT: nvgpu.mbarrier.arrive
// CHECK: nvvm.setmaxregister  increase 224
func.func @prefix_fp8(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x8x16x16xf8E4M3FN>, %vc: memref<?x8x128x16xf8E4M3FN>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x8x16x16xf8E4M3FN>) v_cache(%vc : memref<?x8x128x16xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

// Unified prefill rows over fp8 NHD caches with one descale each: the same
// producer, loading each whole tile's K and V pages as raw bytes by TMA
// (heads of 128: boxes [1 block, 16 slots, 1 head, 128 bytes], one
// 128-byte swizzled atom a row) into the raw ring: the first producer
// thread expects both tiles' 32 KB on the slot's own mbarrier (10 + slot,
// one arrival) and issues eight pages of K and eight of V. A ragged tile
// is gathered (16-byte cp.async into the same swizzled rows, zero-filled)
// and the first thread arrives on the slot's barrier plainly. Every
// producer thread waits for the slot's phase, then dequantizes K and V as
// rows (a V page holds keys' rows, not V^T). Thread units go down the
// columns (row = unit % 128): the eight lanes that one 16-byte access
// serves at a time take eight rows' units, eight distinct swizzled chunks
// read and written (along a row, both atoms' halves of its units fell on
// the same four chunks, two lanes a bank). Q (bf16) comes by TMA too.
// CHECK-LABEL: func.func @unified_fp8
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%{{.*}}, %c4, %c64]
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%c1{{.*}}, %c16, %c1{{.*}}, %c128] : memref<*xf8E4M3FN>
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%c1{{.*}}, %c16{{.*}}, %c1{{.*}}, %c128{{.*}}] : memref<*xf8E4M3FN>
// CHECK: gpu.launch_func @attn_kernels::@unified_fp8 {{.*}} dynamic_shared_memory_size %c230400_i32
// CHECK: gpu.func @unified_fp8
// CHECK: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 12>
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c10], %c1
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c11], %c1
// CHECK: nvvm.setmaxregister  decrease 56
// CHECK: nvgpu.tma.async.load {{.*}} -> memref<32x4x64xbf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}[%[[RAW:.*]]], %c32768
// CHECK-COUNT-16: nvgpu.tma.async.load %{{.*}}[%c0{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}], %{{.*}}[%[[RAW]]] to %{{.*}} : <tensor = memref<1x16x1x128xf8E4M3FN, #gpu.address_space<workgroup>>
// CHECK: } else {
// CHECK: nvgpu.device_async_copy %arg4{{.*}}, 16, %{{.*}} {bypassL1} : memref<?x16x8x128xf8E4M3FN> to memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_copy %arg5{{.*}}, 16, %{{.*}} {bypassL1} : memref<?x16x8x128xf8E4M3FN> to memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
// CHECK: nvgpu.mbarrier.arrive %{{.*}}[%[[RAW]]]
// CHECK: scf.for
// CHECK: nvvm.barrier id = %c5_i32{{.*}} number_of_threads = %c128_i32
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK: nvvm.barrier id = %c5_i32{{.*}} number_of_threads = %c128_i32
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: %[[UNIT:[0-9]+]] = arith.addi %{{[0-9]+}}, %c0{{.*}} : index
// CHECK: arith.remui %[[UNIT]], %c128{{.*}} : index
// CHECK: arith.divui %[[UNIT]], %c128{{.*}} : index
// CHECK: vector.load {{.*}} : memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, vector<16xf8E4M3FN>
// CHECK: cvt.rn.f16x2.e4m3x2
// The tiles the consumers read stay bf16 ones of two atoms a row (the
// fp8 maps are no fp8 wgmma program's).
// CHECK: vector.store {{.*}} : memref<256x64xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: "fence.proxy.async.shared::cta;"
// CHECK-NEXT: nvgpu.mbarrier.arrive
// CHECK: nvvm.setmaxregister  increase 224
func.func @unified_fp8(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) k_descale(%ks : memref<1xf32>) v_descale(%vs : memref<1xf32>) out(%o : memref<?x32x128xbf16>) {attn.long_queries, attn.prefill_rows}
  return
}

// -----

// A pinned gathering producer where the program cannot have one (heads
// past 128, for which the producer's register split is not sized) is
// rejected.
func.func @gather_not_possible(%q: memref<?x32x256xbf16>, %k: memref<?x8x256xbf16>, %v: memref<?x8x256xbf16>, %kc: memref<?x8x32x16x8xbf16>, %vc: memref<?x8x256x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %o: memref<?x32x256xbf16>) {
  // expected-error @+1 {{asks for a producer warpgroup that gathers K/V with cp.async (producer_warps without tma), which only sm_90a prefix prefill and unified programs of warpgroups have}}
  attn.prefix_prefill q(%q : memref<?x32x256xbf16>) k(%k : memref<?x8x256xbf16>) v(%v : memref<?x8x256xbf16>) k_cache(%kc : memref<?x8x32x16x8xbf16>) v_cache(%vc : memref<?x8x256x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x256xbf16>) {schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4, warps = 4, producer_warps = 4>}
  return
}

// -----

// sm_90a unified prefill rows (attn.prefill_rows, bf16 caches like Q,
// NHD pages of 16 keys: whole TMA boxes, so the plan says tma): the same
// pipeline. Three tensor maps: Q's (boxes [32 tokens, 4 heads, 64
// columns]) and the caches' ([1 block, 16 slots, 1 head, 64 columns]).
// The walk starts on a page boundary. A whole tile's K and V come as
// eight pages of two atoms each, issued by the first producer thread
// with the tile's bytes, each page located through the block table
// (coordinates d, head, slot, block), the other threads arriving plainly;
// a ragged tile's rows are gathered into 128-byte swizzled tiles
// ([atoms * rows, 64], not the split-x cache's core matrices), 16 copies
// each per thread, zero-filled past the keys. The consumers multiply on
// wgmma m64n128k16.
// CHECK-LABEL: func.func @unified_prefill_rows
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%{{.*}}, %c4, %c64]
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%c1{{.*}}, %c16, %c1{{.*}}, %c64{{.*}}]
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%c1{{.*}}, %c16{{.*}}, %c1{{.*}}, %c64{{.*}}]
// CHECK-NOT: nvgpu.tma.create.descriptor
// CHECK: gpu.func @unified_prefill_rows(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %{{.*}}: memref<?x32x128xbf16>
// CHECK-SAME: attn.tensor_map_params = 3 : i64, known_block_size = array<i32: 384, 1, 1>, nvvm.maxnreg = 168 : i32
// CHECK: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 9>
// CHECK: nvvm.setmaxregister  decrease 56
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}[%c8{{.*}}], %c32768
// CHECK-COUNT-2: nvgpu.tma.async.load %{{.*}}[%{{.*}}], %{{.*}}[%c8
// CHECK: %[[PAGE:.*]] = arith.constant 16 : index
// CHECK: %[[LO:.*]] = arith.muli %{{.*}}, %[[PAGE]] : index
// CHECK: scf.for %{{.*}} = %[[LO]] to %{{.*}} step %c128
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c32768
// CHECK-COUNT-16: nvgpu.tma.async.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}], %{{.*}} to %{{.*}} : <tensor = memref<1x16x1x64xbf16, #gpu.address_space<workgroup>>
// CHECK: } else {
// CHECK-NEXT: nvgpu.mbarrier.arrive
// CHECK: } else {
// CHECK-COUNT-16: nvgpu.device_async_copy %arg4{{.*}} to memref<256x64xbf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true} : !llvm.ptr<3>
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c32768
// CHECK-COUNT-16: nvgpu.tma.async.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}], %{{.*}} to %{{.*}} : <tensor = memref<1x16x1x64xbf16, #gpu.address_space<workgroup>>
// CHECK: } else {
// CHECK-COUNT-16: nvgpu.device_async_copy %arg5{{.*}} to memref<256x64xbf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true} : !llvm.ptr<3>
// CHECK: nvvm.setmaxregister  increase 224
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
func.func @unified_prefill_rows(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {attn.long_queries, attn.prefill_rows}
  return
}

// -----

// Pages of 48 keys are no whole boxes of 128-key tiles: the producer
// threads gather every tile's rows (Q still by TMA, its one map).
// CHECK-LABEL: func.func @unified_prefill_rows_page48
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%{{.*}}, %c4, %c64]
// CHECK-NOT: nvgpu.tma.create.descriptor
// CHECK: gpu.func @unified_prefill_rows_page48(%arg0: !llvm.ptr, %{{.*}}: memref<?x32x128xbf16>
// CHECK-SAME: attn.tensor_map_params = 1 : i64
// CHECK: nvvm.setmaxregister  decrease 56
// CHECK-COUNT-2: nvgpu.tma.async.load %{{.*}}[%{{.*}}], %{{.*}}[%c8
// CHECK: scf.for
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-COUNT-16: nvgpu.device_async_copy %arg2{{.*}} to memref<256x64xbf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true} : !llvm.ptr<3>
// CHECK-NOT: nvgpu.tma.async.load
// CHECK: nvvm.setmaxregister  increase 224
func.func @unified_prefill_rows_page48(%q: memref<?x32x128xbf16>, %kc: memref<?x48x8x128xbf16>, %vc: memref<?x48x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x48x8x128xbf16>) v_cache(%vc : memref<?x48x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {attn.long_queries, attn.prefill_rows}
  return
}

// -----

// A pinned gathering producer on a unified op it cannot serve (split-KV
// outputs) is rejected.
func.func @unified_gather_not_possible(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>) {
  // expected-error @+1 {{asks for a producer warpgroup that gathers K/V with cp.async (producer_warps without tma), which only sm_90a prefix prefill and unified programs of warpgroups have}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) {schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8, producer_warps = 4, pingpong = true>}
  return
}

// -----

// TMA pinned on unified pages that are no whole boxes of the KV tile
// (pages of 48 keys, tiles of 128) is rejected, naming the rule.
func.func @unified_tma_pages_not_boxes(%q: memref<?x32x128xbf16>, %kc: memref<?x48x8x128xbf16>, %vc: memref<?x48x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  // expected-error @+1 {{and unified programs of a gathering producer whose pages are whole boxes of the KV tile (8 keys or more, dividing block_n or a multiple of it)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x48x8x128xbf16>) v_cache(%vc : memref<?x48x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8, tma = true, producer_warps = 4, pingpong = true>}
  return
}

// -----

// A persistent grid pinned on unified prefill rows (a gathering producer
// of TMA pages, which is not persistent) is rejected, naming the grid
// rather than TMA: the same schedule without persistent compiles.
func.func @unified_persistent_not_possible(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  // expected-error @+1 {{asks for a persistent grid, which only sm_90a flash programs over dense f16/bf16 K and V by TMA and block-sparse programs of one layout row have}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {min_query_len = 17 : i64, schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8, tma = true, producer_warps = 4, pingpong = true, persistent = true>}
  return
}
