// Prefix prefill for a Llama-3-8B layer (32 query heads sharing 8 KV heads,
// head dim 128) over vLLM's paged cache: 16-token pages, the key cache split
// by x = 8 (16-byte vectors of bf16), fp8-e4m3 cache entries with per-tensor
// scales, and a bf16 output.
func.func @llama3_8b_prefix_prefill(
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
