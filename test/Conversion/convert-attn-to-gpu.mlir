// REQUIRES: nvvm-backend
// RUN: attn-opt %s --split-input-file --attn-plan=target=nvvm --convert-attn-to-gpu --verify-diagnostics | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu=chip=sm_90a --verify-diagnostics | FileCheck %s --check-prefix=HOPPER
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_89" --convert-attn-to-gpu=chip=sm_89 --verify-diagnostics | FileCheck %s --check-prefix=ADA

// The host launches one block per program over a shape-only grid; the kernel
// is a warp program on the tensor cores.
// CHECK: module attributes {attn.manifest = "{\22format_version\22:2,\22kernels\22:[{\22grid\22:
// CHECK-SAME: \22name\22:\22flash\22,\22op\22:\22attn.flash\22,\22params\22:
// CHECK-SAME: \22shared_bytes\22:{{[0-9]+}},\22threads\22:128}
// CHECK-SAME: gpu.container_module
// CHECK-LABEL: func.func @flash
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: memref<?x8x64xbf16>, %{{[a-z0-9]+}}: memref<?x2x64xbf16>, %{{[a-z0-9]+}}: memref<?x2x64xbf16>, %[[CQ:[a-z0-9]+]]: memref<?xi32>,
// CHECK: memref.dim %[[Q]], %c0
// CHECK: memref.dim %[[CQ]], %c0
// CHECK: gpu.launch_func @attn_kernels::@flash blocks in (%{{.*}}, %c2{{.*}}, %c1{{.*}}) threads in (%c128{{.*}}, %c1{{.*}}, %c1{{.*}}) dynamic_shared_memory_size
// CHECK: gpu.module @attn_kernels
// CHECK: gpu.func @flash({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// Per-thread state in the entry block (promoted to registers): 128-row
// tiles give each of the 4 warps two 16-row fragments of a [32 x 64] output.
// CHECK: memref.alloca() : memref<64xf32>
// CHECK: memref.alloca() : memref<4xf32>
// CHECK: gpu.dynamic_shared_memory
// CHECK: gpu.block_id x
// CHECK: scf.while
// Q staged with 16-byte copies (cg, zero-filled past the rows: no branch);
// a negative scale negates the staged Q, so that the softmax can take row
// maxima of raw dot products and fold the positive factor into exp2's FMA.
// CHECK: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} {bypassL1} :
// CHECK: nvgpu.device_async_wait
// CHECK: gpu.barrier
// CHECK: arith.cmpf olt
// CHECK: scf.if
// CHECK: arith.negf {{.*}} : vector<8xbf16>
// CHECK: gpu.barrier
// The KV walk: one body for unmasked tiles and one for masked ones. QK on
// mma.sync (Q read from shared memory each tile: 2 fragments of a 64-key
// S fill the registers), softmax with quad shuffles and exp2 of one FMA,
// PV with transposed ldmatrix of V.
// CHECK: scf.for
// CHECK: scf.if
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: nvvm.mma.sync {{.*}} {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK-NOT: arith.select
// CHECK: gpu.shuffle  xor
// O is rescaled only when the reference max of some row of the warp moved.
// CHECK: nvvm.vote.sync  any
// CHECK: llvm.intr.fma
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK: scf.if
// CHECK: arith.mulf
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK: nvvm.mma.sync
// CHECK: } else {
// CHECK: arith.select
// CHECK: gpu.shuffle  xor
// CHECK: gpu.return
// sm_90a: the Hopper pipeline (the plan's tma, producer_warps = 4); heads
// of 64 take three consumer warpgroups of 64 rows (192-row programs, Q
// boxes of 48 tokens x 4 heads) and a producer warpgroup (512 threads,
// 128 registers each at launch), 128-key tiles, 1 KB of slack to align
// the swizzled tiles: Q 24 KB + 2 x (K + V) 32 KB.
// (convert-attn-to-gpu-tma.mlir checks the pipeline in detail; the
// warpgroup tile without it is checked there too.)
// HOPPER: \22name\22:\22flash\22,\22op\22:\22attn.flash\22,
// HOPPER-SAME: \22box\22:[48,4,64]
// HOPPER-SAME: \22shared_bytes\22:91136,\22threads\22:512
// HOPPER-LABEL: gpu.func @flash
// HOPPER-SAME: known_block_size = array<i32: 512, 1, 1>, nvvm.maxnreg = 128 : i32
// The program's sequence (sm_90a): the warp's lanes probe 32 cu_seqlens
// entries per round and a ballot picks the last that starts at or before
// the tile.
// HOPPER: scf.while
// HOPPER: gpu.thread_id x
// HOPPER: memref.load %{{.*}} : memref<?xi32>
// HOPPER: nvvm.vote.sync ballot %{{.*}}, %{{.*}} -> i32
// HOPPER: llvm.intr.ctpop
// HOPPER: nvvm.setmaxregister  decrease 24
// HOPPER: nvgpu.tma.async.load
// HOPPER: nvvm.setmaxregister  increase 160
// HOPPER: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// HOPPER: gpu.return
func.func @flash(%q: memref<?x8x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>,
                 %cq: memref<?xi32>, %ck: memref<?xi32>, %scale: f32, %o: memref<?x8x64xbf16>) {
  attn.flash q(%q : memref<?x8x64xbf16>) k(%k : memref<?x2x64xbf16>) v(%v : memref<?x2x64xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%scale)
      out(%o : memref<?x8x64xbf16>) {causal}
  return
}

// -----

// merge_states: a block per (token, head), threads over the head dim.
// CHECK-LABEL: func.func @merge
// CHECK: gpu.launch_func @attn_kernels::@merge blocks in (%{{.*}}, %{{.*}}, %c1{{.*}}) threads in (%c128
// CHECK: gpu.func @merge
// CHECK: gpu.thread_id x
func.func @merge(%p: memref<?x4x3x64xf32>, %m: memref<?x4x3xf32>, %s: memref<?x4x3xf32>, %o: memref<?x4x64xf16>) {
  attn.merge_states partial(%p : memref<?x4x3x64xf32>) segment_max(%m : memref<?x4x3xf32>)
      segment_sum(%s : memref<?x4x3xf32>) out(%o : memref<?x4x64xf16>)
  return
}

// -----

// f32 queries run on tf32 mma.sync: f32 tiles read by ldmatrix (one f32 a
// lane per matrix), operands rounded with cvt.rna, m16n8k8.
// CHECK-LABEL: gpu.func @f32
// CHECK: nvgpu.device_async_copy {{.*}}, 4, {{.*}} : memref<?x2x64xf32> to memref<64x68xf32, #gpu.address_space<workgroup>>
// CHECK: nvgpu.ldmatrix {{.*}} -> vector<4x1xf32>
// CHECK: "cvt.rna.tf32.f32 $0, $1;", "=r,f"
// CHECK: "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// HOPPER-LABEL: gpu.func @f32
// HOPPER-NOT: wgmma
// HOPPER: gpu.return
func.func @f32(%q: memref<?x2x64xf32>, %k: memref<?x2x64xf32>, %v: memref<?x2x64xf32>,
               %cq: memref<?xi32>, %ck: memref<?xi32>, %scale: f32, %o: memref<?x2x64xf32>) {
  attn.flash q(%q : memref<?x2x64xf32>) k(%k : memref<?x2x64xf32>) v(%v : memref<?x2x64xf32>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%scale)
      out(%o : memref<?x2x64xf32>)
  return
}

// -----

// Pinned schedules beyond the launch limits or the unrolled-body budget get
// a diagnostic that names the limit, never an abort or minutes of compile.
func.func @body_beyond_budget(%q: memref<?x8x128xf16>, %k: memref<?x2x128xf16>, %v: memref<?x2x128xf16>,
               %cq: memref<?xi32>, %ck: memref<?xi32>, %scale: f32, %o: memref<?x8x128xf16>) {
  // expected-error @+1 {{unrolls 128 rows per warp with 768 f32 accumulators per lane; the budget is 64 rows and 512 accumulators}}
  attn.flash q(%q : memref<?x8x128xf16>) k(%k : memref<?x2x128xf16>) v(%v : memref<?x2x128xf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%scale)
      out(%o : memref<?x8x128xf16>)
      {schedule = #attn.schedule<block_q = 1024, block_n = 64, heads_per_program = 1, warps = 8>}
  return
}

// -----

func.func @threads_beyond_limit(%q: memref<?x8x128xf16>, %k: memref<?x2x128xf16>, %v: memref<?x2x128xf16>,
               %cq: memref<?xi32>, %ck: memref<?xi32>, %scale: f32, %o: memref<?x8x128xf16>) {
  // expected-error @+1 {{needs 4096 threads}}
  attn.flash q(%q : memref<?x8x128xf16>) k(%k : memref<?x2x128xf16>) v(%v : memref<?x2x128xf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%scale)
      out(%o : memref<?x8x128xf16>)
      {schedule = #attn.schedule<block_q = 2048, block_n = 16, heads_per_program = 1>}
  return
}

// -----

// A [D, page]-major V cache is staged transposed with 16-byte copies and
// read with plain ldmatrix in the cache walk; the new tokens' V
// ([tokens, heads, D]) is read with ldmatrix.trans. 128-row tiles are
// double-buffered: one wait and one barrier per KV tile, with the lane
// coordinates pinned per tile so that LLVM keeps the shared-memory
// addresses in the loop.
// CHECK-LABEL: func.func @prefix_bf16_cache
// CHECK: gpu.func @prefix_bf16_cache
// CHECK: scf.for
// CHECK: llvm.inline_asm has_side_effects "mov.b32 $0, $1;", "=r,r"
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: transpose = true
// CHECK: scf.for
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK: gpu.return
func.func @prefix_bf16_cache(
    %q: memref<?x8x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>,
    %k_cache: memref<?x2x8x16x8xbf16>, %v_cache: memref<?x2x64x16xbf16>,
    %block_table: memref<?x?xi32>, %query_start: memref<?xi32>, %seq_lens: memref<?xi32>,
    %scale: f32, %out: memref<?x8x64xbf16>) {
  attn.prefix_prefill q(%q : memref<?x8x64xbf16>) k(%k : memref<?x2x64xbf16>)
      v(%v : memref<?x2x64xbf16>) k_cache(%k_cache : memref<?x2x8x16x8xbf16>)
      v_cache(%v_cache : memref<?x2x64x16xbf16>) block_table(%block_table : memref<?x?xi32>)
      query_start(%query_start : memref<?xi32>) seq_lens(%seq_lens : memref<?xi32>)
      scale(%scale) out(%out : memref<?x8x64xbf16>)
  return
}

// -----

// fp8 Q and K on sm_89 and up: staged as stored (8-byte copies into a raw
// fp8 view of the tiles), read by ldmatrix as pairs and multiplied on
// mma.sync m16n8k32 e4m3; q_scale * k_scale scales the dot products (here
// folded into exp2's factor; a negative factor flips the fp8 sign bits of
// the staged Q). PV stays on m16n8k16 with V dequantized to f16. sm_80
// dequantizes Q and K to f16 too.
// CHECK-LABEL: gpu.func @flash_fp8
// CHECK-NOT: m16n8k32
// CHECK: gpu.return
// ADA-LABEL: gpu.func @flash_fp8
// ADA: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} : memref<?x16x128xf8E4M3FN> to memref<128x272xf8E4M3FN, #gpu.address_space<workgroup>>
// ADA: arith.mulf
// ADA: arith.cmpf olt
// ADA: arith.xori {{.*}} : vector<8xi16>
// ADA: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} : memref<?x16x128xf8E4M3FN> to memref<32x272xf8E4M3FN, #gpu.address_space<workgroup>>
// ADA: llvm.inline_asm "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32
// ADA: nvvm.mma.sync {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32)
// ADA: gpu.return
func.func @flash_fp8(%q: memref<?x16x128xf8E4M3FN>, %k: memref<?x16x128xf8E4M3FN>,
    %v: memref<?x16x128xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32,
    %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>,
    %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xf8E4M3FN>) k(%k : memref<?x16x128xf8E4M3FN>)
      v(%v : memref<?x16x128xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>)
      cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>)
      k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>)
      out(%o : memref<?x16x128xbf16>) {causal}
  return
}

