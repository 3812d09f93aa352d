// RUN: attn-opt %s --attn-plan | FileCheck %s
// RUN: attn-opt %s --attn-plan=target=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_90a" | FileCheck %s --check-prefix=HOPPER
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_89" | FileCheck %s --check-prefix=ADA
// RUN: attn-opt %s --attn-plan="target=rocdl chip=gfx942" | FileCheck %s --check-prefix=CDNA
// RUN: attn-opt %s --attn-plan="target=rocdl chip=gfx90a" | FileCheck %s --check-prefix=CDNA
// RUN: attn-opt %s --attn-plan="target=rocdl chip=gfx1100" | FileCheck %s --check-prefix=RDNA
// RUN: not attn-opt %s --attn-plan=target=tpu 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not attn-opt %s --attn-plan=target=rocdl 2>&1 | FileCheck %s --check-prefix=BADCHIP

// BAD: attn-plan: unknown target 'tpu' (expected cpu, nvvm or rocdl)
// BADCHIP: attn-plan: unknown rocdl chip '' (expected gfx90a, gfx942 or gfx1100)

// rocdl: 4 waves; CDNA prefill tiles have 128 rows (a 32x32 MFMA tile per
// wave), RDNA3's and decode-shaped ones 64 (16 rows per wave); the KV tile
// is the largest of 64, 32, 16 keys with Q, K and V in 48 of the 64 KB of
// LDS.
// CDNA-LABEL: func.func @flash_gqa4
// CDNA: schedule = #attn.schedule<block_q = 32, block_n = 64, heads_per_program = 4, warps = 4>
// RDNA-LABEL: func.func @flash_gqa4
// RDNA: schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4, warps = 4>
// CDNA-LABEL: func.func @unified_mqa
// CDNA: schedule = #attn.schedule<block_q = 2, block_n = 64, heads_per_program = 32, warps = 4>
// RDNA-LABEL: func.func @unified_mqa
// RDNA: schedule = #attn.schedule<block_q = 2, block_n = 64, heads_per_program = 32, warps = 4>
// Heads of 256: 64 rows and 16-key tiles (32 KB of Q, 16 of K and V).
// CDNA-LABEL: func.func @flash_d256
// CDNA: schedule = #attn.schedule<block_q = 64, block_n = 16, heads_per_program = 1, warps = 4>
// RDNA-LABEL: func.func @flash_d256
// RDNA: schedule = #attn.schedule<block_q = 64, block_n = 16, heads_per_program = 1, warps = 4>
// Heads of 128 on CDNA take 128 rows, which leave room for 32-key tiles.
// CDNA-LABEL: func.func @prefix_fp8_cache
// CDNA: schedule = #attn.schedule<block_q = 32, block_n = 32, heads_per_program = 4, warps = 4>
// RDNA-LABEL: func.func @prefix_fp8_cache
// RDNA: schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4, warps = 4>

// GQA packing: the 4 query heads of a KV head share a program; the CPU M
// tile has 16 rows, so 4 tokens per program.
// CHECK-LABEL: func.func @flash_gqa4
// CHECK: attn.flash {{.*}}schedule = #attn.schedule<block_q = 4, block_n = 32, heads_per_program = 4>
// NVVM-LABEL: func.func @flash_gqa4
// GPU prefill tiles have 128 rows: 4 warps of two 16-row MMA tiles each.
// NVVM: attn.flash {{.*}}schedule = #attn.schedule<block_q = 32, block_n = 64, heads_per_program = 4, warps = 4>
// sm_90a: warpgroups of 64 rows (one 16-row fragment per warp) on wgmma
// over 128-key tiles, K/V by TMA from a producer warpgroup (dense K/V
// stored like Q), the consumer warpgroups in pingpong; heads of 64 take
// three (192 rows).
// HOPPER-LABEL: func.func @flash_gqa4
// HOPPER: attn.flash {{.*}}schedule = #attn.schedule<block_q = 48, block_n = 128, heads_per_program = 4, warps = 12, tma = true, producer_warps = 4, pingpong = true>
func.func @flash_gqa4(%q: memref<?x8x64xf16>, %k: memref<?x2x64xf16>, %v: memref<?x2x64xf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x8x64xf16>) {
  attn.flash q(%q : memref<?x8x64xf16>) k(%k : memref<?x2x64xf16>) v(%v : memref<?x2x64xf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x8x64xf16>)
  return
}

// The short-sequences hint: the persistent form of the Hopper schedule on
// sm_90a (one block per SM walking the programs); elsewhere, and for fp8,
// bias, dropout or lse, the schedule it would have anyway.
// CHECK-LABEL: func.func @flash_short_sequences
// CHECK: schedule = #attn.schedule<block_q = 4, block_n = 32, heads_per_program = 4>
// NVVM-LABEL: func.func @flash_short_sequences
// NVVM: schedule = #attn.schedule<block_q = 32, block_n = 64, heads_per_program = 4, warps = 4>
// HOPPER-LABEL: func.func @flash_short_sequences
// HOPPER: {attn.short_sequences, schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8, tma = true, producer_warps = 4, pingpong = true, persistent = true>}
// HOPPER: {attn.short_sequences, schedule = #attn.schedule<block_q = 48, block_n = 128, heads_per_program = 4, warps = 12, tma = true, producer_warps = 4, pingpong = true>}
// HOPPER: {attn.short_sequences, schedule = #attn.schedule<block_q = 128, block_n = 128, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, pingpong = true>}
func.func @flash_short_sequences(%q: memref<?x8x64xf16>, %k: memref<?x2x64xf16>, %v: memref<?x2x64xf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x8x64xf16>, %lse: memref<?x8xf32>,
    %q8: memref<?x4x128xf8E4M3FN>, %sc: memref<1xf32>, %o8: memref<?x4x128xbf16>) {
  attn.flash q(%q : memref<?x8x64xf16>) k(%k : memref<?x2x64xf16>) v(%v : memref<?x2x64xf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x8x64xf16>) {attn.short_sequences}
  attn.flash q(%q : memref<?x8x64xf16>) k(%k : memref<?x2x64xf16>) v(%v : memref<?x2x64xf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x8x64xf16>)
      lse(%lse : memref<?x8xf32>) {attn.short_sequences}
  attn.flash q(%q8 : memref<?x4x128xf8E4M3FN>) k(%q8 : memref<?x4x128xf8E4M3FN>) v(%q8 : memref<?x4x128xf8E4M3FN>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%sc : memref<1xf32>)
      k_scale(%sc : memref<1xf32>) v_scale(%sc : memref<1xf32>) p_scale(%sc : memref<1xf32>) out(%o8 : memref<?x4x128xbf16>) {attn.short_sequences}
  return
}

