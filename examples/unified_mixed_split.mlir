// A mixed batch (chunked prefills beside a few long decodes) for a
// Llama-3-8B layer, as two unified ops over the same operands: the decode
// op takes the sequences of at most 16 queries, splits their keys into
// segments (the segment count is %partial's dim 2, read at run time) and
// merges them into %out in its launch; its partials, statistics and
// arrival counters hold 16 rows a sequence (sequence_partials), so the
// workspace does not grow with the prefills' tokens. The prefill op takes
// the other sequences. The counters must be zero; the op leaves them so.
func.func @llama3_8b_mixed_split_decodes(
    %q: memref<?x32x128xbf16>, %k_cache: memref<?x16x8x128xbf16>,
    %v_cache: memref<?x16x8x128xbf16>, %block_table: memref<?x?xi32>,
    %cu_seqlens_q: memref<?xi32>, %seqused_k: memref<?xi32>, %scale: f32,
    %out: memref<?x32x128xbf16>, %partial: memref<?x32x?x128xf32>,
    %segment_max: memref<?x32x?xf32>, %segment_sum: memref<?x32x?xf32>,
    %counters: memref<?x32xi32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%k_cache : memref<?x16x8x128xbf16>)
      v_cache(%v_cache : memref<?x16x8x128xbf16>) block_table(%block_table : memref<?x?xi32>)
      cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) seqused_k(%seqused_k : memref<?xi32>)
      scale(%scale) out(%partial : memref<?x32x?x128xf32>)
      segment_max(%segment_max : memref<?x32x?xf32>) segment_sum(%segment_sum : memref<?x32x?xf32>)
      merged_out(%out : memref<?x32x128xbf16>) merge_counters(%counters : memref<?x32xi32>)
      {max_query_len = 16 : i64, sequence_partials}
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%k_cache : memref<?x16x8x128xbf16>)
      v_cache(%v_cache : memref<?x16x8x128xbf16>) block_table(%block_table : memref<?x?xi32>)
      cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) seqused_k(%seqused_k : memref<?xi32>)
      scale(%scale) out(%out : memref<?x32x128xbf16>) {min_query_len = 17 : i64}
  return
}
