// Long-context decode for a Llama-3-8B layer, split along the KV axis: the
// unified op writes 16 partial (accumulator, max, sum) triples per query
// head, and merge_states combines them into the bf16 output. The workspace
// buffers are the caller's.
func.func @llama3_8b_split_kv_decode(
    %q: memref<?x32x128xbf16>, %k_cache: memref<?x16x8x128xbf16>,
    %v_cache: memref<?x16x8x128xbf16>, %block_table: memref<?x?xi32>,
    %cu_seqlens_q: memref<?xi32>, %seqused_k: memref<?xi32>, %scale: f32,
    %partial: memref<?x32x16x128xf32>, %segment_max: memref<?x32x16xf32>,
    %segment_sum: memref<?x32x16xf32>, %out: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%k_cache : memref<?x16x8x128xbf16>)
      v_cache(%v_cache : memref<?x16x8x128xbf16>) block_table(%block_table : memref<?x?xi32>)
      cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) seqused_k(%seqused_k : memref<?xi32>)
      scale(%scale) out(%partial : memref<?x32x16x128xf32>)
      segment_max(%segment_max : memref<?x32x16xf32>)
      segment_sum(%segment_sum : memref<?x32x16xf32>) {num_segments = 16 : i64}
  attn.merge_states partial(%partial : memref<?x32x16x128xf32>)
      segment_max(%segment_max : memref<?x32x16xf32>)
      segment_sum(%segment_sum : memref<?x32x16xf32>) out(%out : memref<?x32x128xbf16>)
  return
}