// fp8 Q, K and V with heads of 128 multiply as stored on fp8 wgmma: the
// Hopper pipeline's schedule (its producer transposes V).
// HOPPER-LABEL: func.func @flash_fp8_wgmma
// HOPPER: schedule = #attn.schedule<block_q = 128, block_n = 128, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, pingpong = true>
func.func @flash_fp8_wgmma(%q: memref<?x4x128xf8E4M3FN>, %k: memref<?x4x128xf8E4M3FN>, %v: memref<?x4x128xf8E4M3FN>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>,
    %ps: memref<1xf32>, %o: memref<?x4x128xbf16>) {
  attn.flash q(%q : memref<?x4x128xf8E4M3FN>) k(%k : memref<?x4x128xf8E4M3FN>) v(%v : memref<?x4x128xf8E4M3FN>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>)
      k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x4x128xbf16>)
  return
}

// Heads of 64: three consumer warpgroups (192 rows) in a three-way
// pingpong, as 16-bit heads of 64.
// HOPPER-LABEL: func.func @flash_fp8_wgmma_d64
// HOPPER: schedule = #attn.schedule<block_q = 192, block_n = 128, heads_per_program = 1, warps = 12, tma = true, producer_warps = 4, pingpong = true>
func.func @flash_fp8_wgmma_d64(%q: memref<?x4x64xf8E4M3FN>, %k: memref<?x4x64xf8E4M3FN>, %v: memref<?x4x64xf8E4M3FN>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>,
    %ps: memref<1xf32>, %o: memref<?x4x64xbf16>) {
  attn.flash q(%q : memref<?x4x64xf8E4M3FN>) k(%k : memref<?x4x64xf8E4M3FN>) v(%v : memref<?x4x64xf8E4M3FN>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>)
      k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x4x64xbf16>)
  return
}

// So do heads of 256 (FlashAttention-3's 128 x 128 fp8 tiles: 224 KB of
// shared memory with the tiles sized in bytes).
// On sm_89 (fp8 mma.sync, Q kept as fp8 and as its converted fragments)
// they take 32-key tiles: 64 spilled 28 bytes (causal); sm_80 converts
// the fp8 tiles while staging and keeps 64.
// ADA-LABEL: func.func @flash_fp8_wgmma_d256
// ADA: schedule = #attn.schedule<block_q = 128, block_n = 32, heads_per_program = 1, warps = 8>
// NVVM-LABEL: func.func @flash_fp8_wgmma_d256
// NVVM: schedule = #attn.schedule<block_q = 128, block_n = 64, heads_per_program = 1, warps = 8>
// HOPPER-LABEL: func.func @flash_fp8_wgmma_d256
// HOPPER: schedule = #attn.schedule<block_q = 128, block_n = 128, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, pingpong = true>
func.func @flash_fp8_wgmma_d256(%q: memref<?x4x256xf8E4M3FN>, %k: memref<?x4x256xf8E4M3FN>, %v: memref<?x4x256xf8E4M3FN>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>,
    %ps: memref<1xf32>, %o: memref<?x4x256xbf16>) {
  attn.flash q(%q : memref<?x4x256xf8E4M3FN>) k(%k : memref<?x4x256xf8E4M3FN>) v(%v : memref<?x4x256xf8E4M3FN>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>)
      k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x4x256xbf16>)
  return
}

// Other fp8 heads (dequantized while staged; heads of 64, 128 and 256 run
// on fp8 wgmma) keep per-thread staging on sm_90a: no tma in the schedule.
// HOPPER-LABEL: func.func @flash_fp8_no_tma
// HOPPER: schedule = #attn.schedule<block_q = 128, block_n = 64, heads_per_program = 1, warps = 8>
func.func @flash_fp8_no_tma(%q: memref<?x4x192xf8E4M3FN>, %k: memref<?x4x192xf8E4M3FN>, %v: memref<?x4x192xf8E4M3FN>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>,
    %ps: memref<1xf32>, %o: memref<?x4x192xbf16>) {
  attn.flash q(%q : memref<?x4x192xf8E4M3FN>) k(%k : memref<?x4x192xf8E4M3FN>) v(%v : memref<?x4x192xf8E4M3FN>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>)
      k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x4x192xbf16>)
  return
}

