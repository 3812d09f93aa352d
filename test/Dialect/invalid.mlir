// RUN: attn-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule; each diagnostic names the operand or
// attribute and the rule it breaks.

func.func @prefix_prefill_q_not_rank_3(%q: memref<?x4096xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'q' must be a rank-3 memref [tokens, q_heads, head_dim], got 'memref<?x4096xbf16>'}}
  attn.prefix_prefill q(%q : memref<?x4096xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_q_not_float(%q: memref<?x32x128xi8>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'q' must have element type f32, f16, bf16, got 'i8'}}
  attn.prefix_prefill q(%q : memref<?x32x128xi8>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_q_not_strided(%q: memref<?x32x128xbf16, affine_map<(d0, d1, d2) -> (d0 floordiv 2, d1, d2)>>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'q' must have a strided layout}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16, affine_map<(d0, d1, d2) -> (d0 floordiv 2, d1, d2)>>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_q_head_dim_dynamic(%q: memref<?x32x?xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'q' dimension 2 (head_dim) must be static}}
  attn.prefix_prefill q(%q : memref<?x32x?xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_q_heads_dynamic(%q: memref<?x?x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x?x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'q' dimension 1 (q_heads) must be static}}
  attn.prefix_prefill q(%q : memref<?x?x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x?x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_k_type_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k' must have the element type of 'q' ('bf16'), got 'f16'}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_gqa_not_dividing(%q: memref<?x32x128xbf16>, %k: memref<?x6x128xbf16>, %v: memref<?x6x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k' has 6 KV heads, which must divide the 32 query heads of 'q' (GQA)}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x6x128xbf16>) v(%v : memref<?x6x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_k_head_dim_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x64xbf16>, %v: memref<?x8x64xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k' dimension 2 (head_dim = 64) must match dimension 2 of 'q' (head_dim = 128)}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x64xbf16>) v(%v : memref<?x8x64xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_v_tokens_mismatch(%q: memref<?x32x128xbf16>, %k: memref<9x8x128xbf16>, %v: memref<7x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'v' dimension 0 (tokens = 7) must match dimension 0 of 'k' (tokens = 9)}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<9x8x128xbf16>) v(%v : memref<7x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_k_tokens_mismatch(%q: memref<10x32x128xbf16>, %k: memref<9x8x128xbf16>, %v: memref<9x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k' dimension 0 (tokens = 9) must match dimension 0 of 'q' (tokens = 10)}}
  attn.prefix_prefill q(%q : memref<10x32x128xbf16>) k(%k : memref<9x8x128xbf16>) v(%v : memref<9x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_k_cache_not_rank_5(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k_cache' must be a rank-5 memref [num_blocks, kv_heads, head_dim/x, block_size, x]}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_k_cache_block_size_dynamic(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x?x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k_cache' dimension 3 (block_size) must be static}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x?x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_k_cache_kv_heads_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x4x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k_cache' dimension 1 (kv_heads = 4) must be 8 (the KV heads of 'k')}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x4x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_v_cache_head_dim_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x64x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'v_cache' dimension 2 (head_dim = 64) must be 128 (the head dim of 'q')}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x64x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_v_cache_block_size_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x32xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'v_cache' dimension 3 (block_size = 32) must match dimension 3 of 'k_cache' (block_size = 16)}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x32xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_v_cache_num_blocks_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<10x8x16x16x8xbf16>, %vc: memref<9x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'v_cache' dimension 0 (num_blocks = 9) must match dimension 0 of 'k_cache' (num_blocks = 10)}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<10x8x16x16x8xbf16>) v_cache(%vc : memref<9x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_k_cache_head_dim_split_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x4xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k_cache' splits the head dim as 16 x 4, which must equal the head dim 128}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x4xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_v_cache_type_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xf8E4M3FN>, %vc: memref<?x8x128x16xf8E5M2>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'v_cache' must have the element type of 'k_cache' ('f8E4M3FN'), got 'f8E5M2'}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xf8E4M3FN>) v_cache(%vc : memref<?x8x128x16xf8E5M2>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_k_cache_type_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xf16>, %vc: memref<?x8x128x16xf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k_cache' must have the element type of 'q' ('bf16'), got 'f16'}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xf16>) v_cache(%vc : memref<?x8x128x16xf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_fp8_cache_without_k_scale(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xf8E4M3FN>, %vc: memref<?x8x128x16xf8E4M3FN>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k_cache' is fp8 and requires operand 'k_scale'}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xf8E4M3FN>) v_cache(%vc : memref<?x8x128x16xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_k_scale_without_fp8_cache(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k_scale' is only valid when 'k_cache' is fp8}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) k_scale(%ks : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_k_scale_not_one_element(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xf8E4M3FN>, %vc: memref<?x8x128x16xf8E4M3FN>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %ks: memref<2xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k_scale' must be a one-element f32 memref (memref<f32> or memref<1xf32>), got 'memref<2xf32>'}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xf8E4M3FN>) v_cache(%vc : memref<?x8x128x16xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) k_scale(%ks : memref<2xf32>) v_scale(%vs : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_block_table_not_i32(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi64>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'block_table' must have element type i32, got 'i64'}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi64>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_query_start_size_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<4xi32>, %sl: memref<4xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'query_start' must have one more entry than 'seq_lens' (got 4 and 4)}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<4xi32>) seq_lens(%sl : memref<4xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_out_type_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xf16>, %s: f32) {
  // expected-error @+1 {{operand 'out' must have the element type of 'q' ('bf16'), got 'f16'}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xf16>)
  return
}

// -----

func.func @prefix_prefill_out_heads_mismatch(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x16x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'out' dimension 1 (q_heads = 16) must match dimension 1 of 'q' (q_heads = 32)}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_fp8_out_without_out_scale(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xf8E4M3FN>, %s: f32) {
  // expected-error @+1 {{operand 'out' is fp8 and requires operand 'out_scale'}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xf8E4M3FN>)
  return
}

// -----

