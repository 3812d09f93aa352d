// RUN: attn-opt %s --convert-attn-to-scf --canonicalize --cse | FileCheck %s

// The tiled form of a causal GQA flash op with block_q = 2 tokens x 2 heads
// per program and 8-key tiles.
// CHECK-LABEL: func.func @flash_causal
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x16xf16>, %[[K:.*]]: memref<?x2x16xf16>, %[[V:.*]]: memref<?x2x16xf16>, %[[CQ:.*]]: memref<?xi32>, %[[CK:.*]]: memref<?xi32>, %[[S:.*]]: f32, %[[O:.*]]: memref<?x4x16xf16>)
// Grid sizing from shapes alone: floor(tokens / block_q) + batch query
// tiles cover every sequence's tiles.
// CHECK: %[[DIM:.*]] = memref.dim %[[Q]], %c0
// CHECK: arith.divui %[[DIM]], %c2
// CHECK: %[[NCU:.*]] = memref.dim %[[CQ]], %c0
// CHECK: %[[TILES:.*]] = arith.addi %{{.*}}, %[[NCU]]
// The grid: query tiles x head groups (4 heads / 2 per program).
// CHECK: scf.parallel (%[[P:.*]], %[[G:.*]]) = (%c0, %c0) to (%[[TILES]], %c2)
// A program finds its sequence by binary search over the tiles' starts.
// CHECK: scf.while
// CHECK: arith.cmpi sle, %{{.*}}, %[[P]]
// CHECK: scf.if
// Fully masked tiles are never visited: the walk ends at min(last query + 1, Lk).
// CHECK: %[[NT:.*]] = arith.minsi %{{.*}}, %c2 : index
// CHECK: %[[END:.*]] = arith.addi %{{.*}}, %[[NT]] : index
// CHECK: %[[HI:.*]] = arith.minsi %[[END]], %{{.*}} : index
// Program buffers: Q tile, K tile, V tile, scores, accumulator, max, sum.
// CHECK: memref.alloc() : memref<4x16xf32>
// CHECK: memref.alloc() : memref<8x16xf32>
// CHECK: memref.alloc() : memref<8x16xf32>
// CHECK: memref.alloc() : memref<4x8xf32>
// CHECK: memref.alloc() : memref<4x16xf32>
// CHECK: memref.alloc() : memref<4xf32>
// CHECK: memref.alloc() : memref<4xf32>
// Load the query rows (f16 widened to f32).
// CHECK: memref.load %[[Q]]
// CHECK: arith.extf {{.*}} : f16 to f32
// The KV walk, one tile of 8 keys per step.
// CHECK: scf.for %{{.*}} = %c0 to %[[HI]] step %c8
// CHECK: memref.load %[[K]]
// CHECK: memref.load %[[V]]
// Scores in the log2 domain, then the online-softmax update.
// CHECK: arith.mulf %{{.*}}, %cst_0 : f32
// CHECK: arith.maximumf
// CHECK: math.exp2
// CHECK: math.exp2
// Epilogue: 1/l (0 for a row that saw nothing), rounded to f16, stored.
// CHECK: arith.cmpf ogt
// CHECK: arith.select
// CHECK: arith.truncf {{.*}} : f32 to f16
// CHECK: memref.store {{.*}}, %[[O]]
// CHECK: memref.dealloc
func.func @flash_causal(%q: memref<?x4x16xf16>, %k: memref<?x2x16xf16>, %v: memref<?x2x16xf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x4x16xf16>) {
  attn.flash q(%q : memref<?x4x16xf16>) k(%k : memref<?x2x16xf16>) v(%v : memref<?x2x16xf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s)
      out(%o : memref<?x4x16xf16>) {causal, schedule = #attn.schedule<block_q = 2, block_n = 8, heads_per_program = 2>}
  return
}

// Paged walk: every key goes through the block table; split-KV writes the
// three partials per segment.
// CHECK-LABEL: func.func @unified_split
// CHECK-SAME: %[[BT:[a-z0-9]+]]: memref<?x?xi32>
// CHECK: scf.parallel ({{.*}}) = (%c0, %c0, %c0) to ({{.*}}, %c4)
// CHECK: memref.load %[[BT]]
// CHECK: arith.remui %{{.*}}, %c16
// CHECK: memref.store {{.*}} : memref<?x8x4xf32>
// CHECK: memref.store {{.*}} : memref<?x8x4xf32>
// CHECK: memref.store {{.*}} : memref<?x8x4x64xf32>
func.func @unified_split(%q: memref<?x8x64xbf16>, %kc: memref<?x16x2x64xf8E4M3FN>, %vc: memref<?x16x2x64xf8E4M3FN>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %kd: memref<1xf32>, %vd: memref<1xf32>,
    %acc: memref<?x8x4x64xf32>, %m: memref<?x8x4xf32>, %l: memref<?x8x4xf32>) {
  attn.unified q(%q : memref<?x8x64xbf16>) k_cache(%kc : memref<?x16x2x64xf8E4M3FN>) v_cache(%vc : memref<?x16x2x64xf8E4M3FN>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) k_descale(%kd : memref<1xf32>) v_descale(%vd : memref<1xf32>)
      out(%acc : memref<?x8x4x64xf32>) segment_max(%m : memref<?x8x4xf32>) segment_sum(%l : memref<?x8x4xf32>)
      {num_segments = 4 : i64}
  return
}

// Query-count ranges: the decode op (max_query_len = 4, block_q = 2) runs
// 2 tiles x batch programs, each indexing (sequence, tile) without the
// search; the prefill op keeps the searched varlen grid. Each skips the
// sequences outside its range.
// CHECK-LABEL: func.func @unified_query_len_ranges
// CHECK: %[[NCU:.*]] = memref.dim %arg4, %c0
// CHECK: %[[M2:.*]] = arith.addi %[[NCU]], %c-2
// CHECK: %[[EXT:.*]] = arith.addi %[[M2]], %[[NCU]]
// CHECK: scf.parallel (%[[P:.*]], %{{.*}}) = (%c0, %c0) to (%[[EXT]], %c2)
// CHECK-NEXT: %[[SEQ:.*]] = arith.divui %[[P]], %c2
// CHECK-NEXT: arith.remui %[[P]], %c2
// CHECK: %[[LEN:.*]] = arith.subi
// CHECK: %[[SHORT:.*]] = arith.cmpi ule, %[[LEN]], %c4
// CHECK: arith.andi %{{.*}}, %[[SHORT]]
// CHECK: scf.parallel
// CHECK-NEXT: scf.while
// CHECK: arith.addi %{{.*}}#0, %c1
// CHECK: %[[LEN2:.*]] = arith.subi
// CHECK: %[[LONG:.*]] = arith.cmpi uge, %[[LEN2]], %c5
// CHECK: arith.andi %{{.*}}, %[[LONG]]
func.func @unified_query_len_ranges(%q: memref<?x8x64xbf16>, %kc: memref<?x16x2x64xbf16>, %vc: memref<?x16x2x64xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x8x64xbf16>) {
  attn.unified q(%q : memref<?x8x64xbf16>) k_cache(%kc : memref<?x16x2x64xbf16>) v_cache(%vc : memref<?x16x2x64xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)
      out(%o : memref<?x8x64xbf16>) {max_query_len = 4 : i64, schedule = #attn.schedule<block_q = 2, block_n = 16, heads_per_program = 4>}
  attn.unified q(%q : memref<?x8x64xbf16>) k_cache(%kc : memref<?x16x2x64xbf16>) v_cache(%vc : memref<?x16x2x64xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)
      out(%o : memref<?x8x64xbf16>) {min_query_len = 5 : i64, schedule = #attn.schedule<block_q = 2, block_n = 16, heads_per_program = 4>}
  return
}

// fp8 cache entries are decoded exactly with integer code (no fp8 in LLVM).
// CHECK-LABEL: func.func @fp8_decode
// CHECK: memref.load {{.*}} : memref<?x16x2x64xf8E5M2>
// CHECK: arith.bitcast {{.*}} : f8E5M2 to i8
// CHECK: arith.extui {{.*}} : i8 to i32
func.func @fp8_decode(%q: memref<?x8x64xf16>, %kc: memref<?x16x2x64xf8E5M2>, %vc: memref<?x16x2x64xf8E5M2>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %kd: memref<1xf32>, %vd: memref<1xf32>,
    %o: memref<?x8x64xf16>) {
  attn.unified q(%q : memref<?x8x64xf16>) k_cache(%kc : memref<?x16x2x64xf8E5M2>) v_cache(%vc : memref<?x16x2x64xf8E5M2>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) k_descale(%kd : memref<1xf32>) v_descale(%vd : memref<1xf32>) out(%o : memref<?x8x64xf16>)
  return
}

// merge_states: a (token, head) grid, natural exp weights, one normalization.
// CHECK-LABEL: func.func @merge
// CHECK: scf.parallel
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: arith.truncf {{.*}} : f32 to bf16
func.func @merge(%p: memref<?x8x4x64xf32>, %m: memref<?x8x4xf32>, %l: memref<?x8x4xf32>, %o: memref<?x8x64xbf16>) {
  attn.merge_states partial(%p : memref<?x8x4x64xf32>) segment_max(%m : memref<?x8x4xf32>)
      segment_sum(%l : memref<?x8x4xf32>) out(%o : memref<?x8x64xbf16>)
  return
}

// A block-sparse program over two layout rows (block_q twice the query
// block): one loop over the union of the rows' CSR lists (scf.while,
// advancing each list past the smaller id), each block a range of keys
// whose scores are kept only for the rows of the layout rows listing it.
// CHECK-LABEL: func.func @blocksparse_two_layout_rows
// CHECK: scf.while
// CHECK: memref.load %{{.*}} : memref<4x?xi32>
// CHECK: arith.minsi
// CHECK: scf.condition
// CHECK: } do {
// CHECK: arith.select
// CHECK: scf.for
func.func @blocksparse_two_layout_rows(%q: memref<?x4x32xf32>, %cq: memref<?xi32>, %crow: memref<4x?xi32>, %col: memref<4x?xi32>, %s: f32, %o: memref<?x4x32xf32>) {
  attn.blocksparse q(%q : memref<?x4x32xf32>) k(%q : memref<?x4x32xf32>) v(%q : memref<?x4x32xf32>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%cq : memref<?xi32>) crow(%crow : memref<4x?xi32>) col(%col : memref<4x?xi32>) scale(%s) out(%o : memref<?x4x32xf32>) {block_size = 16 : i64, schedule = #attn.schedule<block_q = 32, block_n = 16, heads_per_program = 1>}
  return
}