// A schedule already present is kept.
// CHECK-LABEL: func.func @keeps_pinned_schedule
// NVVM-LABEL: func.func @keeps_pinned_schedule
// NVVM: schedule = #attn.schedule<block_q = 3, block_n = 5, heads_per_program = 1>
// CHECK: schedule = #attn.schedule<block_q = 3, block_n = 5, heads_per_program = 1>
func.func @keeps_pinned_schedule(%q: memref<?x8x64xf16>, %k: memref<?x2x64xf16>, %v: memref<?x2x64xf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x8x64xf16>) {
  attn.flash q(%q : memref<?x8x64xf16>) k(%k : memref<?x2x64xf16>) v(%v : memref<?x2x64xf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x8x64xf16>)
      {schedule = #attn.schedule<block_q = 3, block_n = 5, heads_per_program = 1>}
  return
}

// Per-head CSR layouts: one head per program, and the query tile divides the
// query block size (16 / 1 rows, gcd with 8).
// CHECK-LABEL: func.func @blocksparse_per_head
// NVVM-LABEL: func.func @blocksparse_per_head
// NVVM: schedule = #attn.schedule<block_q = 8, block_n = 64, heads_per_program = 1>
// CHECK: schedule = #attn.schedule<block_q = 8, block_n = 32, heads_per_program = 1>
// Rows of 8 tokens are not a warpgroup's 64: no TMA pipeline on sm_90a.
// HOPPER-LABEL: func.func @blocksparse_per_head
// HOPPER: schedule = #attn.schedule<block_q = 8, block_n = 64, heads_per_program = 1>
func.func @blocksparse_per_head(%q: memref<?x8x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<8x?xi32>, %col: memref<8x?xi32>, %s: f32,
    %o: memref<?x8x64xbf16>) {
  attn.blocksparse q(%q : memref<?x8x64xbf16>) k(%k : memref<?x2x64xbf16>) v(%v : memref<?x2x64xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<8x?xi32>)
      col(%col : memref<8x?xi32>) scale(%s) out(%o : memref<?x8x64xbf16>) {block_size = 64 : i64, q_block_size = 8 : i64}
  return
}

// Per-head layouts of query and key blocks of 64 on sm_90a: programs of
// two layout rows (128 x 128: the union of both rows' CSR blocks, two
// blocks a tile); elsewhere one layout row a program. Key blocks of 128
// under query blocks of 64 keep the one-row programs of one warpgroup;
// under query blocks of 128, one block a 128-key tile.
// CHECK-LABEL: func.func @blocksparse_layout_row_pairs
// NVVM-LABEL: func.func @blocksparse_layout_row_pairs
// NVVM: schedule = #attn.schedule<block_q = 64, block_n = 64, heads_per_program = 1, warps = 2>
// HOPPER-LABEL: func.func @blocksparse_layout_row_pairs
// HOPPER: schedule = #attn.schedule<block_q = 128, block_n = 128, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, pingpong = true>
// HOPPER: schedule = #attn.schedule<block_q = 64, block_n = 64, heads_per_program = 1, warps = 4, tma = true, producer_warps = 4>
// HOPPER: schedule = #attn.schedule<block_q = 128, block_n = 128, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, pingpong = true>
func.func @blocksparse_layout_row_pairs(%q: memref<?x8x128xbf16>, %k: memref<?x2x128xbf16>, %v: memref<?x2x128xbf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<8x?xi32>, %col: memref<8x?xi32>, %s: f32,
    %o: memref<?x8x128xbf16>) {
  attn.blocksparse q(%q : memref<?x8x128xbf16>) k(%k : memref<?x2x128xbf16>) v(%v : memref<?x2x128xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<8x?xi32>)
      col(%col : memref<8x?xi32>) scale(%s) out(%o : memref<?x8x128xbf16>) {block_size = 64 : i64}
  attn.blocksparse q(%q : memref<?x8x128xbf16>) k(%k : memref<?x2x128xbf16>) v(%v : memref<?x2x128xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<8x?xi32>)
      col(%col : memref<8x?xi32>) scale(%s) out(%o : memref<?x8x128xbf16>) {block_size = 128 : i64, q_block_size = 64 : i64}
  attn.blocksparse q(%q : memref<?x8x128xbf16>) k(%k : memref<?x2x128xbf16>) v(%v : memref<?x2x128xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<8x?xi32>)
      col(%col : memref<8x?xi32>) scale(%s) out(%o : memref<?x8x128xbf16>) {block_size = 128 : i64}
  return
}

// A shared layout keeps GQA packing.
// CHECK-LABEL: func.func @blocksparse_shared
// NVVM-LABEL: func.func @blocksparse_shared
// NVVM: schedule = #attn.schedule<block_q = 32, block_n = 64, heads_per_program = 4, warps = 4>
// CHECK: schedule = #attn.schedule<block_q = 4, block_n = 32, heads_per_program = 4>
// sm_90a: 128 rows are two consumer warpgroups in pingpong beside a
// producer warpgroup that pairs the row's blocks of 64 into 128-key tiles.
// HOPPER-LABEL: func.func @blocksparse_shared
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8, tma = true, producer_warps = 4, pingpong = true>
func.func @blocksparse_shared(%q: memref<?x8x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<1x?xi32>, %col: memref<1x?xi32>, %s: f32,
    %o: memref<?x8x64xbf16>) {
  attn.blocksparse q(%q : memref<?x8x64xbf16>) k(%k : memref<?x2x64xbf16>) v(%v : memref<?x2x64xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<1x?xi32>)
      col(%col : memref<1x?xi32>) scale(%s) out(%o : memref<?x8x64xbf16>) {block_size = 64 : i64}
  return
}

// CHECK-LABEL: func.func @unified_mqa
// Unified programs are mostly decode rows: the 64-row tile, a warp per 16.
// NVVM-LABEL: func.func @unified_mqa
// NVVM: schedule = #attn.schedule<block_q = 2, block_n = 64, heads_per_program = 32>
// sm_90a double-buffers them (one warpgroup on wgmma).
// HOPPER-LABEL: func.func @unified_mqa
// HOPPER: schedule = #attn.schedule<block_q = 2, block_n = 64, heads_per_program = 32, stages = 2>
// CHECK: attn.unified {{.*}}schedule = #attn.schedule<block_q = 1, block_n = 32, heads_per_program = 32>
func.func @unified_mqa(%q: memref<?x32x128xbf16>, %kc: memref<?x16x1x128xbf16>, %vc: memref<?x16x1x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x1x128xbf16>) v_cache(%vc : memref<?x16x1x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// The long-queries hint (prefill rows, alone or in a mixed batch): three
// K/V stages for 16-bit unified programs on sm_90a; elsewhere, and for fp8
// caches, the schedule it would have anyway.
// CHECK-LABEL: func.func @unified_long_queries
// CHECK-COUNT-4: schedule = #attn.schedule<block_q = 4, block_n = 32, heads_per_program = 4>}
// NVVM-LABEL: func.func @unified_long_queries
// NVVM-COUNT-4: schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4>}
// HOPPER-LABEL: func.func @unified_long_queries
// HOPPER: {attn.long_queries, schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4, stages = 3>}
// HOPPER: {attn.long_queries, schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4, stages = 3>}
// HOPPER: {attn.long_queries, schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4>}
// HOPPER: out(%{{.*}}) {schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4, stages = 2>}
func.func @unified_long_queries(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>,
    %q64: memref<?x32x64xf16>, %kc64: memref<?x16x8x64xf16>, %o64: memref<?x32x64xf16>,
    %kc8: memref<?x16x8x128xf8E4M3FN>, %sc: memref<1xf32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%o : memref<?x32x128xbf16>) {attn.long_queries}
  attn.unified q(%q64 : memref<?x32x64xf16>) k_cache(%kc64 : memref<?x16x8x64xf16>) v_cache(%kc64 : memref<?x16x8x64xf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%o64 : memref<?x32x64xf16>) {attn.long_queries}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc8 : memref<?x16x8x128xf8E4M3FN>) v_cache(%kc8 : memref<?x16x8x128xf8E4M3FN>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) k_descale(%sc : memref<1xf32>) v_descale(%sc : memref<1xf32>) out(%o : memref<?x32x128xbf16>) {attn.long_queries}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%kc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// The prefill-rows hint (prefill batches): on sm_90a, 16-bit unified
// programs of heads of 64 or 128 over caches like Q take prefix prefill's
// gathering producer warpgroup (128 rows, 128-key tiles, pingpong; pages
// of 16 are whole TMA boxes: tma, pages of 48 are not), and so do fp8
// caches with one descale each (their bytes copied and dequantized; heads
// of 128 as raw page boxes: tma); lse outputs and sqrt ALiBi keep the
// schedule they would have anyway, as do other targets.
// NVVM-LABEL: func.func @unified_prefill_rows
// NVVM-COUNT-6: schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4>}
// HOPPER-LABEL: func.func @unified_prefill_rows
// HOPPER: {attn.long_queries, attn.prefill_rows, schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8, tma = true, producer_warps = 4, pingpong = true>}
// HOPPER: {attn.long_queries, attn.prefill_rows, schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8, tma = true, producer_warps = 4, pingpong = true>}
// HOPPER: k_cache(%{{.*}} : memref<?x16x8x128xf8E4M3FN>) {{.*}} {attn.long_queries, attn.prefill_rows, schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8, tma = true, producer_warps = 4, pingpong = true>}
// HOPPER: {attn.long_queries, attn.prefill_rows, schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4, stages = 3>}
// HOPPER: {alibi_form = #attn.alibi<sqrt>, attn.long_queries, attn.prefill_rows, schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4, stages = 3>}
// HOPPER: {attn.long_queries, attn.prefill_rows, schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8, producer_warps = 4, pingpong = true>}
func.func @unified_prefill_rows(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>,
    %q64: memref<?x32x64xf16>, %kc64: memref<?x16x8x64xf16>, %o64: memref<?x32x64xf16>,
    %kc8: memref<?x16x8x128xf8E4M3FN>, %sc: memref<1xf32>, %lse: memref<?x32xf32>, %slopes: memref<32xf32>,
    %kc48: memref<?x48x8x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%o : memref<?x32x128xbf16>) {attn.long_queries, attn.prefill_rows}
  attn.unified q(%q64 : memref<?x32x64xf16>) k_cache(%kc64 : memref<?x16x8x64xf16>) v_cache(%kc64 : memref<?x16x8x64xf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%o64 : memref<?x32x64xf16>) {attn.long_queries, attn.prefill_rows}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc8 : memref<?x16x8x128xf8E4M3FN>) v_cache(%kc8 : memref<?x16x8x128xf8E4M3FN>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) k_descale(%sc : memref<1xf32>) v_descale(%sc : memref<1xf32>) out(%o : memref<?x32x128xbf16>) {attn.long_queries, attn.prefill_rows}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%o : memref<?x32x128xbf16>) lse(%lse : memref<?x32xf32>) {attn.long_queries, attn.prefill_rows}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) alibi_slopes(%slopes : memref<32xf32>) out(%o : memref<?x32x128xbf16>) {alibi_form = #attn.alibi<sqrt>, attn.long_queries, attn.prefill_rows}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc48 : memref<?x48x8x128xbf16>) v_cache(%kc48 : memref<?x48x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%o : memref<?x32x128xbf16>) {attn.long_queries, attn.prefill_rows}
  return
}