func.func @out_scale_not_one_element(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %os: memref<2xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'out_scale' must be a one-element f32 memref}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out_scale(%os : memref<2xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_sliding_window_not_positive(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{attribute 'sliding_window' must be positive (omit it to disable the window), got 0}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {sliding_window = 0 : i64}
  return
}

// -----

func.func @prefix_prefill_alibi_form_without_slopes(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{attribute 'alibi_form' requires operand 'alibi_slopes'}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {alibi_form = #attn.alibi<relative>}
  return
}

// -----

func.func @prefix_prefill_alibi_slopes_not_per_q_head(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %a: memref<16xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'alibi_slopes' dimension 0 (q_heads = 16) must be 32 (one value per query head)}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) alibi_slopes(%a : memref<16xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_sinks_not_f32(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %sk: memref<32xbf16>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'sinks' must have element type f32, got 'bf16'}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) sinks(%sk : memref<32xbf16>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @prefix_prefill_sinks_with_alibi(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %a: memref<32xf32>, %sk: memref<32xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'sinks' cannot be combined with 'alibi_slopes' in prefix prefill (the ALiBi kernel has no sinks)}}
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>) block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>) scale(%s) alibi_slopes(%a : memref<32xf32>) sinks(%sk : memref<32xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @unified_k_cache_block_size_dynamic(%q: memref<?x32x128xbf16>, %kc: memref<?x?x8x128xbf16>, %vc: memref<?x?x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k_cache' dimension 1 (block_size) must be static}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x?x8x128xbf16>) v_cache(%vc : memref<?x?x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @unified_v_cache_block_size_mismatch(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x32x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'v_cache' dimension 1 (block_size = 32) must match dimension 1 of 'k_cache' (block_size = 16)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x32x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @unified_gqa_not_dividing(%q: memref<?x32x128xbf16>, %kc: memref<?x16x3x128xbf16>, %vc: memref<?x16x3x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'k_cache' has 3 KV heads, which must divide the 32 query heads of 'q' (GQA)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x3x128xbf16>) v_cache(%vc : memref<?x16x3x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @unified_fp8_q_with_non_fp8_cache(%q: memref<?x32x128xf8E4M3FN>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'q' is fp8, which requires an fp8 KV cache, got 'bf16'}}
  attn.unified q(%q : memref<?x32x128xf8E4M3FN>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @unified_fp8_q_without_q_descale(%q: memref<?x32x128xf8E4M3FN>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %kd: memref<1xf32>, %vd: memref<1xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'q' is fp8 and requires operand 'q_descale'}}
  attn.unified q(%q : memref<?x32x128xf8E4M3FN>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%kd : memref<1xf32>) v_descale(%vd : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @unified_fp8_v_cache_without_v_descale(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %kd: memref<1xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'v_cache' is fp8 and requires operand 'v_descale'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%kd : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @unified_q_descale_without_fp8_q(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %qd: memref<1xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'q_descale' is only valid when 'q' is fp8}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) q_descale(%qd : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @unified_cu_seqlens_q_size_mismatch(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<3xi32>, %su: memref<3xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'cu_seqlens_q' must have one more entry than 'seqused_k' (got 3 and 3)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<3xi32>) seqused_k(%su : memref<3xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @unified_segment_sum_without_segment_max(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %l: memref<?x32x4xf32>, %s: f32) {
  // expected-error @+1 {{operand 'segment_sum' is only valid with 'segment_max' (split-KV)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) segment_sum(%l : memref<?x32x4xf32>)
  return
}

// -----

func.func @unified_runtime_segments_without_segment_sum(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %s: f32) {
  // expected-error @+1 {{split-KV form ('num_segments') requires operands 'segment_max' and 'segment_sum'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>)
  return
}

// -----

func.func @unified_runtime_segments_stats_differ(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x8xf32>, %l: memref<?x32x8xf32>, %s: f32) {
  // expected-error @+1 {{operand 'segment_max' dimension 2 (segments = 8) must match dimension 2 of 'out' (segments = 4)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x8xf32>) segment_sum(%l : memref<?x32x8xf32>)
  return
}

// -----

func.func @unified_min_query_len_not_positive(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{attribute 'min_query_len' must be at least 1 (a query count), got 0}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {min_query_len = 0 : i64}
  return
}

// -----

func.func @unified_max_query_len_not_positive(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{attribute 'max_query_len' must be at least 1 (a query count), got -2}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {max_query_len = -2 : i64}
  return
}

// -----

func.func @unified_query_len_range_empty(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{attribute 'min_query_len' (5) must not exceed 'max_query_len' (4): no sequence would be computed}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {min_query_len = 5 : i64, max_query_len = 4 : i64}
  return
}

// -----

func.func @unified_sequence_partials_not_split(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{attribute 'sequence_partials' requires the split-KV form ('segment_max', 'segment_sum')}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {max_query_len = 4 : i64, sequence_partials}
  return
}

// -----

func.func @unified_sequence_partials_without_max_query_len(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %s: f32) {
  // expected-error @+1 {{attribute 'sequence_partials' requires 'max_query_len' (the partial rows a sequence holds)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) {sequence_partials}
  return
}

// -----

func.func @unified_sequence_partials_rows(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<6xi32>, %o: memref<20x32x4x128xf32>, %m: memref<20x32x4xf32>, %l: memref<20x32x4xf32>, %s: f32) {
  // expected-error @+1 {{operand 'out' has 20 partial rows; 'sequence_partials' needs 24 (6 sequences x max_query_len 4)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<6xi32>) scale(%s) out(%o : memref<20x32x4x128xf32>) segment_max(%m : memref<20x32x4xf32>) segment_sum(%l : memref<20x32x4xf32>) {max_query_len = 4 : i64, sequence_partials}
  return
}

// -----

func.func @unified_sequence_partials_counter_rows(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<24x32x4x128xf32>, %m: memref<24x32x4xf32>, %l: memref<24x32x4xf32>, %mo: memref<?x32x128xbf16>, %c: memref<20x32xi32>, %s: f32) {
  // expected-error @+1 {{operand 'merge_counters' dimension 0 (batch*max_query_len = 20) must match dimension 0 of 'out' (batch*max_query_len = 24)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<24x32x4x128xf32>) segment_max(%m : memref<24x32x4xf32>) segment_sum(%l : memref<24x32x4xf32>) merged_out(%mo : memref<?x32x128xbf16>) merge_counters(%c : memref<20x32xi32>) {max_query_len = 4 : i64, sequence_partials}
  return
}

// -----

func.func @unified_num_segments_not_positive(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %s: f32) {
  // expected-error @+1 {{attribute 'num_segments' must be in [1, 4096], got 0}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) {num_segments = 0 : i64}
  return
}

// -----

func.func @unified_split_kv_without_segment_outputs(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %s: f32) {
  // expected-error @+1 {{split-KV form ('num_segments') requires operands 'segment_max' and 'segment_sum'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) {num_segments = 4 : i64}
  return
}

// -----

func.func @unified_split_kv_with_out_scale(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %os: memref<1xf32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %s: f32) {
  // expected-error @+1 {{operand 'out_scale' is not valid in the split-KV form without 'merged_out'; the fp8 output belongs to the merge}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out_scale(%os : memref<1xf32>) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) {num_segments = 4 : i64}
  return
}

// -----

func.func @unified_split_kv_with_sinks(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %sk: memref<32xf32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %s: f32) {
  // expected-error @+1 {{operand 'sinks' is not valid in the split-KV form without 'merged_out'; sinks are applied once, by the merge}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) sinks(%sk : memref<32xf32>) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) {num_segments = 4 : i64}
  return
}

// -----

func.func @unified_merged_out_without_split_kv(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %mo: memref<?x32x128xbf16>, %c: memref<?x32xi32>, %s: f32) {
  // expected-error @+1 {{operand 'merged_out' is only valid in the split-KV form ('segment_max'), whose segments it merges}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) merged_out(%mo : memref<?x32x128xbf16>) merge_counters(%c : memref<?x32xi32>)
  return
}

// -----

func.func @unified_merged_out_without_merge_counters(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %mo: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'merged_out' requires operand 'merge_counters' (the arrival counters of the fused merge)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) merged_out(%mo : memref<?x32x128xbf16>)
  return
}

// -----

func.func @unified_merge_counters_without_merged_out(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %c: memref<?x32xi32>, %s: f32) {
  // expected-error @+1 {{operand 'merge_counters' is only valid with operand 'merged_out'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) merge_counters(%c : memref<?x32xi32>)
  return
}

// -----

func.func @unified_merged_out_shape_mismatch(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %mo: memref<?x32x64xbf16>, %c: memref<?x32xi32>, %s: f32) {
  // expected-error @+1 {{operand 'merged_out' dimension 2 (head_dim = 64) must match dimension 2 of 'q' (head_dim = 128)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) merged_out(%mo : memref<?x32x64xbf16>) merge_counters(%c : memref<?x32xi32>)
  return
}

// -----

func.func @unified_merged_out_fp8_without_out_scale(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %mo: memref<?x32x128xf8E4M3FN>, %c: memref<?x32xi32>, %s: f32) {
  // expected-error @+1 {{operand 'merged_out' is fp8 and requires operand 'out_scale'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) merged_out(%mo : memref<?x32x128xf8E4M3FN>) merge_counters(%c : memref<?x32xi32>)
  return
}

// -----

func.func @unified_merge_counters_not_i32(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %mo: memref<?x32x128xbf16>, %c: memref<?x32xi64>, %s: f32) {
  // expected-error @+1 {{operand 'merge_counters' must have element type i32, got 'i64'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) merged_out(%mo : memref<?x32x128xbf16>) merge_counters(%c : memref<?x32xi64>)
  return
}

// -----

func.func @unified_merge_counters_heads_mismatch(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %mo: memref<?x32x128xbf16>, %c: memref<?x8xi32>, %s: f32) {
  // expected-error @+1 {{operand 'merge_counters' dimension 1 (q_heads = 8) must match dimension 1 of 'q' (q_heads = 32)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) merged_out(%mo : memref<?x32x128xbf16>) merge_counters(%c : memref<?x8xi32>)
  return
}

// -----

func.func @unified_split_kv_out_segments_mismatch(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x8x128xf32>, %m: memref<?x32x8xf32>, %l: memref<?x32x8xf32>, %s: f32) {
  // expected-error @+1 {{operand 'out' dimension 2 (segments = 8) must be 4 ('num_segments')}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x8x128xf32>) segment_max(%m : memref<?x32x8xf32>) segment_sum(%l : memref<?x32x8xf32>) {num_segments = 4 : i64}
  return
}

// -----

func.func @unified_split_kv_out_not_f32(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xbf16>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %s: f32) {
  // expected-error @+1 {{operand 'out' must have element type f32, got 'bf16'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xbf16>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) {num_segments = 4 : i64}
  return
}

// -----

func.func @unified_segment_sum_segments_mismatch(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x2xf32>, %s: f32) {
  // expected-error @+1 {{operand 'segment_sum' dimension 2 (segments = 2) must match dimension 2 of 'out' (segments = 4)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x2xf32>) {num_segments = 4 : i64}
  return
}

// -----

func.func @unified_sliding_window_not_positive(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{attribute 'sliding_window' must be positive (omit it to disable the window), got -1}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {sliding_window = -1 : i64}
  return
}

// -----

func.func @unified_alibi_form_without_slopes(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{attribute 'alibi_form' requires operand 'alibi_slopes'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {alibi_form = #attn.alibi<context>}
  return
}

// -----

func.func @flash_v_type_mismatch(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %o: memref<?x16x128xf16>, %s: f32) {
  // expected-error @+1 {{operand 'v' must have the element type of 'q' ('f16'), got 'bf16'}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>)
  return
}

// -----

func.func @flash_cu_seqlens_k_size_mismatch(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<3xi32>, %ck: memref<4xi32>, %o: memref<?x16x128xf16>, %s: f32) {
  // expected-error @+1 {{operand 'cu_seqlens_k' dimension 0 (batch+1 = 4) must match dimension 0 of 'cu_seqlens_q' (batch+1 = 3)}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<3xi32>) cu_seqlens_k(%ck : memref<4xi32>) scale(%s) out(%o : memref<?x16x128xf16>)
  return
}

// -----

func.func @flash_bias_heads_mismatch(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %b: memref<1x8x?x?xf32>, %o: memref<?x16x128xf16>, %s: f32) {
  // expected-error @+1 {{operand 'bias' dimension 1 (q_heads = 8) must be 16 (the query heads of 'q')}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) bias(%b : memref<1x8x?x?xf32>) out(%o : memref<?x16x128xf16>)
  return
}

// -----

func.func @flash_bias_not_rank_4(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %b: memref<16x?x?xf32>, %o: memref<?x16x128xf16>, %s: f32) {
  // expected-error @+1 {{operand 'bias' must be a rank-4 memref [batch, q_heads, max_seqlen_q, max_seqlen_k]}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) bias(%b : memref<16x?x?xf32>) out(%o : memref<?x16x128xf16>)
  return
}

// -----

func.func @flash_fp8_q_without_q_scale(%q: memref<?x16x128xf8E4M3FN>, %k: memref<?x16x128xf8E4M3FN>, %v: memref<?x16x128xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %o: memref<?x16x128xf16>, %s: f32) {
  // expected-error @+1 {{operand 'q' is fp8 and requires operand 'q_scale'}}
  attn.flash q(%q : memref<?x16x128xf8E4M3FN>) k(%k : memref<?x16x128xf8E4M3FN>) v(%v : memref<?x16x128xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>)
  return
}

// -----

func.func @flash_fp8_v_without_p_scale(%q: memref<?x16x128xf8E4M3FN>, %k: memref<?x16x128xf8E4M3FN>, %v: memref<?x16x128xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x16x128xf16>, %s: f32) {
  // expected-error @+1 {{operand 'v' is fp8 and requires operand 'p_scale'}}
  attn.flash q(%q : memref<?x16x128xf8E4M3FN>) k(%k : memref<?x16x128xf8E4M3FN>) v(%v : memref<?x16x128xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) out(%o : memref<?x16x128xf16>)
  return
}

// -----

func.func @flash_p_scale_without_fp8_v(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %ps: memref<1xf32>, %o: memref<?x16x128xf16>, %s: f32) {
  // expected-error @+1 {{operand 'p_scale' is only valid when 'v' is fp8}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) p_scale(%ps : memref<1xf32>) out(%o : memref<?x16x128xf16>)
  return
}

// -----

func.func @blocksparse_crow_heads_dynamic(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<?x?xi32>, %col: memref<?x?xi32>, %o: memref<?x16x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'crow' dimension 0 (layout_heads) must be static}}
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<?x?xi32>) col(%col : memref<?x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64}
  return
}

// -----

func.func @blocksparse_crow_heads_not_shared_or_per_head(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<4x?xi32>, %col: memref<4x?xi32>, %o: memref<?x16x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'crow' dimension 0 (layout_heads = 4) must be 1 (a shared layout) or the 16 query heads}}
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<4x?xi32>) col(%col : memref<4x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64}
  return
}

