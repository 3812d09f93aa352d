// REQUIRES: nvvm-backend
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu=chip=sm_90a | FileCheck %s

// sm_90a programs under pinned schedules that step back from the plan's
// Hopper pipeline (convert-attn-to-gpu-tma.mlir): the benchmark compares
// them in one run (bench/bench_gpu.py variants).

// The warpgroup tile without the Hopper pipeline (a pinned schedule
// without tma; prefix prefill's programs on sm_90a): two warpgroups of 64
// rows (256 threads) over 64-key tiles (heads of 64), with 1 KB of slack
// to align the swizzled tiles: Q 16 KB + 2 x (K + V) 16 KB.
// CHECK: \22name\22:\22flash_warpgroup_tile\22,\22op\22:\22attn.flash\22,
// CHECK-SAME: \22shared_bytes\22:50176,\22threads\22:256
// CHECK-LABEL: func.func @flash_warpgroup_tile
// CHECK-LABEL: gpu.func @flash_warpgroup_tile
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// One 16-row fragment per warp: a [16 x 64] output slab.
// CHECK: memref.alloca() : memref<32xf32>
// CHECK: memref.extract_aligned_pointer_as_index
// Q staged into 128-byte swizzle atoms (chunk ^ row % 8), then fenced for
// the tensor cores' async proxy before the barrier.
// CHECK: arith.xori
// CHECK: nvgpu.device_async_copy {{.*}} : memref<?x8x64xbf16> to memref<128x64xbf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_wait
// CHECK-NEXT: llvm.inline_asm has_side_effects "fence.proxy.async.shared::cta;"
// CHECK-NEXT: gpu.barrier
// CHECK: scf.for
// A tile is two online-softmax steps of 32 keys. QK of both halves is
// issued at once (4 k steps of m64n32k16 each, A (Q) and B (K) from K-major
// descriptors, the first from zero: scale-d 0) as two groups.
// CHECK: "wgmma.fence.sync.aligned;"
// CHECK: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;{{.*}}, %c0_i32
// CHECK-COUNT-3: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// CHECK: "wgmma.commit_group.sync.aligned;"
// The first half's softmax (the mma.sync one: same accumulator layout)
// waits only for its own group.
// CHECK-NEXT: "wgmma.wait_group.sync.aligned 1;"
// CHECK-NEXT: llvm.inline_asm has_side_effects ""
// CHECK: gpu.shuffle  xor
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// PV of the first half (2 key steps, P from four registers, V N-major:
// imm-trans-b 1) runs under the second half's softmax.
// CHECK: "wgmma.fence.sync.aligned;"
// CHECK-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {$0, {{.*}}}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;
// CHECK-NOT: wgmma.mma_async
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-NOT: wgmma.wait_group
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: "wgmma.fence.sync.aligned;"
// CHECK-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {$0, {{.*}}}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-NEXT: "wgmma.wait_group.sync.aligned 0;"
// CHECK: gpu.return
func.func @flash_warpgroup_tile(%q: memref<?x8x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>,
                 %cq: memref<?xi32>, %ck: memref<?xi32>, %scale: f32, %o: memref<?x8x64xbf16>) {
  attn.flash q(%q : memref<?x8x64xbf16>) k(%k : memref<?x2x64xbf16>) v(%v : memref<?x2x64xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%scale)
      out(%o : memref<?x8x64xbf16>) {causal, schedule = #attn.schedule<block_q = 32, block_n = 64, heads_per_program = 4, warps = 8>}
  return
}

// -----

// tma without producer_warps (pinned): every thread computes; thread 0
// also issues each tile's four boxes on one full mbarrier, and every thread
// arrives on the buffer's empty one.
// CHECK-LABEL: func.func @tma_without_producer
// CHECK: gpu.func @tma_without_producer
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK-NOT: nvvm.setmaxregister
// CHECK: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}[%{{.*}}], %c65536
// CHECK-COUNT-4: nvgpu.tma.async.load
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-COUNT-4: nvgpu.tma.async.load
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.arrive %
// CHECK-NOT: nvvm.barrier id
// CHECK: gpu.return
func.func @tma_without_producer(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {schedule = #attn.schedule<block_q = 128, block_n = 128, heads_per_program = 1, warps = 8, tma = true>}
  return
}

// -----

// persistent (pinned): the mbarriers (the consumers' release of Q, and
// the full and empty barriers of two words that hand claimed programs
// over) are initialized once, then each role loops over the block's
// programs, registers moved once before the loops. The manifest marks the
// kernel so that the runtime launches at most one block per SM.
// CHECK: \22name\22:\22flash_persistent\22,\22op\22:\22attn.flash\22,\22params\22
// CHECK-SAME: \22persistent\22:true
// A block starts with the program of its id and then walks the ones its
// producer's first thread claims from the module's counter (zero at load;
// the launch's last claim leaves it zero), handed over in two words of
// shared memory.
// CHECK: memref.global "private" @attn_claimed_programs : memref<2xi32, #gpu.address_space<workgroup>> = uninitialized
// CHECK-NEXT: llvm.mlir.global internal @attn_program_counter(0 : i32) {addr_space = 1 : i32, alignment = 4 : i64} : i32
// CHECK-LABEL: gpu.func @flash_persistent
// CHECK-SAME: known_block_size = array<i32: 384, 1, 1>
// CHECK-SAME: nvvm.maxnreg = 168
// CHECK: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 14>
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c9], %c256
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c10], %c1
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c12], %c384
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c11], %c1
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c13], %c384
// CHECK: gpu.barrier
// CHECK: gpu.grid_dim  z
// CHECK: gpu.block_id  z
// CHECK: scf.if
// The producer: 32 registers (its loop needs more than the 24 of the
// non-persistent producer), then its loop while the program is one of the
// grid's. Its thread 256 claims the next program (a relaxed atomic add at
// the program's start), issues K(0), waits for the previous program's
// release of Q (from the second program on), issues Q, then V(0). After
// the program it waits until every thread has read the word's previous
// claim, stores program blocks + claim, resets the counter on the
// launch's last claim and arrives on the word's full barrier; every
// thread then reads the word and arrives on its empty barrier. Each role
// computes the grid extents again after setmaxnreg, from sizes and ids
// read through opaque movs (ptxas spills values that live across
// setmaxnreg).
// CHECK: nvvm.setmaxregister  decrease 32
// CHECK-NEXT: arith.constant
// CHECK: memref.dim %arg3
// CHECK-NEXT: arith.index_cast
// CHECK-NEXT: llvm.inline_asm has_side_effects "mov.b64 $0, $1;"
// CHECK: llvm.inline_asm has_side_effects "mov.u32 $0, %ctaid.x;"
// CHECK: scf.while {{.*}} : (i32, i32) -> (i32, i32) {
// CHECK-NEXT: arith.cmpi ult
// CHECK-NEXT: scf.condition
// CHECK: %[[CLAIM:.*]] = scf.if %{{.*}} -> (i32) {
// CHECK: llvm.atomicrmw add %{{.*}}, %{{.*}} syncscope("device") monotonic : !llvm.ptr<1>, i32
// Causal programs are claimed tile-major: the query tile is the program's
// number over the head groups, the head group its remainder.
// CHECK: arith.divui %{{.*}}, %[[GROUPS:.*]] : i32
// CHECK-NEXT: arith.remui %{{.*}}, %[[GROUPS]] : i32
// CHECK: nvgpu.tma.async.load
// CHECK: nvgpu.mbarrier.try_wait.parity %{{.*}}[%c9{{.*}}]
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}[%c8{{.*}}], %c32768
// CHECK: nvgpu.tma.async.load
// CHECK: %[[WORDS:.*]] = memref.get_global @attn_claimed_programs
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: %[[NEXT:.*]] = arith.addi %[[CLAIM]], %{{.*}} : i32
// CHECK-NEXT: memref.store %[[NEXT]], %[[WORDS]]
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %[[CLAIM]]
// CHECK-NEXT: scf.if %[[LAST]] {
// CHECK: llvm.store %{{.*}}, %{{.*}} : i32, !llvm.ptr<1>
// CHECK: nvgpu.mbarrier.arrive
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-NEXT: %[[PNEXT:.*]] = memref.load %[[WORDS]]
// CHECK: nvgpu.mbarrier.arrive
// CHECK: scf.yield %{{.*}}, %[[PNEXT]] : i32, i32
// CHECK: } else {
// The consumers: 232 registers, their loop; Q's phase is the program
// count's parity; the last step releases Q; after the program, the word.
// CHECK: nvvm.setmaxregister  increase 232
// CHECK: scf.while {{.*}} : (i32, i32) -> (i32, i32) {
// CHECK: nvgpu.mbarrier.try_wait.parity %{{.*}}[%c8{{.*}}]
// CHECK: wgmma.mma_async
// CHECK: nvgpu.mbarrier.arrive %{{.*}}[%c9{{.*}}]
// CHECK: %[[CWORDS:.*]] = memref.get_global @attn_claimed_programs
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-NEXT: memref.load %[[CWORDS]]
// CHECK: nvgpu.mbarrier.arrive
// CHECK: gpu.return
func.func @flash_persistent(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>,
                 %cq: memref<?xi32>, %ck: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%scale)
      out(%o : memref<?x16x128xbf16>) {causal, schedule = #attn.schedule<block_q = 128, block_n = 128, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, pingpong = true, persistent = true>}
  return
}

