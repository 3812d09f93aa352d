// REQUIRES: nvvm-backend
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu=chip=sm_90a | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_80" --convert-attn-to-gpu=chip=sm_80 | FileCheck %s --check-prefix=AMPERE

// sm_90a unified (split-KV decode): the plan's two K/V stages make the
// 64-row program one warpgroup on wgmma. Tile 0's copies are issued right
// after Q's (their own group), and Q is waited for with those two groups
// still pending; in the loop, tile t has landed once the groups committed
// before the empty one are done (wait 0 with two stages), then tile t + 1
// is issued into the other buffer and tile t computes. 82944 bytes of
// shared memory: Q [64 x 128], two [64 x 128] K and V buffers, 1 KB of
// alignment slack.
// CHECK-LABEL: func.func @split
// CHECK: gpu.launch_func @attn_kernels::@split {{.*}} threads in (%c128{{.*}} dynamic_shared_memory_size %c82944_i32
// CHECK: gpu.func @split
// CHECK-NOT: attn.streaming_copies
// CHECK-SAME: known_block_size
// CHECK: nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_create_group
// CHECK-NEXT: nvgpu.device_async_create_group
// CHECK-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 2 : i32}
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: scf.for %{{.*}} step %c64
// CHECK: nvgpu.device_async_create_group
// CHECK-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NEXT: "fence.proxy.async.shared::cta;"
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// sm_80 keeps one buffer on mma.sync (padded rows: 53248 bytes).
// AMPERE-LABEL: func.func @split
// AMPERE: dynamic_shared_memory_size %c53248_i32
// AMPERE-NOT: wgmma
// AMPERE: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
func.func @split(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>)
  return
}

// -----

// The attn.stream_pages hint (the vLLM drop-in's short split-KV segments)
// marks the sm_90a kernel for attn-nvvm-streaming-copies (its copies then
// take an L2 evict-first policy); sm_80 keeps upstream's copies, and so do
// unsplit programs (@three_stages below has no mark either way).
// CHECK-LABEL: func.func @stream
// CHECK: gpu.func @stream({{.*}}) kernel attributes {attn.streaming_copies,
// AMPERE-LABEL: func.func @stream
// AMPERE: gpu.func @stream
// AMPERE-NOT: attn.streaming_copies
// AMPERE-SAME: known_block_size
func.func @stream(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>) {attn.stream_pages}
  return
}

// -----

// A pinned schedule of three stages: tile 0 with Q, tile 1 before the
// loop, and in it tile t has landed with two groups still pending (the
// tile after it and the empty one).
// CHECK-LABEL: func.func @three_stages
// CHECK: dynamic_shared_memory_size %c115712_i32
// CHECK: gpu.func @three_stages
// CHECK-NOT: attn.streaming_copies
// CHECK-SAME: known_block_size
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 2 : i32}
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_create_group
// CHECK: scf.for %{{.*}} step %c64
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 2 : i32}
// CHECK: wgmma.mma_async
func.func @three_stages(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {attn.stream_pages, schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4, stages = 3>}
  return
}

// -----

// merge_states programs take four tokens of a head (the grid's first
// extent tokens / 4 + 1), one row per 32 lanes, each lane 4 of the 128
// dims. Merges of at most four segments read them four at a time, others
// sixteen at a time: that many loads of the segment maxima before the
// first max, and each lane's 4 numerators beside the denominator.
// CHECK-LABEL: func.func @merge
// CHECK: %[[T:.*]] = memref.dim %{{.*}}, %c0
// CHECK: %[[Q:.*]] = arith.divui %[[T]], %c4
// CHECK: %[[X:.*]] = arith.addi %c1, %[[Q]]
// CHECK: gpu.launch_func  @attn_kernels::@merge blocks in (%[[X]],
// CHECK-LABEL: gpu.func @merge
// CHECK: arith.divui %{{.*}}, %c32
// CHECK: arith.cmpi sle, %{{.*}}, %c4
// CHECK: scf.for
// CHECK-COUNT-4: memref.load %{{.*}} : memref<?x32x?xf32>
// CHECK-NEXT: arith.maximumf
// CHECK: scf.for {{.*}} -> (f32, f32, f32, f32, f32)
// CHECK: } else {
// CHECK: scf.for
// CHECK-COUNT-16: memref.load %{{.*}} : memref<?x32x?xf32>
// CHECK-NEXT: arith.maximumf
// CHECK: scf.for {{.*}} -> (f32, f32, f32, f32, f32)
func.func @merge(%p: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>, %o: memref<?x32x128xbf16>) {
  attn.merge_states partial(%p : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>) out(%o : memref<?x32x128xbf16>)
  return
}