// Heads over 128 keep one 16-row MMA tile per warp (8 warps), so that the
// [32 x 256] accumulator never has to fit in one warp's registers.
// CHECK-LABEL: func.func @flash_d256
// CHECK: schedule = #attn.schedule<block_q = 16, block_n = 32, heads_per_program = 1>
// NVVM-LABEL: func.func @flash_d256
// NVVM: schedule = #attn.schedule<block_q = 128, block_n = 64, heads_per_program = 1, warps = 8>
// Heads of 256 take 80-key tiles on sm_90a ([64 x 256] O per warpgroup
// next to a [64 x 80] S; K and V of two stages in 160 KB), no pingpong.
// HOPPER-LABEL: func.func @flash_d256
// HOPPER: schedule = #attn.schedule<block_q = 128, block_n = 80, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4>
func.func @flash_d256(%q: memref<?x4x256xbf16>, %k: memref<?x4x256xbf16>, %v: memref<?x4x256xbf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x256xbf16>) {
  attn.flash q(%q : memref<?x4x256xbf16>) k(%k : memref<?x4x256xbf16>) v(%v : memref<?x4x256xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x4x256xbf16>)
  return
}

// An fp8 KV cache is dequantized through registers while staging: the
// 64-row tile, a warp per 16 rows.
// CHECK-LABEL: func.func @prefix_fp8_cache
// NVVM-LABEL: func.func @prefix_fp8_cache
// NVVM: schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4>
// sm_90a: the Hopper pipeline, whose producer warpgroup copies the caches'
// bytes and dequantizes them in shared memory.
// HOPPER-LABEL: func.func @prefix_fp8_cache
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8, producer_warps = 4, pingpong = true>
func.func @prefix_fp8_cache(
    %q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>,
    %k_cache: memref<?x8x16x16x8xf8E4M3FN>, %v_cache: memref<?x8x128x16xf8E4M3FN>,
    %block_table: memref<?x?xi32>, %query_start: memref<?xi32>, %seq_lens: memref<?xi32>,
    %scale: f32, %k_scale: memref<1xf32>, %v_scale: memref<1xf32>,
    %out: memref<?x32x128xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>)
      v(%v : memref<?x8x128xbf16>)
      k_cache(%k_cache : memref<?x8x16x16x8xf8E4M3FN>)
      v_cache(%v_cache : memref<?x8x128x16xf8E4M3FN>)
      block_table(%block_table : memref<?x?xi32>)
      query_start(%query_start : memref<?xi32>) seq_lens(%seq_lens : memref<?xi32>)
      scale(%scale) k_scale(%k_scale : memref<1xf32>) v_scale(%v_scale : memref<1xf32>)
      out(%out : memref<?x32x128xbf16>)
  return
}