// -----

func.func @blocksparse_col_heads_mismatch(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x?xi32>, %col: memref<1x?xi32>, %o: memref<?x16x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'col' dimension 0 (layout_heads = 1) must match dimension 0 of 'crow' (layout_heads = 16)}}
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<16x?xi32>) col(%col : memref<1x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64}
  return
}

// -----

func.func @blocksparse_crow_without_rows(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x1xi32>, %col: memref<16x?xi32>, %o: memref<?x16x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'crow' must have at least one row (rows+1 >= 2)}}
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<16x1xi32>) col(%col : memref<16x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64}
  return
}

// -----

func.func @blocksparse_block_size_not_positive(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x?xi32>, %col: memref<16x?xi32>, %o: memref<?x16x128xbf16>, %s: f32) {
  // expected-error @+1 {{attribute 'block_size' must be in [1, 65536], got 0}}
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<16x?xi32>) col(%col : memref<16x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 0 : i64}
  return
}

// -----

func.func @blocksparse_q_block_size_not_positive(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x?xi32>, %col: memref<16x?xi32>, %o: memref<?x16x128xbf16>, %s: f32) {
  // expected-error @+1 {{attribute 'q_block_size' must be in [1, 65536], got -16}}
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<16x?xi32>) col(%col : memref<16x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64, q_block_size = -16 : i64}
  return
}

