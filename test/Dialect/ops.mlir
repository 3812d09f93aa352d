// RUN: attn-opt %s | attn-opt | FileCheck %s
// RUN: attn-opt %s --mlir-print-op-generic | attn-opt | FileCheck %s
// RUN: attn-opt %s --emit-bytecode | attn-opt | FileCheck %s

// Every op with every operand and attribute, printed, re-parsed and printed
// again (custom, generic and bytecode forms).

// CHECK-LABEL: func.func @prefix_prefill_minimal
// CHECK: attn.prefix_prefill q(%{{.*}} : memref<?x32x128xbf16>) k(%{{.*}} : memref<?x8x128xbf16>) v(%{{.*}} : memref<?x8x128xbf16>) k_cache(%{{.*}} : memref<?x8x16x16x8xbf16>) v_cache(%{{.*}} : memref<?x8x128x16xbf16>) block_table(%{{.*}} : memref<?x?xi32>) query_start(%{{.*}} : memref<?xi32>) seq_lens(%{{.*}} : memref<?xi32>) scale(%{{.*}}) out(%{{.*}} : memref<?x32x128xbf16>){{$}}
func.func @prefix_prefill_minimal(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>,
    %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>,
    %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>)
      k_cache(%kc : memref<?x8x16x16x8xbf16>) v_cache(%vc : memref<?x8x128x16xbf16>)
      block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>)
      scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// CHECK-LABEL: func.func @prefix_prefill_fp8_sinks_window
// CHECK: attn.prefix_prefill
// CHECK-SAME: k_cache(%{{.*}} : memref<?x8x16x16x8xf8E4M3FN>) v_cache(%{{.*}} : memref<?x8x128x16xf8E4M3FN>)
// CHECK-SAME: scale(%{{.*}}) k_scale(%{{.*}} : memref<1xf32>) v_scale(%{{.*}} : memref<f32>) sinks(%{{.*}} : memref<32xf32>) out_scale(%{{.*}} : memref<1xf32>) out(%{{.*}} : memref<?x32x128xf8E4M3FN>)
// CHECK-SAME: {skip_decode, sliding_window = 256 : i64}
func.func @prefix_prefill_fp8_sinks_window(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>,
    %kc: memref<?x8x16x16x8xf8E4M3FN>, %vc: memref<?x8x128x16xf8E4M3FN>, %bt: memref<?x?xi32>,
    %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<f32>,
    %sinks: memref<32xf32>, %os: memref<1xf32>, %o: memref<?x32x128xf8E4M3FN>) {
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>)
      k_cache(%kc : memref<?x8x16x16x8xf8E4M3FN>) v_cache(%vc : memref<?x8x128x16xf8E4M3FN>)
      block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>)
      scale(%s) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<f32>) sinks(%sinks : memref<32xf32>)
      out_scale(%os : memref<1xf32>) out(%o : memref<?x32x128xf8E4M3FN>) {sliding_window = 256 : i64, skip_decode}
  return
}

// A strided view of q (non-unit head stride, as a slice of a fused QKV
// buffer) with an fp8 e5m2 cache, ALiBi and a head dim that is no power of 2.
// CHECK-LABEL: func.func @prefix_prefill_alibi_strided
// CHECK: attn.prefix_prefill q(%{{.*}} : memref<?x12x80xf16, strided<[2880, 240, 1]>>)
// CHECK-SAME: k_cache(%{{.*}} : memref<?x4x10x5x8xf8E5M2>) v_cache(%{{.*}} : memref<?x4x80x5xf8E5M2>)
// CHECK-SAME: alibi_slopes(%{{.*}} : memref<12xf32>) out(%{{.*}} : memref<?x12x80xf16>) {alibi_form = #attn.alibi<relative>}
func.func @prefix_prefill_alibi_strided(%q: memref<?x12x80xf16, strided<[2880, 240, 1]>>, %k: memref<?x4x80xf16>,
    %v: memref<?x4x80xf16>, %kc: memref<?x4x10x5x8xf8E5M2>, %vc: memref<?x4x80x5xf8E5M2>,
    %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %ks: memref<1xf32>,
    %vs: memref<1xf32>, %alibi: memref<12xf32>, %o: memref<?x12x80xf16>) {
  attn.prefix_prefill q(%q : memref<?x12x80xf16, strided<[2880, 240, 1]>>) k(%k : memref<?x4x80xf16>) v(%v : memref<?x4x80xf16>)
      k_cache(%kc : memref<?x4x10x5x8xf8E5M2>) v_cache(%vc : memref<?x4x80x5xf8E5M2>)
      block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>)
      scale(%s) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) alibi_slopes(%alibi : memref<12xf32>)
      out(%o : memref<?x12x80xf16>) {alibi_form = #attn.alibi<relative>}
  return
}

