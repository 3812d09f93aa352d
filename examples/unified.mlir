// Unified attention for a Gemma-2-9B local layer: 16 query heads over 8 KV
// heads of dim 256, logit softcap (50.0 in the model), a 4096-token sliding
// window (vLLM window_size = (4095, 0)), a bf16 paged NHD cache with 16-token
// pages, and a batch that mixes prefills with decodes.
func.func @gemma2_9b_unified(
    %q: memref<?x16x256xbf16>, %k_cache: memref<?x16x8x256xbf16>,
    %v_cache: memref<?x16x8x256xbf16>, %block_table: memref<?x?xi32>,
    %cu_seqlens_q: memref<?xi32>, %seqused_k: memref<?xi32>,
    %scale: f32, %softcap: f32, %out: memref<?x16x256xbf16>) {
  attn.unified q(%q : memref<?x16x256xbf16>) k_cache(%k_cache : memref<?x16x8x256xbf16>)
      v_cache(%v_cache : memref<?x16x8x256xbf16>) block_table(%block_table : memref<?x?xi32>)
      cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) seqused_k(%seqused_k : memref<?xi32>)
      scale(%scale) softcap(%softcap) out(%out : memref<?x16x256xbf16>)
      {sliding_window = 4096 : i64}
  return
}