// fp8 caches with heads that are no whole swizzle atoms decode in
// registers; sm_90a gives them the 128-row programs of 16-bit caches (a
// head of 96: 1.58x the 64-row ones on H200), 32-key tiles up to heads
// of 160, 16 beyond (224 spilled at 32). sm_89 keeps 64 rows.
// ADA-LABEL: func.func @prefix_fp8_d96
// ADA: schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4>
// HOPPER-LABEL: func.func @prefix_fp8_d96
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 32, heads_per_program = 4, warps = 4>
// HOPPER-LABEL: func.func @prefix_fp8_d160
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 32, heads_per_program = 4, warps = 8>
// HOPPER-LABEL: func.func @prefix_fp8_d224
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 16, heads_per_program = 4, warps = 8>
func.func @prefix_fp8_d96(%q: memref<?x32x96xbf16>, %k: memref<?x8x96xbf16>, %v: memref<?x8x96xbf16>, %kc: memref<?x8x6x16x16xf8E4M3FN>, %vc: memref<?x8x96x16xf8E4M3FN>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x96xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x96xbf16>) k(%k : memref<?x8x96xbf16>) v(%v : memref<?x8x96xbf16>) k_cache(%kc : memref<?x8x6x16x16xf8E4M3FN>) v_cache(%vc : memref<?x8x96x16xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) out(%o : memref<?x32x96xbf16>)
  return
}
func.func @prefix_fp8_d160(%q: memref<?x32x160xbf16>, %k: memref<?x8x160xbf16>, %v: memref<?x8x160xbf16>, %kc: memref<?x8x10x16x16xf8E4M3FN>, %vc: memref<?x8x160x16xf8E4M3FN>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x160xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x160xbf16>) k(%k : memref<?x8x160xbf16>) v(%v : memref<?x8x160xbf16>) k_cache(%kc : memref<?x8x10x16x16xf8E4M3FN>) v_cache(%vc : memref<?x8x160x16xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) out(%o : memref<?x32x160xbf16>)
  return
}
func.func @prefix_fp8_d224(%q: memref<?x32x224xbf16>, %k: memref<?x8x224xbf16>, %v: memref<?x8x224xbf16>, %kc: memref<?x8x14x16x16xf8E4M3FN>, %vc: memref<?x8x224x16xf8E4M3FN>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x224xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x224xbf16>) k(%k : memref<?x8x224xbf16>) v(%v : memref<?x8x224xbf16>) k_cache(%kc : memref<?x8x14x16x16xf8E4M3FN>) v_cache(%vc : memref<?x8x224x16xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) out(%o : memref<?x32x224xbf16>)
  return
}