// CHECK-LABEL: func.func @unified_minimal
// CHECK: attn.unified q(%{{.*}} : memref<?x32x128xbf16>) k_cache(%{{.*}} : memref<?x16x8x128xbf16>) v_cache(%{{.*}} : memref<?x16x8x128xbf16>) block_table(%{{.*}} : memref<?x?xi32>) cu_seqlens_q(%{{.*}} : memref<?xi32>) seqused_k(%{{.*}} : memref<?xi32>) scale(%{{.*}}) out(%{{.*}} : memref<?x32x128xbf16>){{$}}
func.func @unified_minimal(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%o : memref<?x32x128xbf16>)
  return
}

// CHECK-LABEL: func.func @unified_everything
// CHECK: attn.unified q(%{{.*}} : memref<?x40x96xf8E4M3FN>) k_cache(%{{.*}} : memref<?x48x8x96xf8E4M3FN>) v_cache(%{{.*}} : memref<?x48x8x96xf8E4M3FN>)
// CHECK-SAME: scale(%{{.*}}) softcap(%{{.*}}) q_descale(%{{.*}} : memref<1xf32>) k_descale(%{{.*}} : memref<1xf32>) v_descale(%{{.*}} : memref<1xf32>) alibi_slopes(%{{.*}} : memref<40xf32>) sinks(%{{.*}} : memref<40xf32>) out_scale(%{{.*}} : memref<1xf32>) out(%{{.*}} : memref<?x40x96xf8E4M3FN>)
// CHECK-SAME: {alibi_form = #attn.alibi<absolute>, sliding_window = 1024 : i64}
func.func @unified_everything(%q: memref<?x40x96xf8E4M3FN>, %kc: memref<?x48x8x96xf8E4M3FN>,
    %vc: memref<?x48x8x96xf8E4M3FN>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>,
    %s: f32, %cap: f32, %qd: memref<1xf32>, %kd: memref<1xf32>, %vd: memref<1xf32>,
    %alibi: memref<40xf32>, %sinks: memref<40xf32>, %os: memref<1xf32>, %o: memref<?x40x96xf8E4M3FN>) {
  attn.unified q(%q : memref<?x40x96xf8E4M3FN>) k_cache(%kc : memref<?x48x8x96xf8E4M3FN>)
      v_cache(%vc : memref<?x48x8x96xf8E4M3FN>) block_table(%bt : memref<?x?xi32>)
      cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) softcap(%cap)
      q_descale(%qd : memref<1xf32>) k_descale(%kd : memref<1xf32>) v_descale(%vd : memref<1xf32>)
      alibi_slopes(%alibi : memref<40xf32>) sinks(%sinks : memref<40xf32>) out_scale(%os : memref<1xf32>)
      out(%o : memref<?x40x96xf8E4M3FN>) {sliding_window = 1024 : i64, alibi_form = #attn.alibi<absolute>}
  return
}