// -----

// A pinned schedule asking for TMA where the copies cannot be made (fp8
// K/V, dequantized while staged; or any chip but sm_90a) is rejected.
func.func @tma_not_possible(%q: memref<?x4x128xf8E4M3FN>, %k: memref<?x4x128xf8E4M3FN>, %v: memref<?x4x128xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x4x128xbf16>) {
  // expected-error @+1 {{asks for TMA, which only sm_90a flash and block-sparse programs of warpgroups have, over dense f16/bf16 K and V}}
  attn.flash q(%q : memref<?x4x128xf8E4M3FN>) k(%k : memref<?x4x128xf8E4M3FN>) v(%v : memref<?x4x128xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x4x128xbf16>) {schedule = #attn.schedule<block_q = 128, block_n = 128, heads_per_program = 1, warps = 8, tma = true>}
  return
}

// -----

// fp8 wgmma programs transpose V into 128-key atoms: tiles of 256 keys
// (which spilled beside O, S and P) are rejected, as everywhere but sm_90a.
func.func @tma_fp8_keys_past_224(%q: memref<?x4x128xf8E4M3FN>, %cq: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %o: memref<?x4x128xbf16>) {
  // expected-error @+1 {{fp8 Q, K and V: 128 keys, or for heads of 128 on warps = 8 whole 32-key steps up to 224}}
  attn.flash q(%q : memref<?x4x128xf8E4M3FN>) k(%q : memref<?x4x128xf8E4M3FN>) v(%q : memref<?x4x128xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%cq : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%qs : memref<1xf32>) v_scale(%qs : memref<1xf32>) p_scale(%qs : memref<1xf32>) out(%o : memref<?x4x128xbf16>) {schedule = #attn.schedule<block_q = 128, block_n = 256, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, pingpong = true>}
  return
}

// -----

// A producer warpgroup shares the registers with one, two or three consumer
// warpgroups: four (256 rows, 640 threads) would not launch.
func.func @tma_four_consumer_warpgroups(%q: memref<?x4x64xbf16>, %cq: memref<?xi32>, %s: f32, %o: memref<?x4x64xbf16>) {
  // expected-error @+1 {{one to three consumer warpgroups, warps 4, 8 or 12 (12: flash only), with producer_warps}}
  attn.flash q(%q : memref<?x4x64xbf16>) k(%q : memref<?x4x64xbf16>) v(%q : memref<?x4x64xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%cq : memref<?xi32>) scale(%s) out(%o : memref<?x4x64xbf16>) {schedule = #attn.schedule<block_q = 256, block_n = 128, heads_per_program = 1, warps = 16, tma = true, producer_warps = 4>}
  return
}

// -----

// More warps than 16-row slabs split each tile's keys, which only
// attn.unified programs (decode rows) do: flash rejects the schedule.
func.func @flash_key_split_warps(%q: memref<?x4x64xbf16>, %cq: memref<?xi32>, %s: f32, %o: memref<?x4x64xbf16>) {
  // expected-error @+1 {{gives a row slab several warps (more warps than 16-row slabs), which split the keys of each tile only in attn.unified programs (decode rows)}}
  attn.flash q(%q : memref<?x4x64xbf16>) k(%q : memref<?x4x64xbf16>) v(%q : memref<?x4x64xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%cq : memref<?xi32>) scale(%s) out(%o : memref<?x4x64xbf16>) {schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 1, warps = 4>}
  return
}

// -----

// Programs over two layout rows (block_q twice the query block) need the
// sm_90a pipeline that walks the rows' union (two consumer warpgroups
// beside a TMA producer); other schedules, and chips, reject them.
func.func @blocksparse_two_layout_rows_without_pipeline(%q: memref<?x4x128xbf16>, %cq: memref<?xi32>, %crow: memref<4x?xi32>, %col: memref<4x?xi32>, %s: f32, %o: memref<?x4x128xbf16>) {
  // expected-error @+1 {{walks two layout rows a program (block_q twice the query block), which only sm_90a block-sparse programs of two consumer warpgroups in pingpong beside a TMA producer have}}
  attn.blocksparse q(%q : memref<?x4x128xbf16>) k(%q : memref<?x4x128xbf16>) v(%q : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%cq : memref<?xi32>) crow(%crow : memref<4x?xi32>) col(%col : memref<4x?xi32>) scale(%s) out(%o : memref<?x4x128xbf16>) {block_size = 64 : i64, schedule = #attn.schedule<block_q = 128, block_n = 64, heads_per_program = 1, warps = 8>}
  return
}

// -----

// Philox dropout (docs/semantics.md, section 7) multiplies in 32 bits on
// NVVM: the high words through mul.hi.u32, the low ones as i32 products. A
// 64-bit product left its xors and the counter in 64-bit PTX.
// CHECK-LABEL: gpu.func @dropout_philox
// CHECK-NOT: arith.extui {{.*}} : i32 to i64
// CHECK: llvm.call_intrinsic "llvm.nvvm.mulhi.ui"(%{{.*}}, %{{.*}}) : (i32, i32) -> i32
// CHECK-NEXT: arith.muli %{{.*}}, %{{.*}} : i32
// CHECK-NOT: arith.extui {{.*}} : i32 to i64
// CHECK: gpu.return
func.func @dropout_philox(%q: memref<?x4x64xbf16>, %k: memref<?x4x64xbf16>, %v: memref<?x4x64xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %p: f32, %seed: i64, %off: i64, %o: memref<?x4x64xbf16>) {
  attn.flash q(%q : memref<?x4x64xbf16>) k(%k : memref<?x4x64xbf16>) v(%v : memref<?x4x64xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) dropout(%p, %seed, %off) out(%o : memref<?x4x64xbf16>)
  return
}