// 16-bit caches like Q: on sm_90a the Hopper pipeline with a producer
// warpgroup that gathers the pages (vLLM's split-x K cache is no TMA box),
// so producer_warps without tma; a page of 1 (no 8-key chunks) keeps the
// warpgroups' own staging.
// CHECK-LABEL: func.func @prefix_bf16_cache
// NVVM-LABEL: func.func @prefix_bf16_cache
// NVVM: schedule = #attn.schedule<block_q = 32, block_n = 32, heads_per_program = 4, warps = 4>
// HOPPER-LABEL: func.func @prefix_bf16_cache
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8, producer_warps = 4, pingpong = true>
// HOPPER-LABEL: func.func @prefix_page1
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 128, heads_per_program = 4, warps = 8>
func.func @prefix_bf16_cache(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}
func.func @prefix_page1(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x1x8xbf16>, %vc: memref<?x8x128x1xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x1x8xbf16>) v_cache(%vc : memref<?x8x128x1xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// Register budgets (the resource sweep of test/Pipelines checks the
// kernels): unified heads between 64 and 128 take 32-key tiles, whose 128
// threads ptxas holds to 168 registers.
// CHECK-LABEL: func.func @unified_d96
// CHECK: schedule = #attn.schedule<block_q = 4, block_n = 32, heads_per_program = 4>
// NVVM-LABEL: func.func @unified_d96
// NVVM: schedule = #attn.schedule<block_q = 16, block_n = 32, heads_per_program = 4>
// HOPPER-LABEL: func.func @unified_d96
// HOPPER: schedule = #attn.schedule<block_q = 16, block_n = 32, heads_per_program = 4>
func.func @unified_d96(%q: memref<?x32x96xbf16>, %kc: memref<?x16x8x96xbf16>, %vc: memref<?x16x8x96xbf16>, %bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x96xbf16>) {
  attn.unified q(%q : memref<?x32x96xbf16>) k_cache(%kc : memref<?x16x8x96xbf16>) v_cache(%vc : memref<?x16x8x96xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x96xbf16>)
  return
}

// Paged prefill of heads of 256 on mma.sync: 16-key tiles next to 8 warps
// of [16 x 256] accumulators; sm_90a's warpgroups keep 64 keys.
// CHECK-LABEL: func.func @prefix_d256
// NVVM-LABEL: func.func @prefix_d256
// NVVM: schedule = #attn.schedule<block_q = 32, block_n = 16, heads_per_program = 4, warps = 8>
// HOPPER-LABEL: func.func @prefix_d256
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 64, heads_per_program = 4, warps = 8>
func.func @prefix_d256(%q: memref<?x32x256xbf16>, %k: memref<?x8x256xbf16>, %v: memref<?x8x256xbf16>, %kc: memref<?x8x32x16x8xbf16>, %vc: memref<?x8x256x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %o: memref<?x32x256xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x256xbf16>) k(%k : memref<?x8x256xbf16>) v(%v : memref<?x8x256xbf16>) k_cache(%kc : memref<?x8x32x16x8xbf16>) v_cache(%vc : memref<?x8x256x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x256xbf16>)
  return
}

// ... eight query heads a KV head: sm_90a packs four of them (eight of 16
// rows spilled 16 bytes at 255 registers), two programs a KV tile.
// NVVM-LABEL: func.func @prefix_d256_gqa8
// NVVM: schedule = #attn.schedule<block_q = 16, block_n = 16, heads_per_program = 8, warps = 8>
// HOPPER-LABEL: func.func @prefix_d256_gqa8
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 64, heads_per_program = 4, warps = 8>
func.func @prefix_d256_gqa8(%q: memref<?x32x256xbf16>, %k: memref<?x4x256xbf16>, %v: memref<?x4x256xbf16>, %kc: memref<?x4x32x16x8xbf16>, %vc: memref<?x4x256x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %o: memref<?x32x256xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x256xbf16>) k(%k : memref<?x4x256xbf16>) v(%v : memref<?x4x256xbf16>) k_cache(%kc : memref<?x4x32x16x8xbf16>) v_cache(%vc : memref<?x4x256x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x256xbf16>)
  return
}

// ... and with an fp8 cache dequantized while staging, outside warpgroups.
// CHECK-LABEL: func.func @prefix_d256_fp8_cache
// NVVM-LABEL: func.func @prefix_d256_fp8_cache
// NVVM: schedule = #attn.schedule<block_q = 16, block_n = 16, heads_per_program = 4>
// HOPPER-LABEL: func.func @prefix_d256_fp8_cache
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 64, heads_per_program = 4, warps = 8>
func.func @prefix_d256_fp8_cache(%q: memref<?x32x256xbf16>, %k: memref<?x8x256xbf16>, %v: memref<?x8x256xbf16>, %kc: memref<?x8x32x16x8xf8E4M3FN>, %vc: memref<?x8x256x16xf8E4M3FN>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x256xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x256xbf16>) k(%k : memref<?x8x256xbf16>) v(%v : memref<?x8x256xbf16>) k_cache(%kc : memref<?x8x32x16x8xf8E4M3FN>) v_cache(%vc : memref<?x8x256x16xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) out(%o : memref<?x32x256xbf16>)
  return
}