// CHECK-LABEL: func.func @unified_split_kv
// CHECK: attn.unified
// CHECK-SAME: out(%{{.*}} : memref<?x32x16x128xf32>) segment_max(%{{.*}} : memref<?x32x16xf32>) segment_sum(%{{.*}} : memref<?x32x16xf32>) {alibi_form = #attn.alibi<context>, num_segments = 16 : i64}
func.func @unified_split_kv(%q: memref<?x32x128xf16>, %kc: memref<?x16x8x128xf8E5M2>, %vc: memref<?x16x8x128xf8E5M2>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %kd: memref<1xf32>,
    %vd: memref<1xf32>, %alibi: memref<32xf32>, %acc: memref<?x32x16x128xf32>, %m: memref<?x32x16xf32>,
    %l: memref<?x32x16xf32>) {
  attn.unified q(%q : memref<?x32x128xf16>) k_cache(%kc : memref<?x16x8x128xf8E5M2>) v_cache(%vc : memref<?x16x8x128xf8E5M2>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) k_descale(%kd : memref<1xf32>) v_descale(%vd : memref<1xf32>) alibi_slopes(%alibi : memref<32xf32>)
      out(%acc : memref<?x32x16x128xf32>) segment_max(%m : memref<?x32x16xf32>) segment_sum(%l : memref<?x32x16xf32>)
      {num_segments = 16 : i64, alibi_form = #attn.alibi<context>}
  return
}

// Split-KV with the segment count chosen at run time: no num_segments; the
// count is out's dim 2.
// CHECK-LABEL: func.func @unified_split_kv_runtime_segments
// CHECK: attn.unified
// CHECK-SAME: out(%{{.*}} : memref<?x32x?x128xf32>) segment_max(%{{.*}} : memref<?x32x?xf32>) segment_sum(%{{.*}} : memref<?x32x?xf32>){{$}}
func.func @unified_split_kv_runtime_segments(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %acc: memref<?x32x?x128xf32>,
    %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%acc : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>)
  return
}

// Split-KV that merges its own segments (merged_out, merge_counters), with
// the sinks and the fp8 output scale its merge applies.
// CHECK-LABEL: func.func @unified_split_kv_fused_merge
// CHECK: attn.unified
// CHECK-SAME: sinks(%{{.*}} : memref<32xf32>) out_scale(%{{.*}} : memref<1xf32>) out(%{{.*}} : memref<?x32x?x128xf32>) segment_max(%{{.*}} : memref<?x32x?xf32>) segment_sum(%{{.*}} : memref<?x32x?xf32>) merged_out(%{{.*}} : memref<?x32x128xf8E4M3FN>) merge_counters(%{{.*}} : memref<?x32xi32>){{$}}
func.func @unified_split_kv_fused_merge(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %sk: memref<32xf32>, %os: memref<1xf32>,
    %acc: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>, %mo: memref<?x32x128xf8E4M3FN>,
    %c: memref<?x32xi32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) sinks(%sk : memref<32xf32>) out_scale(%os : memref<1xf32>) out(%acc : memref<?x32x?x128xf32>)
      segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>)
      merged_out(%mo : memref<?x32x128xf8E4M3FN>) merge_counters(%c : memref<?x32xi32>)
  return
}

// A mixed batch's split decode op: partials by sequence.
// CHECK-LABEL: func.func @unified_sequence_partials
// CHECK: merge_counters(%{{.*}} : memref<?x32xi32>) {max_query_len = 16 : i64, sequence_partials}
func.func @unified_sequence_partials(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32,
    %acc: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>, %mo: memref<?x32x128xbf16>,
    %c: memref<?x32xi32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%acc : memref<?x32x?x128xf32>)
      segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>)
      merged_out(%mo : memref<?x32x128xbf16>) merge_counters(%c : memref<?x32xi32>) {max_query_len = 16 : i64, sequence_partials}
  return
}