// -----

// persistent without the causal mask: programs claimed in sections of
// the head groups whose K and V (for an average sequence: k's rows times
// 2 x 128 x 2 bytes over the sequences) fill 1 MB, at least one group and
// at most all, spread evenly over the sections: each section's tiles in
// turn, with the section's groups. Program `linear`: its section and place in it,
// the section's first group and groups (the last may hold fewer), then
// its tile and group.
// CHECK-LABEL: gpu.func @flash_persistent_full
// CHECK: %[[BYTES:.*]] = arith.muli %{{.*}}, %c512 : index
// CHECK: %[[PER:.*]] = arith.divui %[[BYTES]], %{{.*}} : index
// CHECK: %[[PER1:.*]] = arith.maxui %[[PER]], %c1{{.*}} : index
// CHECK-NEXT: arith.divui %c1048576, %[[PER1]] : index
// CHECK: arith.minui %{{.*}}, %c1073741824 : index
// CHECK: %[[FIT:.*]] = arith.minui %{{.*}}, %{{.*}} : i32
// CHECK-NEXT: %[[FIT1:.*]] = arith.maxui %c1_i32{{.*}}, %[[FIT]] : i32
// CHECK-NEXT: %[[COUNT:.*]] = arith.ceildivui %[[GROUPS:.*]], %[[FIT1]] : i32
// CHECK-NEXT: %[[SG:.*]] = arith.ceildivui %[[GROUPS]], %[[COUNT]] : i32
// CHECK-NEXT: arith.muli %[[SG]], %{{.*}} : i32
// The producer (its copies of those values after setmaxnreg):
// CHECK: nvvm.setmaxregister  decrease 32
// CHECK: scf.while {{.*}} : (i32, i32) -> (i32, i32) {
// CHECK: llvm.atomicrmw add
// CHECK: %[[SECTION:.*]] = arith.divui %[[LINEAR:.*]], %[[SP:.*]] : i32
// CHECK-NEXT: %[[WITHIN:.*]] = arith.remui %[[LINEAR]], %[[SP]] : i32
// CHECK-NEXT: %[[G0:.*]] = arith.muli %[[SECTION]], %[[PSG:.*]] : i32
// CHECK-NEXT: %[[LEFT:.*]] = arith.subi %{{.*}}, %[[G0]] : i32
// CHECK-NEXT: %[[IN:.*]] = arith.minui %[[PSG]], %[[LEFT]] : i32
// CHECK-NEXT: arith.divui %[[WITHIN]], %[[IN]] : i32
// CHECK-NEXT: %[[R:.*]] = arith.remui %[[WITHIN]], %[[IN]] : i32
// CHECK-NEXT: arith.addi %[[G0]], %[[R]] : i32
// The consumers likewise.
// CHECK: nvvm.setmaxregister  increase 232
// CHECK: scf.while {{.*}} : (i32, i32) -> (i32, i32) {
// CHECK: arith.divui %{{.*}}, %{{.*}} : i32
// CHECK-NEXT: arith.remui
// CHECK-NEXT: arith.muli
// CHECK-NEXT: arith.subi
// CHECK-NEXT: arith.minui
func.func @flash_persistent_full(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>,
                 %cq: memref<?xi32>, %ck: memref<?xi32>, %scale: f32, %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%scale)
      out(%o : memref<?x16x128xbf16>) {schedule = #attn.schedule<block_q = 128, block_n = 128, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, pingpong = true, persistent = true>}
  return
}