// Dequantizing (fp8) caches keep one stage on sm_90a: their raw buffer.
// HOPPER-LABEL: func.func @unified_fp8_cache
// HOPPER: schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4>
func.func @unified_fp8_cache(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, %s: f32, %kd: memref<1xf32>, %vd: memref<1xf32>, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%kd : memref<1xf32>) v_descale(%vd : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// The decode-rows hint (decode, speculative decode): on sm_90a, unified
// programs over fp8 caches (16-bit queries, heads up to 128) take one
// 16-row slab (16 / pack query tokens) and four warps that split each
// 64-key tile's keys (warps beyond the slabs). Caches like Q, fp8
// queries, heads of 256 and other chips keep the schedule they would have
// anyway.
// NVVM-LABEL: func.func @unified_decode_rows
// NVVM-COUNT-2: schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4>}
// NVVM: schedule = #attn.schedule<block_q = 16, block_n = 16, heads_per_program = 4>}
// NVVM: schedule = #attn.schedule<block_q = 8, block_n = 32, heads_per_program = 8>}
// HOPPER-LABEL: func.func @unified_decode_rows
// HOPPER: {attn.decode_rows, schedule = #attn.schedule<block_q = 4, block_n = 64, heads_per_program = 4, warps = 4>}
// HOPPER: {attn.decode_rows, schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4, stages = 2>}
// HOPPER: {attn.decode_rows, schedule = #attn.schedule<block_q = 16, block_n = 16, heads_per_program = 4>}
// HOPPER: {attn.decode_rows, schedule = #attn.schedule<block_q = 2, block_n = 64, heads_per_program = 8, warps = 4>}
// ADA-LABEL: func.func @unified_decode_rows
// ADA: {attn.decode_rows, schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 4>}
func.func @unified_decode_rows(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>,
    %kc8: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>,
    %s: f32, %sc: memref<1xf32>, %o: memref<?x32x128xbf16>,
    %q256: memref<?x32x256xbf16>, %kc256: memref<?x16x8x256xf8E5M2>, %o256: memref<?x32x256xbf16>,
    %q80: memref<?x64x80xf16>, %kc80: memref<?x16x8x80xf8E4M3FN>, %o80: memref<?x64x80xf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc8 : memref<?x16x8x128xf8E4M3FN>) v_cache(%kc8 : memref<?x16x8x128xf8E4M3FN>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) k_descale(%sc : memref<1xf32>) v_descale(%sc : memref<1xf32>) out(%o : memref<?x32x128xbf16>) {attn.decode_rows}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%kc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%o : memref<?x32x128xbf16>) {attn.decode_rows}
  attn.unified q(%q256 : memref<?x32x256xbf16>) k_cache(%kc256 : memref<?x16x8x256xf8E5M2>) v_cache(%kc256 : memref<?x16x8x256xf8E5M2>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) k_descale(%sc : memref<1xf32>) v_descale(%sc : memref<1xf32>) out(%o256 : memref<?x32x256xbf16>) {attn.decode_rows}
  attn.unified q(%q80 : memref<?x64x80xf16>) k_cache(%kc80 : memref<?x16x8x80xf8E4M3FN>) v_cache(%kc80 : memref<?x16x8x80xf8E4M3FN>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) k_descale(%sc : memref<1xf32>) v_descale(%sc : memref<1xf32>) out(%o80 : memref<?x64x80xf16>) {attn.decode_rows}
  return
}

// Layout blocks shorter than the heads' KV tile: each block is its own key
// range, so the tile shrinks to the largest power of two dividing the block
// (at least 16 keys): 16 for blocks of 16 and 48, 32 for 32, 16 for 8.
// CHECK-LABEL: func.func @blocksparse_small_key_blocks
// CHECK: schedule = #attn.schedule<block_q = 16, block_n = 16, heads_per_program = 1>
// CHECK: schedule = #attn.schedule<block_q = 16, block_n = 16, heads_per_program = 1>
// CHECK: schedule = #attn.schedule<block_q = 16, block_n = 32, heads_per_program = 1>
// CHECK: schedule = #attn.schedule<block_q = 8, block_n = 16, heads_per_program = 1>
// NVVM-LABEL: func.func @blocksparse_small_key_blocks
// NVVM: schedule = #attn.schedule<block_q = 16, block_n = 16, heads_per_program = 1>
// NVVM: schedule = #attn.schedule<block_q = 16, block_n = 16, heads_per_program = 1>
// NVVM: schedule = #attn.schedule<block_q = 32, block_n = 32, heads_per_program = 1>
// NVVM: schedule = #attn.schedule<block_q = 8, block_n = 16, heads_per_program = 1>
// HOPPER-LABEL: func.func @blocksparse_small_key_blocks
// HOPPER: schedule = #attn.schedule<block_q = 16, block_n = 16, heads_per_program = 1>
// HOPPER: schedule = #attn.schedule<block_q = 16, block_n = 16, heads_per_program = 1>
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 32, heads_per_program = 1>
// HOPPER: schedule = #attn.schedule<block_q = 8, block_n = 16, heads_per_program = 1>
// CDNA-LABEL: func.func @blocksparse_small_key_blocks
// CDNA: block_n = 16,
// CDNA: block_n = 16,
// CDNA: block_n = 32,
// CDNA: block_n = 16,
// RDNA-LABEL: func.func @blocksparse_small_key_blocks
// RDNA: block_n = 16,
// RDNA: block_n = 16,
// RDNA: block_n = 32,
// RDNA: block_n = 16,
func.func @blocksparse_small_key_blocks(%q: memref<?x4x112xbf16>, %k: memref<?x4x112xbf16>, %v: memref<?x4x112xbf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<4x?xi32>, %col: memref<4x?xi32>, %s: f32,
    %o: memref<?x4x112xbf16>) {
  attn.blocksparse q(%q : memref<?x4x112xbf16>) k(%k : memref<?x4x112xbf16>) v(%v : memref<?x4x112xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<4x?xi32>)
      col(%col : memref<4x?xi32>) scale(%s) out(%o : memref<?x4x112xbf16>) {block_size = 16 : i64}
  attn.blocksparse q(%q : memref<?x4x112xbf16>) k(%k : memref<?x4x112xbf16>) v(%v : memref<?x4x112xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<4x?xi32>)
      col(%col : memref<4x?xi32>) scale(%s) out(%o : memref<?x4x112xbf16>) {block_size = 48 : i64, q_block_size = 16 : i64}
  attn.blocksparse q(%q : memref<?x4x112xbf16>) k(%k : memref<?x4x112xbf16>) v(%v : memref<?x4x112xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<4x?xi32>)
      col(%col : memref<4x?xi32>) scale(%s) out(%o : memref<?x4x112xbf16>) {block_size = 32 : i64}
  attn.blocksparse q(%q : memref<?x4x112xbf16>) k(%k : memref<?x4x112xbf16>) v(%v : memref<?x4x112xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<4x?xi32>)
      col(%col : memref<4x?xi32>) scale(%s) out(%o : memref<?x4x112xbf16>) {block_size = 8 : i64}
  return
}