// CHECK-LABEL: func.func @unified_vllm_keywords
// CHECK: k_descale(%{{.*}} : memref<?x8xf32, strided<[?, ?], offset: ?>>) v_descale(%{{.*}} : memref<1xf32>) alibi_slopes(%{{.*}} : memref<32xf32>) qq_bias(%{{.*}} : memref<4x4xf32>) mm_prefix_range(%{{.*}} : memref<?x2x2xi32>) out_scale(%{{.*}} : memref<1xf32>) out(%{{.*}} : memref<?x32x128xbf16>)
// CHECK-SAME: {alibi_form = #attn.alibi<sqrt>, mm_prefix_clamp_window, sliding_window = 512 : i64}
func.func @unified_vllm_keywords(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %ks: memref<?x8xf32, strided<[?, ?], offset: ?>>,
    %vs: memref<1xf32>, %slopes: memref<32xf32>, %tree: memref<4x4xf32>, %mm: memref<?x2x2xi32>, %os: memref<1xf32>,
    %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)
      k_descale(%ks : memref<?x8xf32, strided<[?, ?], offset: ?>>) v_descale(%vs : memref<1xf32>)
      alibi_slopes(%slopes : memref<32xf32>) qq_bias(%tree : memref<4x4xf32>) mm_prefix_range(%mm : memref<?x2x2xi32>)
      out_scale(%os : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
      {alibi_form = #attn.alibi<sqrt>, sliding_window = 512 : i64, mm_prefix_clamp_window}
  return
}

// CHECK-LABEL: func.func @unified_rswa
// CHECK: rswa_prefix_lens(%{{.*}} : memref<?xi32>) out(%{{.*}} : memref<?x32x128xbf16>) {rswa_window = 128 : i64}
func.func @unified_rswa(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %p: memref<?xi32>, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)
      rswa_prefix_lens(%p : memref<?xi32>) out(%o : memref<?x32x128xbf16>) {rswa_window = 128 : i64}
  return
}

// CHECK-LABEL: func.func @unified_token_scales_and_flags
// CHECK: k_scale_cache(%{{.*}} : memref<?x16x8xf32>) v_scale_cache(%{{.*}} : memref<?x16x8xf32>) causal_flags(%{{.*}} : memref<?xi8>)
// CHECK-SAME: {chunk_lookback = 3 : i64, sliding_window = 1024 : i64}
func.func @unified_token_scales_and_flags(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xi8>, %vc: memref<?x16x8x128xi8>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %ksc: memref<?x16x8xf32>, %vsc: memref<?x16x8xf32>,
    %flags: memref<?xi8>, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xi8>) v_cache(%vc : memref<?x16x8x128xi8>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)
      k_scale_cache(%ksc : memref<?x16x8xf32>) v_scale_cache(%vsc : memref<?x16x8xf32>) causal_flags(%flags : memref<?xi8>)
      out(%o : memref<?x32x128xbf16>) {sliding_window = 1024 : i64, chunk_lookback = 3 : i64}
  return
}

// A mixed batch as two ops over the same operands: decodes, then prefills.
// CHECK-LABEL: func.func @unified_query_len_ranges
// CHECK: out(%{{.*}} : memref<?x32x128xbf16>) {max_query_len = 4 : i64}
// CHECK: out(%{{.*}} : memref<?x32x128xbf16>) {min_query_len = 5 : i64}
func.func @unified_query_len_ranges(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)
      out(%o : memref<?x32x128xbf16>) {max_query_len = 4 : i64}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)
      out(%o : memref<?x32x128xbf16>) {min_query_len = 5 : i64}
  return
}

// CHECK-LABEL: func.func @unified_bidirectional
// CHECK: {bidirectional}
func.func @unified_bidirectional(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s)
      out(%o : memref<?x32x128xbf16>) {bidirectional}
  return
}

// CHECK-LABEL: func.func @flash_quantize_on_load
// CHECK: {causal, quantize_to = f8E4M3FN}
func.func @flash_quantize_on_load(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xf8E4M3FN>, %v: memref<?x16x128xbf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>,
    %ps: memref<1xf32>, %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xf8E4M3FN>) v(%v : memref<?x16x128xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s)
      q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>)
      out(%o : memref<?x16x128xbf16>) {causal, quantize_to = f8E4M3FN}
  return
}

// CHECK-LABEL: func.func @flash_minimal
// CHECK: attn.flash q(%{{.*}} : memref<?x16x128xf16>) k(%{{.*}} : memref<?x16x128xf16>) v(%{{.*}} : memref<?x16x128xf16>) cu_seqlens_q(%{{.*}} : memref<?xi32>) cu_seqlens_k(%{{.*}} : memref<?xi32>) scale(%{{.*}}) out(%{{.*}} : memref<?x16x128xf16>){{$}}
func.func @flash_minimal(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>)
  return
}