// -----

func.func @blocksparse_fp8_q(%q: memref<?x16x128xf8E4M3FN>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x?xi32>, %col: memref<16x?xi32>, %o: memref<?x16x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'q' must have element type f32, f16, bf16, got 'f8E4M3FN'}}
  attn.blocksparse q(%q : memref<?x16x128xf8E4M3FN>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<16x?xi32>) col(%col : memref<16x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64}
  return
}

// -----

func.func @blocksparse_out_type_mismatch(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x?xi32>, %col: memref<16x?xi32>, %o: memref<?x16x128xf32>, %s: f32) {
  // expected-error @+1 {{operand 'out' must have the element type of 'q' ('bf16'), got 'f32'}}
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<16x?xi32>) col(%col : memref<16x?xi32>) scale(%s) out(%o : memref<?x16x128xf32>) {block_size = 64 : i64}
  return
}

// -----

func.func @merge_states_max_sum_with_lse(%p: memref<?x32x16x128xf32>, %m: memref<?x32x16xf32>, %l: memref<?x32x16xf32>, %lse: memref<?x32x16xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{takes either 'segment_max' and 'segment_sum' or 'segment_lse', not both}}
  attn.merge_states partial(%p : memref<?x32x16x128xf32>) segment_max(%m : memref<?x32x16xf32>) segment_sum(%l : memref<?x32x16xf32>) segment_lse(%lse : memref<?x32x16xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @merge_states_without_segment_stats(%p: memref<?x32x16x128xf32>, %m: memref<?x32x16xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{requires 'segment_max' and 'segment_sum' (or 'segment_lse')}}
  attn.merge_states partial(%p : memref<?x32x16x128xf32>) segment_max(%m : memref<?x32x16xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @merge_states_segment_sum_segments_mismatch(%p: memref<?x32x16x128xf32>, %m: memref<?x32x16xf32>, %l: memref<?x32x8xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'segment_sum' dimension 2 (segments = 8) must match dimension 2 of 'partial' (segments = 16)}}
  attn.merge_states partial(%p : memref<?x32x16x128xf32>) segment_max(%m : memref<?x32x16xf32>) segment_sum(%l : memref<?x32x8xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @merge_states_partial_head_dim_dynamic(%p: memref<?x32x16x?xf32>, %m: memref<?x32x16xf32>, %l: memref<?x32x16xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'partial' dimension 3 (head_dim) must be static}}
  attn.merge_states partial(%p : memref<?x32x16x?xf32>) segment_max(%m : memref<?x32x16xf32>) segment_sum(%l : memref<?x32x16xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @merge_states_partial_not_f32(%p: memref<?x32x16x128xbf16>, %m: memref<?x32x16xf32>, %l: memref<?x32x16xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'partial' must have element type f32, got 'bf16'}}
  attn.merge_states partial(%p : memref<?x32x16x128xbf16>) segment_max(%m : memref<?x32x16xf32>) segment_sum(%l : memref<?x32x16xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @merge_states_lse_partial_not_float(%p: memref<?x32x16x128xf8E4M3FN>, %lse: memref<?x32x16xf32>, %o: memref<?x32x128xbf16>) {
  // expected-error @+1 {{operand 'partial' must have element type f32, f16, bf16, got 'f8E4M3FN'}}
  attn.merge_states partial(%p : memref<?x32x16x128xf8E4M3FN>) segment_lse(%lse : memref<?x32x16xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @merge_states_out_head_dim_mismatch(%p: memref<?x32x16x128xf32>, %m: memref<?x32x16xf32>, %l: memref<?x32x16xf32>, %o: memref<?x32x64xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'out' dimension 2 (head_dim = 64) must match dimension 3 of 'partial' (head_dim = 128)}}
  attn.merge_states partial(%p : memref<?x32x16x128xf32>) segment_max(%m : memref<?x32x16xf32>) segment_sum(%l : memref<?x32x16xf32>) out(%o : memref<?x32x64xbf16>)
  return
}

// -----

func.func @merge_states_fp8_out_without_out_scale(%p: memref<?x32x16x128xf32>, %m: memref<?x32x16xf32>, %l: memref<?x32x16xf32>, %o: memref<?x32x128xf8E4M3FN>, %s: f32) {
  // expected-error @+1 {{operand 'out' is fp8 and requires operand 'out_scale'}}
  attn.merge_states partial(%p : memref<?x32x16x128xf32>) segment_max(%m : memref<?x32x16xf32>) segment_sum(%l : memref<?x32x16xf32>) out(%o : memref<?x32x128xf8E4M3FN>)
  return
}

// -----

func.func @merge_states_sinks_not_per_q_head(%p: memref<?x32x16x128xf32>, %m: memref<?x32x16xf32>, %l: memref<?x32x16xf32>, %sk: memref<8xf32>, %o: memref<?x32x128xbf16>, %s: f32) {
  // expected-error @+1 {{operand 'sinks' dimension 0 (q_heads = 8) must be 32 (one value per query head)}}
  attn.merge_states partial(%p : memref<?x32x16x128xf32>) segment_max(%m : memref<?x32x16xf32>) segment_sum(%l : memref<?x32x16xf32>) sinks(%sk : memref<8xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @flash_partial_dropout(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %p: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{dropout needs all of 'dropout_p', 'philox_seed' and 'philox_offset'}}
  "attn.flash"(%q, %k, %v, %cq, %ck, %s, %p, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0>}> : (memref<?x16x128xf16>, memref<?x16x128xf16>, memref<?x16x128xf16>, memref<?xi32>, memref<?xi32>, f32, f32, memref<?x16x128xf16>) -> ()
  return
}

// -----

func.func @schedule_not_positive(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{#attn.schedule needs positive block_q, block_n and heads_per_program, got 0, 32, 1}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 0, block_n = 32, heads_per_program = 1>}
  return
}

// -----

func.func @schedule_too_many_warps(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{#attn.schedule needs 0 to 32 warps (0: one per 16 rows), got 33}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 64, block_n = 32, heads_per_program = 1, warps = 33>}
  return
}

// -----

func.func @schedule_producer_warps_not_a_warpgroup(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{#attn.schedule needs 0 or 4 producer_warps (a producer warpgroup), got 2}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 128, block_n = 64, heads_per_program = 1, warps = 8, tma = true, producer_warps = 2>}
  return
}

// -----

func.func @schedule_persistent_without_tma(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{#attn.schedule persistent needs tma = true (its producer loads by TMA)}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 128, block_n = 64, heads_per_program = 1, warps = 8, producer_warps = 4, persistent = true>}
  return
}

// -----

func.func @schedule_stages_out_of_range(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{#attn.schedule needs 0 to 4 stages (0: the target's choice), got 5}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 64, block_n = 64, heads_per_program = 1, stages = 5>}
  return
}

// -----

func.func @schedule_producer_with_one_stage(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{#attn.schedule producer_warps = 4 needs a ring of 2 stages, got stages = 1}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 128, block_n = 64, heads_per_program = 1, warps = 8, tma = true, producer_warps = 4, stages = 1>}
  return
}

// -----

func.func @schedule_pingpong_without_producer(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{#attn.schedule pingpong needs producer_warps = 4}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 128, block_n = 64, heads_per_program = 1, warps = 8, tma = true, pingpong = true>}
  return
}

// -----

func.func @schedule_persistent_without_producer(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{#attn.schedule persistent needs producer_warps = 4}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 128, block_n = 64, heads_per_program = 1, warps = 8, tma = true, persistent = true>}
  return
}

// -----

func.func @schedule_pack_not_dividing_group(%q: memref<?x8x64xf16>, %k: memref<?x2x64xf16>, %v: memref<?x2x64xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x8x64xf16>) {
  // expected-error @+1 {{attribute 'schedule' packs 3 heads per program, which must divide the 4 query heads per KV head}}
  attn.flash q(%q : memref<?x8x64xf16>) k(%k : memref<?x2x64xf16>) v(%v : memref<?x2x64xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x8x64xf16>) {schedule = #attn.schedule<block_q = 4, block_n = 32, heads_per_program = 3>}
  return
}

// -----

func.func @schedule_straddles_layout_rows(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<1x?xi32>, %col: memref<1x?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  // expected-error @+1 {{attribute 'schedule' block_q = 3 must divide the query block size 64 or be twice it}}
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<1x?xi32>) col(%col : memref<1x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64, schedule = #attn.schedule<block_q = 3, block_n = 32, heads_per_program = 4>}
  return
}

// -----

func.func @schedule_packs_per_head_layouts(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x?xi32>, %col: memref<16x?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  // expected-error @+1 {{attribute 'schedule' must use heads_per_program = 1 with a per-head layout}}
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<16x?xi32>) col(%col : memref<16x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 64 : i64, schedule = #attn.schedule<block_q = 4, block_n = 32, heads_per_program = 4>}
  return
}

// -----

// Generic-form and bytecode ops carry their own operandSegmentSizes: a
// required operand left empty or given two values is a diagnostic, never a
// crash in the accessors.
func.func @prefix_prefill_required_operand_empty(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  // expected-error @+1 {{operand 'out' requires exactly 1 value, but 'operandSegmentSizes' gives it 0}}
  "attn.prefix_prefill"(%q, %k, %v, %kc, %vc, %bt, %qs, %sl, %s, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0>}> : (memref<?x32x128xbf16>, memref<?x8x128xbf16>, memref<?x8x128xbf16>, memref<?x8x16x16x8xbf16>, memref<?x8x128x16xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>, f32, memref<?x32x128xbf16>) -> ()
  return
}

// -----

func.func @prefix_prefill_required_operand_doubled(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  // expected-error @+1 {{operand 'q' requires exactly 1 value, but 'operandSegmentSizes' gives it 2}}
  "attn.prefix_prefill"(%q, %k, %v, %kc, %vc, %bt, %qs, %sl, %s, %o) <{operandSegmentSizes = array<i32: 2, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1>}> : (memref<?x32x128xbf16>, memref<?x8x128xbf16>, memref<?x8x128xbf16>, memref<?x8x16x16x8xbf16>, memref<?x8x128x16xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>, f32, memref<?x32x128xbf16>) -> ()
  return
}

// -----

func.func @unified_required_operand_empty(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  // expected-error @+1 {{operand 'scale' requires exactly 1 value, but 'operandSegmentSizes' gives it 0}}
  "attn.unified"(%q, %kc, %vc, %bt, %cu, %su, %s, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0>}> : (memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>, f32, memref<?x32x128xbf16>) -> ()
  return
}

// -----

func.func @flash_required_operand_doubled(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{operand 'cu_seqlens_q' requires exactly 1 value, but 'operandSegmentSizes' gives it 2}}
  "attn.flash"(%q, %k, %v, %cq, %ck, %s, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0>}> : (memref<?x16x128xf16>, memref<?x16x128xf16>, memref<?x16x128xf16>, memref<?xi32>, memref<?xi32>, f32, memref<?x16x128xf16>) -> ()
  return
}

// -----

func.func @merge_states_required_operand_empty(%acc: memref<?x32x16x128xf32>, %m: memref<?x32x16xf32>, %l: memref<?x32x16xf32>, %o: memref<?x32x128xf16>) {
  // expected-error @+1 {{operand 'partial' requires exactly 1 value, but 'operandSegmentSizes' gives it 0}}
  "attn.merge_states"(%acc, %m, %l, %o) <{operandSegmentSizes = array<i32: 0, 1, 1, 1, 0, 0, 1>}> : (memref<?x32x16x128xf32>, memref<?x32x16xf32>, memref<?x32x16xf32>, memref<?x32x128xf16>) -> ()
  return
}

// -----

// Every size has an upper bound (attn/IR/AttnLimits.h), so no lowering
// forms a product that overflows or a program no target can hold.
func.func @head_dim_above_limit(%q: memref<?x16x2048xf16>, %k: memref<?x16x2048xf16>, %v: memref<?x16x2048xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x2048xf16>) {
  // expected-error @+1 {{operand 'q' dimension 2 (head_dim = 2048) must be at most 1024}}
  attn.flash q(%q : memref<?x16x2048xf16>) k(%k : memref<?x16x2048xf16>) v(%v : memref<?x16x2048xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x2048xf16>)
  return
}

// -----

func.func @head_dim_near_int64_max(%q: memref<?x16x9223372036854775807xf16>, %k: memref<?x16x9223372036854775807xf16>, %v: memref<?x16x9223372036854775807xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x9223372036854775807xf16>) {
  // expected-error @+1 {{operand 'q' dimension 2 (head_dim = 9223372036854775807) must be at most 1024}}
  attn.flash q(%q : memref<?x16x9223372036854775807xf16>) k(%k : memref<?x16x9223372036854775807xf16>) v(%v : memref<?x16x9223372036854775807xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x9223372036854775807xf16>)
  return
}

// -----

func.func @query_heads_above_limit(%q: memref<?x8192x64xf16>, %k: memref<?x8192x64xf16>, %v: memref<?x8192x64xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x8192x64xf16>) {
  // expected-error @+1 {{operand 'q' dimension 1 (q_heads = 8192) must be at most 4096}}
  attn.flash q(%q : memref<?x8192x64xf16>) k(%k : memref<?x8192x64xf16>) v(%v : memref<?x8192x64xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x8192x64xf16>)
  return
}

// -----

func.func @page_size_above_limit(%q: memref<?x32x128xbf16>, %kc: memref<?x131072x8x128xbf16>, %vc: memref<?x131072x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  // expected-error @+1 {{operand 'k_cache' dimension 1 (block_size = 131072) must be at most 65536}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x131072x8x128xbf16>) v_cache(%vc : memref<?x131072x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @sliding_window_above_limit(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  // expected-error @+1 {{attribute 'sliding_window' must be at most 2147483647 (positions are 32-bit; omit it to disable the window), got 9223372036854775807}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {sliding_window = 9223372036854775807 : i64}
  return
}

// -----

func.func @num_segments_above_limit(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x5000x128xf32>, %m: memref<?x32x5000xf32>, %l: memref<?x32x5000xf32>, %s: f32) {
  // expected-error @+1 {{attribute 'num_segments' must be in [1, 4096], got 5000}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x5000x128xf32>) segment_max(%m : memref<?x32x5000xf32>) segment_sum(%l : memref<?x32x5000xf32>) {num_segments = 5000 : i64}
  return
}

// -----

func.func @schedule_tile_above_limit(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{#attn.schedule needs block_q and block_n of at most 4096, got 2147483648 and 64}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 2147483648, block_n = 64, heads_per_program = 1>}
  return
}

// -----

func.func @schedule_rows_above_limit(%q: memref<?x16x128xf16>, %k: memref<?x2x128xf16>, %v: memref<?x2x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{#attn.schedule tiles 4096 x 8 rows (block_q x heads_per_program) per program; at most 4096 are allowed}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x2x128xf16>) v(%v : memref<?x2x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 4096, block_n = 64, heads_per_program = 8>}
  return
}

// -----

func.func @schedule_heads_near_int64_max(%q: memref<?x16x128xf16>, %k: memref<?x2x128xf16>, %v: memref<?x2x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  // expected-error @+1 {{#attn.schedule tiles 4 x 9223372036854775807 rows}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x2x128xf16>) v(%v : memref<?x2x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 4, block_n = 64, heads_per_program = 9223372036854775807>}
  return
}

// -----

func.func @blocksparse_block_size_above_limit(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x?xi32>, %col: memref<16x?xi32>, %o: memref<?x16x128xbf16>, %s: f32) {
  // expected-error @+1 {{attribute 'block_size' must be in [1, 65536], got 4294967296}}
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) crow(%crow : memref<16x?xi32>) col(%col : memref<16x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {block_size = 4294967296 : i64}
  return
}

// -----

func.func @merge_states_head_dim_above_limit(%acc: memref<?x32x16x4096xf32>, %m: memref<?x32x16xf32>, %l: memref<?x32x16xf32>, %o: memref<?x32x4096xf16>) {
  // expected-error @+1 {{operand 'partial' dimension 3 (head_dim = 4096) must be at most 1024}}
  attn.merge_states partial(%acc : memref<?x32x16x4096xf32>) segment_max(%m : memref<?x32x16xf32>) segment_sum(%l : memref<?x32x16xf32>) out(%o : memref<?x32x4096xf16>)
  return
}

// -----

func.func @unified_qq_bias_not_rank_2(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %x: memref<4xf32>) {
  // expected-error @+1 {{operand 'qq_bias' must be a rank-2 memref [qq_rows, qq_cols], got 'memref<4xf32>'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) qq_bias(%x : memref<4xf32>) out(%o : memref<?x32x128xbf16>) 
  return
}

// -----

func.func @unified_mm_prefix_range_not_pairs(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %x: memref<?x2x3xi32>) {
  // expected-error @+1 {{operand 'mm_prefix_range' dimension 2 (2 = 3) must be at most 2}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) mm_prefix_range(%x : memref<?x2x3xi32>) out(%o : memref<?x32x128xbf16>) 
  return
}

// -----

func.func @unified_mm_prefix_clamp_window_without_ranges(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %x: memref<?xi32>) {
  // expected-error @+1 {{attribute 'mm_prefix_clamp_window' requires operand 'mm_prefix_range'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)  out(%o : memref<?x32x128xbf16>) {mm_prefix_clamp_window}
  return
}

// -----

func.func @unified_rswa_without_window(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %x: memref<?xi32>) {
  // expected-error @+1 {{R-SWA needs both operand 'rswa_prefix_lens' and attribute 'rswa_window'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) rswa_prefix_lens(%x : memref<?xi32>) out(%o : memref<?x32x128xbf16>) 
  return
}

// -----

func.func @unified_rswa_window_not_positive(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %x: memref<?xi32>) {
  // expected-error @+1 {{attribute 'rswa_window' must be in [1, 2147483647], got 0}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) rswa_prefix_lens(%x : memref<?xi32>) out(%o : memref<?x32x128xbf16>) {rswa_window = 0 : i64}
  return
}

// -----

func.func @unified_rswa_with_sliding_window(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %x: memref<?xi32>) {
  // expected-error @+1 {{operand 'rswa_prefix_lens' cannot be combined with attribute 'sliding_window'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) rswa_prefix_lens(%x : memref<?xi32>) out(%o : memref<?x32x128xbf16>) {rswa_window = 8 : i64, sliding_window = 16 : i64}
  return
}

// -----

func.func @unified_descale_not_per_kv_head(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %ks: memref<?x4xf32>, %vs: memref<1xf32>) {
  // expected-error @+1 {{operand 'k_descale' dimension 1 (kv_heads = 4) must be 8 (one value per KV head)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%ks : memref<?x4xf32>) v_descale(%vs : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

func.func @unified_scale_cache_without_pair(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xi8>, %vc: memref<?x16x8x128xi8>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %ksc: memref<?x16x8xf32>, %f: memref<?xi8>, %d: memref<1xf32>) {
  // expected-error @+1 {{operand 'k_scale_cache' requires operand 'v_scale_cache' (per-token-head scales come in pairs)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xi8>) v_cache(%vc : memref<?x16x8x128xi8>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_scale_cache(%ksc : memref<?x16x8xf32>) out(%o : memref<?x32x128xbf16>) 
  return
}

// -----

func.func @unified_int8_cache_without_scale_caches(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xi8>, %vc: memref<?x16x8x128xi8>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %ksc: memref<?x16x8xf32>, %f: memref<?xi8>, %d: memref<1xf32>) {
  // expected-error @+1 {{operand 'k_cache' must have element type f32, f16, bf16, f8E4M3FN, f8E5M2, got 'i8'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xi8>) v_cache(%vc : memref<?x16x8x128xi8>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) 
  return
}

// -----

func.func @unified_scale_caches_need_quantized_cache(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %ksc: memref<?x16x8xf32>, %f: memref<?xi8>, %d: memref<1xf32>) {
  // expected-error @+1 {{operand 'k_cache' must hold i8 or fp8 values with per-token-head scale caches, got 'bf16'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_scale_cache(%ksc : memref<?x16x8xf32>) v_scale_cache(%ksc : memref<?x16x8xf32>) out(%o : memref<?x32x128xbf16>) 
  return
}

// -----

func.func @unified_scale_cache_not_per_kv_head(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xi8>, %vc: memref<?x16x8x128xi8>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %ksc: memref<?x16x4xf32>, %f: memref<?xi8>, %d: memref<1xf32>) {
  // expected-error @+1 {{dimension 2}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xi8>) v_cache(%vc : memref<?x16x8x128xi8>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_scale_cache(%ksc : memref<?x16x4xf32>) v_scale_cache(%ksc : memref<?x16x4xf32>) out(%o : memref<?x32x128xbf16>) 
  return
}

// -----

func.func @unified_scale_caches_with_descale(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %ksc: memref<?x16x8xf32>, %f: memref<?xi8>, %d: memref<1xf32>) {
  // expected-error @+1 {{operand 'k_descale' cannot be combined with per-token-head scale caches}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%d : memref<1xf32>) v_descale(%d : memref<1xf32>) k_scale_cache(%ksc : memref<?x16x8xf32>) v_scale_cache(%ksc : memref<?x16x8xf32>) out(%o : memref<?x32x128xbf16>) 
  return
}

// -----

func.func @unified_scale_caches_with_fp8_query(%q: memref<?x32x128xf8E4M3FN>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %ksc: memref<?x16x8xf32>, %f: memref<?xi8>, %d: memref<1xf32>) {
  // expected-error @+1 {{operand 'q' must not be fp8 with per-token-head scale caches}}
  attn.unified q(%q : memref<?x32x128xf8E4M3FN>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) q_descale(%d : memref<1xf32>) k_scale_cache(%ksc : memref<?x16x8xf32>) v_scale_cache(%ksc : memref<?x16x8xf32>) out(%o : memref<?x32x128xbf16>) 
  return
}

// -----

func.func @unified_causal_flags_not_i8(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %ksc: memref<?x16x8xf32>, %f: memref<?xi32>, %d: memref<1xf32>) {
  // expected-error @+1 {{operand 'causal_flags' must have element type i8, got 'i32'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) causal_flags(%f : memref<?xi32>) out(%o : memref<?x32x128xbf16>) 
  return
}

// -----

func.func @unified_causal_flags_with_bidirectional(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %ksc: memref<?x16x8xf32>, %f: memref<?xi8>, %d: memref<1xf32>) {
  // expected-error @+1 {{operand 'causal_flags' and attribute 'bidirectional' are exclusive}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) causal_flags(%f : memref<?xi8>) out(%o : memref<?x32x128xbf16>) {bidirectional}
  return
}

// -----

func.func @unified_chunk_lookback_without_window(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %ksc: memref<?x16x8xf32>, %f: memref<?xi8>, %d: memref<1xf32>) {
  // expected-error @+1 {{attribute 'chunk_lookback' requires attribute 'sliding_window'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {chunk_lookback = 1 : i64}
  return
}

// -----

func.func @unified_chunk_lookback_empty_chunks(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>, %ksc: memref<?x16x8xf32>, %f: memref<?xi8>, %d: memref<1xf32>) {
  // expected-error @+1 {{attribute 'chunk_lookback' must be in [0, sliding_window)}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) {chunk_lookback = 8 : i64, sliding_window = 8 : i64}
  return
}

// -----

func.func @flash_quantize_to_not_fp8(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %x: memref<1xf32>, %o: memref<?x16x128xbf16>) {
  // expected-error @+1 {{attribute 'quantize_to' must be an fp8 type, got 'bf16'}}
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%x : memref<1xf32>) k_scale(%x : memref<1xf32>) v_scale(%x : memref<1xf32>) p_scale(%x : memref<1xf32>) out(%o : memref<?x16x128xbf16>) {quantize_to = bf16}
  return
}

// -----

func.func @flash_quantize_to_other_fp8_input(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xf8E5M2>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %x: memref<1xf32>, %o: memref<?x16x128xbf16>) {
  // expected-error @+1 {{operand 'k' must be 'f8E4M3FN' or a float type quantized on load, got 'f8E5M2'}}
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xf8E5M2>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%x : memref<1xf32>) k_scale(%x : memref<1xf32>) v_scale(%x : memref<1xf32>) p_scale(%x : memref<1xf32>) out(%o : memref<?x16x128xbf16>) {quantize_to = f8E4M3FN}
  return
}

// -----

func.func @flash_quantize_to_without_scales(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %x: memref<1xf32>, %o: memref<?x16x128xbf16>) {
  // expected-error @+1 {{attribute 'quantize_to' requires operand 'q_scale'}}
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {quantize_to = f8E4M3FN}
  return
}

// -----

func.func @flash_mixed_types_without_quantize_to(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xf8E4M3FN>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %x: memref<1xf32>, %o: memref<?x16x128xbf16>) {
  // expected-error @+1 {{operand 'k' must have the element type of 'q' ('bf16'), got 'f8E4M3FN'}}
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xf8E4M3FN>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) 
  return
}

// -----

func.func @lse_must_be_f32(%q: memref<?x16x128xf16>, %k: memref<?x4x128xf16>, %v: memref<?x4x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>, %lse: memref<?x16xf16>) {
  // expected-error @+1 {{operand 'lse' must have element type f32, got 'f16'}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x4x128xf16>) v(%v : memref<?x4x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) lse(%lse : memref<?x16xf16>)
  return
}

// -----

func.func @lse_heads_match_q(%q: memref<?x16x128xf16>, %k: memref<?x4x128xf16>, %v: memref<?x4x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>, %lse: memref<?x4xf32>) {
  // expected-error @+1 {{operand 'lse' dimension 1 (q_heads = 4) must match dimension 1 of 'q' (q_heads = 16)}}
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x4x128xf16>) v(%v : memref<?x4x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) lse(%lse : memref<?x4xf32>)
  return
}

// -----

func.func @lse_rank_is_two(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x128xbf16>, %lse: memref<?x32x1xf32>, %s: f32) {
  // expected-error @+1 {{operand 'lse' must be a rank-2 memref [tokens, q_heads], got 'memref<?x32x1xf32>'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x128xbf16>) lse(%lse : memref<?x32x1xf32>)
  return
}

// -----

func.func @unified_fused_merge_lse_rank(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>, %mo: memref<?x32x128xbf16>, %mc: memref<?x32xi32>, %lse: memref<?x32x1xf32>, %s: f32) {
  // expected-error @+1 {{operand 'lse' must be a rank-2 memref [tokens, q_heads], got 'memref<?x32x1xf32>'}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>) lse(%lse : memref<?x32x1xf32>) merged_out(%mo : memref<?x32x128xbf16>) merge_counters(%mc : memref<?x32xi32>)
  return
}

// -----

func.func @unified_lse_not_in_split_kv_without_merged_out(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %o: memref<?x32x4x128xf32>, %m: memref<?x32x4xf32>, %l: memref<?x32x4xf32>, %lse: memref<?x32xf32>, %s: f32) {
  // expected-error @+1 {{operand 'lse' is not valid in the split-KV form without 'merged_out'; its segment statistics go to attn.merge_states}}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x4x128xf32>) segment_max(%m : memref<?x32x4xf32>) segment_sum(%l : memref<?x32x4xf32>) lse(%lse : memref<?x32xf32>) {num_segments = 4 : i64}
  return
}