// Programs of one or two warps (query blocks of 16-32 rows of one head)
// over blocks of 64 keys: heads between 64 and 128 walk 32-key tiles,
// heads over 128 (below 256) 16-key tiles; 255 registers held no more.
// NVVM-LABEL: func.func @blocksparse_one_warp_programs
// NVVM: schedule = #attn.schedule<block_q = 16, block_n = 32, heads_per_program = 1>
// NVVM: schedule = #attn.schedule<block_q = 32, block_n = 16, heads_per_program = 1>
// NVVM: schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 1>
// HOPPER-LABEL: func.func @blocksparse_one_warp_programs
// HOPPER: schedule = #attn.schedule<block_q = 16, block_n = 32, heads_per_program = 1>
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 16, heads_per_program = 1>
// HOPPER: schedule = #attn.schedule<block_q = 16, block_n = 64, heads_per_program = 1>
func.func @blocksparse_one_warp_programs(%q: memref<?x4x112xbf16>, %k: memref<?x4x112xbf16>, %v: memref<?x4x112xbf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<4x?xi32>, %col: memref<4x?xi32>, %s: f32,
    %o: memref<?x4x112xbf16>, %q2: memref<?x4x192xf16>, %k2: memref<?x4x192xf16>, %v2: memref<?x4x192xf16>,
    %o2: memref<?x4x192xf16>, %q3: memref<?x4x128xbf16>, %k3: memref<?x4x128xbf16>, %v3: memref<?x4x128xbf16>,
    %o3: memref<?x4x128xbf16>) {
  attn.blocksparse q(%q : memref<?x4x112xbf16>) k(%k : memref<?x4x112xbf16>) v(%v : memref<?x4x112xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<4x?xi32>)
      col(%col : memref<4x?xi32>) scale(%s) out(%o : memref<?x4x112xbf16>) {block_size = 64 : i64, q_block_size = 16 : i64}
  attn.blocksparse q(%q2 : memref<?x4x192xf16>) k(%k2 : memref<?x4x192xf16>) v(%v2 : memref<?x4x192xf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<4x?xi32>)
      col(%col : memref<4x?xi32>) scale(%s) out(%o2 : memref<?x4x192xf16>) {block_size = 64 : i64, q_block_size = 32 : i64}
  attn.blocksparse q(%q3 : memref<?x4x128xbf16>) k(%k3 : memref<?x4x128xbf16>) v(%v3 : memref<?x4x128xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<4x?xi32>)
      col(%col : memref<4x?xi32>) scale(%s) out(%o3 : memref<?x4x128xbf16>) {block_size = 64 : i64, q_block_size = 16 : i64}
  return
}

// Philox dropout next to S: the sm_90a pipeline takes 64-key tiles for
// heads up to 128 (172-196 bytes spilled at 128), and mma.sync programs of
// 32 rows a warp halve 64-key tiles (heads of 16-32 spilled 16-156 bytes);
// heads of 128 keep 32 there. On H200 these ran 1.18x and 1.09x faster
// than the spilling tiles (bench/results/2026-12-02-h200-session34.md).
// NVVM-LABEL: func.func @flash_dropout
// NVVM: schedule = #attn.schedule<block_q = 32, block_n = 32, heads_per_program = 4, warps = 4>
// NVVM: schedule = #attn.schedule<block_q = 32, block_n = 32, heads_per_program = 4, warps = 4>
// HOPPER-LABEL: func.func @flash_dropout
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 64, heads_per_program = 4, warps = 8, tma = true, producer_warps = 4, pingpong = true>
// HOPPER: schedule = #attn.schedule<block_q = 32, block_n = 32, heads_per_program = 4, warps = 4>
func.func @flash_dropout(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %p: f32, %seed: i64, %off: i64, %o: memref<?x32x128xbf16>,
    %q2: memref<?x16x32xbf16>, %k2: memref<?x4x32xbf16>, %v2: memref<?x4x32xbf16>, %o2: memref<?x16x32xbf16>) {
  attn.flash q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s)
      dropout(%p, %seed, %off) out(%o : memref<?x32x128xbf16>) {causal}
  attn.flash q(%q2 : memref<?x16x32xbf16>) k(%k2 : memref<?x4x32xbf16>) v(%v2 : memref<?x4x32xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s)
      dropout(%p, %seed, %off) out(%o2 : memref<?x16x32xbf16>)
  return
}

// Prefix prefill of heads over 128 with GQA 5 (programs of 125 rows, outside
// the 128-row rule) keeps 32-key tiles: ptxas spills 100 bytes there on
// sm_90a, and 16 keys, which fit, ran 1.06x slower on H200 (1985 against
// 1880 us; bench/results/2026-12-02-h200-spill-candidates.log).
// NVVM-LABEL: func.func @prefix_d256_gqa5
// NVVM: schedule = #attn.schedule<block_q = 25, block_n = 32, heads_per_program = 5>
// HOPPER-LABEL: func.func @prefix_d256_gqa5
// HOPPER: schedule = #attn.schedule<block_q = 25, block_n = 32, heads_per_program = 5>
func.func @prefix_d256_gqa5(%q: memref<?x10x256xbf16>, %k: memref<?x2x256xbf16>, %v: memref<?x2x256xbf16>,
    %kc: memref<?x2x32x16x8xbf16>, %vc: memref<?x2x256x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>,
    %sl: memref<?xi32>, %s: f32, %o: memref<?x10x256xbf16>) {
  attn.prefix_prefill q(%q : memref<?x10x256xbf16>) k(%k : memref<?x2x256xbf16>) v(%v : memref<?x2x256xbf16>) k_cache(%kc : memref<?x2x32x16x8xbf16>) v_cache(%vc : memref<?x2x256x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x10x256xbf16>)
  return
}