// CHECK-LABEL: func.func @flash_bias_dropout_causal
// CHECK: attn.flash
// CHECK-SAME: scale(%{{.*}}) bias(%{{.*}} : memref<1x8x?x?xf32>) dropout(%{{.*}}, %{{.*}}, %{{.*}}) out(%{{.*}} : memref<?x8x24xbf16>) {causal}
func.func @flash_bias_dropout_causal(%q: memref<?x8x24xbf16>, %k: memref<?x2x24xbf16>, %v: memref<?x2x24xbf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %bias: memref<1x8x?x?xf32>, %p: f32, %seed: i64,
    %off: i64, %o: memref<?x8x24xbf16>) {
  attn.flash q(%q : memref<?x8x24xbf16>) k(%k : memref<?x2x24xbf16>) v(%v : memref<?x2x24xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s)
      bias(%bias : memref<1x8x?x?xf32>) dropout(%p, %seed, %off) out(%o : memref<?x8x24xbf16>) {causal}
  return
}

// CHECK-LABEL: func.func @flash_fp8
// CHECK: attn.flash
// CHECK-SAME: q_scale(%{{.*}} : memref<1xf32>) k_scale(%{{.*}} : memref<1xf32>) v_scale(%{{.*}} : memref<1xf32>) p_scale(%{{.*}} : memref<1xf32>) out_scale(%{{.*}} : memref<1xf32>) out(%{{.*}} : memref<?x16x256xf8E4M3FN>)
func.func @flash_fp8(%q: memref<?x16x256xf8E4M3FN>, %k: memref<?x16x256xf8E4M3FN>, %v: memref<?x16x256xf8E4M3FN>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>,
    %vs: memref<1xf32>, %ps: memref<1xf32>, %os: memref<1xf32>, %o: memref<?x16x256xf8E4M3FN>) {
  attn.flash q(%q : memref<?x16x256xf8E4M3FN>) k(%k : memref<?x16x256xf8E4M3FN>) v(%v : memref<?x16x256xf8E4M3FN>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s)
      q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>)
      p_scale(%ps : memref<1xf32>) out_scale(%os : memref<1xf32>) out(%o : memref<?x16x256xf8E4M3FN>)
  return
}

// CHECK-LABEL: func.func @blocksparse_per_head
// CHECK: attn.blocksparse q(%{{.*}} : memref<?x16x128xbf16>) k(%{{.*}} : memref<?x4x128xbf16>) v(%{{.*}} : memref<?x4x128xbf16>) cu_seqlens_q(%{{.*}} : memref<?xi32>) cu_seqlens_k(%{{.*}} : memref<?xi32>) crow(%{{.*}} : memref<16x?xi32>) col(%{{.*}} : memref<16x?xi32>) scale(%{{.*}}) out(%{{.*}} : memref<?x16x128xbf16>) {block_size = 64 : i64, q_block_size = 32 : i64}
func.func @blocksparse_per_head(%q: memref<?x16x128xbf16>, %k: memref<?x4x128xbf16>, %v: memref<?x4x128xbf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<16x?xi32>, %col: memref<16x?xi32>, %s: f32,
    %o: memref<?x16x128xbf16>) {
  attn.blocksparse q(%q : memref<?x16x128xbf16>) k(%k : memref<?x4x128xbf16>) v(%v : memref<?x4x128xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>)
      crow(%crow : memref<16x?xi32>) col(%col : memref<16x?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>)
      {block_size = 64 : i64, q_block_size = 32 : i64}
  return
}

// CHECK-LABEL: func.func @blocksparse_shared_layout
// CHECK: attn.blocksparse
// CHECK-SAME: crow(%{{.*}} : memref<1x5xi32>) col(%{{.*}} : memref<1x10xi32>) scale(%{{.*}}) out(%{{.*}} : memref<?x8x64xf32>) {block_size = 16 : i64, schedule = #attn.schedule<block_q = 4, block_n = 16, heads_per_program = 1, warps = 2>}
func.func @blocksparse_shared_layout(%q: memref<?x8x64xf32>, %k: memref<?x8x64xf32>, %v: memref<?x8x64xf32>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %crow: memref<1x5xi32>, %col: memref<1x10xi32>, %s: f32,
    %o: memref<?x8x64xf32>) {
  attn.blocksparse q(%q : memref<?x8x64xf32>) k(%k : memref<?x8x64xf32>) v(%v : memref<?x8x64xf32>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>)
      crow(%crow : memref<1x5xi32>) col(%col : memref<1x10xi32>) scale(%s) out(%o : memref<?x8x64xf32>)
      {block_size = 16 : i64, schedule = #attn.schedule<block_q = 4, block_n = 16, heads_per_program = 1, warps = 2>}
  return
}

// CHECK-LABEL: func.func @merge_states_max_sum
// CHECK: attn.merge_states partial(%{{.*}} : memref<?x32x16x128xf32>) segment_max(%{{.*}} : memref<?x32x16xf32>) segment_sum(%{{.*}} : memref<?x32x16xf32>) sinks(%{{.*}} : memref<32xf32>) out_scale(%{{.*}} : memref<1xf32>) out(%{{.*}} : memref<?x32x128xf8E4M3FN>){{$}}
func.func @merge_states_max_sum(%acc: memref<?x32x16x128xf32>, %m: memref<?x32x16xf32>, %l: memref<?x32x16xf32>,
    %sinks: memref<32xf32>, %os: memref<1xf32>, %o: memref<?x32x128xf8E4M3FN>) {
  attn.merge_states partial(%acc : memref<?x32x16x128xf32>) segment_max(%m : memref<?x32x16xf32>)
      segment_sum(%l : memref<?x32x16xf32>) sinks(%sinks : memref<32xf32>) out_scale(%os : memref<1xf32>)
      out(%o : memref<?x32x128xf8E4M3FN>)
  return
}

// CHECK-LABEL: func.func @merge_states_lse
// CHECK: attn.merge_states partial(%{{.*}} : memref<?x?x4x64xf32>) segment_lse(%{{.*}} : memref<?x?x4xf32>) out(%{{.*}} : memref<?x?x64xbf16>){{$}}
func.func @merge_states_lse(%o_s: memref<?x?x4x64xf32>, %lse: memref<?x?x4xf32>, %o: memref<?x?x64xbf16>) {
  attn.merge_states partial(%o_s : memref<?x?x4x64xf32>) segment_lse(%lse : memref<?x?x4xf32>) out(%o : memref<?x?x64xbf16>)
  return
}

// CHECK-LABEL: func.func @merge_states_lse_bf16_partials
// CHECK: attn.merge_states partial(%{{.*}} : memref<?x8x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>) segment_lse(%{{.*}} : memref<?x8x?xf32, strided<[?, ?, ?], offset: ?>>) out(%{{.*}} : memref<?x8x128xbf16>){{$}}
func.func @merge_states_lse_bf16_partials(%o_s: memref<?x8x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x8x?xf32, strided<[?, ?, ?], offset: ?>>, %o: memref<?x8x128xbf16>) {
  attn.merge_states partial(%o_s : memref<?x8x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>) segment_lse(%lse : memref<?x8x?xf32, strided<[?, ?, ?], offset: ?>>) out(%o : memref<?x8x128xbf16>)
  return
}

// CHECK-LABEL: func.func @flash_lse
// CHECK: out(%{{.*}} : memref<?x16x128xf16>) lse(%{{.*}} : memref<?x16xf32>) {causal}
func.func @flash_lse(%q: memref<?x16x128xf16>, %k: memref<?x4x128xf16>, %v: memref<?x4x128xf16>,
    %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>, %lse: memref<?x16xf32>) {
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x4x128xf16>) v(%v : memref<?x4x128xf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s)
      out(%o : memref<?x16x128xf16>) lse(%lse : memref<?x16xf32>) {causal}
  return
}

// CHECK-LABEL: func.func @unified_lse
// CHECK: out(%{{.*}} : memref<?x32x128xbf16>) lse(%{{.*}} : memref<?x32xf32>){{$}}
func.func @unified_lse(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>,
    %lse: memref<?x32xf32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>)
      block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
      scale(%s) out(%o : memref<?x32x128xbf16>) lse(%lse : memref<?x32xf32>)
  return
}
