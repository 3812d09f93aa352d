// Kernels of vLLM's full kernel-test grids (test/python/vllm_ported,
// ATTN_MLIR_FULL_GRID=1) that spilled at their default schedules on sm_90a
// before attn-plan (or, for the prefix prefill windows and ALiBi, 32-bit
// masks and ALiBi distances) took them into account;
// the NVVM resource sweep (sweep_cases.py) compiles each. One per
// `// -----`, named by `// name:`.
// -----
// name: flash D=128 f16 fp32-bias GQA 48/24 (grid)
func.func @kernel(%q: memref<?x48x128xf16>, %k: memref<?x24x128xf16>, %v: memref<?x24x128xf16>, %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>, %scale: f32, %bias: memref<1x48x?x?xf32>, %out: memref<?x48x128xf16>) {
  attn.flash q(%q : memref<?x48x128xf16>) k(%k : memref<?x24x128xf16>) v(%v : memref<?x24x128xf16>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) cu_seqlens_k(%cu_seqlens_k : memref<?xi32>) scale(%scale) bias(%bias : memref<1x48x?x?xf32>) out(%out : memref<?x48x128xf16>)
  return
}
// -----
// name: flash D=64 f32 fp8 K/V quantized on load (grid)
func.func @kernel(%q: memref<?x48x64xf32>, %k: memref<?x48x64xf8E4M3FN>, %v: memref<?x48x64xf8E4M3FN>, %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>, %scale: f32, %q_scale: memref<1xf32>, %k_scale: memref<1xf32>, %v_scale: memref<1xf32>, %p_scale: memref<1xf32>, %out: memref<?x48x64xf32>) {
  attn.flash q(%q : memref<?x48x64xf32>) k(%k : memref<?x48x64xf8E4M3FN>) v(%v : memref<?x48x64xf8E4M3FN>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) cu_seqlens_k(%cu_seqlens_k : memref<?xi32>) scale(%scale) q_scale(%q_scale : memref<1xf32>) k_scale(%k_scale : memref<1xf32>) v_scale(%v_scale : memref<1xf32>) p_scale(%p_scale : memref<1xf32>) out(%out : memref<?x48x64xf32>) {quantize_to = f8E4M3FN}
  return
}
// -----
// name: flash D=32 bf16 quantized on load, fp32 out (grid)
func.func @kernel(%q: memref<?x4x32xbf16>, %k: memref<?x4x32xbf16>, %v: memref<?x4x32xbf16>, %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>, %scale: f32, %q_scale: memref<1xf32>, %k_scale: memref<1xf32>, %v_scale: memref<1xf32>, %p_scale: memref<1xf32>, %out: memref<?x4x32xf32>) {
  attn.flash q(%q : memref<?x4x32xbf16>) k(%k : memref<?x4x32xbf16>) v(%v : memref<?x4x32xbf16>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) cu_seqlens_k(%cu_seqlens_k : memref<?xi32>) scale(%scale) q_scale(%q_scale : memref<1xf32>) k_scale(%k_scale : memref<1xf32>) v_scale(%v_scale : memref<1xf32>) p_scale(%p_scale : memref<1xf32>) out(%out : memref<?x4x32xf32>) {quantize_to = f8E4M3FN}
  return
}
// -----
// name: unified D=128 fp8 q per-sequence descales window (grid)
func.func @kernel(%q: memref<?x5x128xf8E4M3FN>, %k_cache: memref<?x16x1x128xf8E4M3FN>, %v_cache: memref<?x16x1x128xf8E4M3FN>, %block_table: memref<?x?xi32>, %cu_seqlens_q: memref<?xi32>, %seqused_k: memref<?xi32>, %scale: f32, %q_descale: memref<1xf32>, %k_descale: memref<?x1xf32>, %v_descale: memref<?x1xf32>, %out: memref<?x5x128xbf16>) {
  attn.unified q(%q : memref<?x5x128xf8E4M3FN>) k_cache(%k_cache : memref<?x16x1x128xf8E4M3FN>) v_cache(%v_cache : memref<?x16x1x128xf8E4M3FN>) block_table(%block_table : memref<?x?xi32>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) seqused_k(%seqused_k : memref<?xi32>) scale(%scale) q_descale(%q_descale : memref<1xf32>) k_descale(%k_descale : memref<?x1xf32>) v_descale(%v_descale : memref<?x1xf32>) out(%out : memref<?x5x128xbf16>) {sliding_window = 128 : i64}
  return
}
// -----
// name: unified D=128 fp8 q per-sequence descales softcap (grid)
func.func @kernel(%q: memref<?x5x128xf8E4M3FN>, %k_cache: memref<?x16x1x128xf8E4M3FN>, %v_cache: memref<?x16x1x128xf8E4M3FN>, %block_table: memref<?x?xi32>, %cu_seqlens_q: memref<?xi32>, %seqused_k: memref<?xi32>, %scale: f32, %softcap: f32, %q_descale: memref<1xf32>, %k_descale: memref<?x1xf32>, %v_descale: memref<?x1xf32>, %out: memref<?x5x128xbf16>) {
  attn.unified q(%q : memref<?x5x128xf8E4M3FN>) k_cache(%k_cache : memref<?x16x1x128xf8E4M3FN>) v_cache(%v_cache : memref<?x16x1x128xf8E4M3FN>) block_table(%block_table : memref<?x?xi32>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) seqused_k(%seqused_k : memref<?xi32>) scale(%scale) softcap(%softcap) q_descale(%q_descale : memref<1xf32>) k_descale(%k_descale : memref<?x1xf32>) v_descale(%v_descale : memref<?x1xf32>) out(%out : memref<?x5x128xbf16>)
  return
}
// -----
// name: unified D=128 fp8 q per-sequence descales split-KV (grid)
func.func @kernel(%q: memref<?x8x128xf8E4M3FN>, %k_cache: memref<?x16x2x128xf8E4M3FN>, %v_cache: memref<?x16x2x128xf8E4M3FN>, %block_table: memref<?x?xi32>, %cu_seqlens_q: memref<?xi32>, %seqused_k: memref<?xi32>, %scale: f32, %q_descale: memref<1xf32>, %k_descale: memref<?x2xf32>, %v_descale: memref<?x2xf32>, %out: memref<?x8x16x128xf32>, %segment_max: memref<?x8x16xf32>, %segment_sum: memref<?x8x16xf32>) {
  attn.unified q(%q : memref<?x8x128xf8E4M3FN>) k_cache(%k_cache : memref<?x16x2x128xf8E4M3FN>) v_cache(%v_cache : memref<?x16x2x128xf8E4M3FN>) block_table(%block_table : memref<?x?xi32>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) seqused_k(%seqused_k : memref<?xi32>) scale(%scale) q_descale(%q_descale : memref<1xf32>) k_descale(%k_descale : memref<?x2xf32>) v_descale(%v_descale : memref<?x2xf32>) out(%out : memref<?x8x16x128xf32>) segment_max(%segment_max : memref<?x8x16xf32>) segment_sum(%segment_sum : memref<?x8x16xf32>) {num_segments = 16 : i64}
  return
}
// -----
// name: unified D=256 fp8 q per-sequence descales split-KV (grid)
func.func @kernel(%q: memref<?x5x256xf8E4M3FN>, %k_cache: memref<?x16x1x256xf8E4M3FN>, %v_cache: memref<?x16x1x256xf8E4M3FN>, %block_table: memref<?x?xi32>, %cu_seqlens_q: memref<?xi32>, %seqused_k: memref<?xi32>, %scale: f32, %q_descale: memref<1xf32>, %k_descale: memref<?x1xf32>, %v_descale: memref<?x1xf32>, %out: memref<?x5x16x256xf32>, %segment_max: memref<?x5x16xf32>, %segment_sum: memref<?x5x16xf32>) {
  attn.unified q(%q : memref<?x5x256xf8E4M3FN>) k_cache(%k_cache : memref<?x16x1x256xf8E4M3FN>) v_cache(%v_cache : memref<?x16x1x256xf8E4M3FN>) block_table(%block_table : memref<?x?xi32>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) seqused_k(%seqused_k : memref<?xi32>) scale(%scale) q_descale(%q_descale : memref<1xf32>) k_descale(%k_descale : memref<?x1xf32>) v_descale(%v_descale : memref<?x1xf32>) out(%out : memref<?x5x16x256xf32>) segment_max(%segment_max : memref<?x5x16xf32>) segment_sum(%segment_sum : memref<?x5x16xf32>) {num_segments = 16 : i64}
  return
}
// -----
// name: unified D=256 fp8 q per-sequence descales window (grid)
func.func @kernel(%q: memref<?x4x256xf8E4M3FN>, %k_cache: memref<?x16x4x256xf8E4M3FN>, %v_cache: memref<?x16x4x256xf8E4M3FN>, %block_table: memref<?x?xi32>, %cu_seqlens_q: memref<?xi32>, %seqused_k: memref<?xi32>, %scale: f32, %q_descale: memref<1xf32>, %k_descale: memref<?x4xf32>, %v_descale: memref<?x4xf32>, %out: memref<?x4x256xbf16>) {
  attn.unified q(%q : memref<?x4x256xf8E4M3FN>) k_cache(%k_cache : memref<?x16x4x256xf8E4M3FN>) v_cache(%v_cache : memref<?x16x4x256xf8E4M3FN>) block_table(%block_table : memref<?x?xi32>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) seqused_k(%seqused_k : memref<?xi32>) scale(%scale) q_descale(%q_descale : memref<1xf32>) k_descale(%k_descale : memref<?x4xf32>) v_descale(%v_descale : memref<?x4xf32>) out(%out : memref<?x4x256xbf16>) {sliding_window = 256 : i64}
  return
}
// -----
// name: unified D=256 fp8 q per-sequence descales (grid)
func.func @kernel(%q: memref<?x4x256xf8E4M3FN>, %k_cache: memref<?x16x4x256xf8E4M3FN>, %v_cache: memref<?x16x4x256xf8E4M3FN>, %block_table: memref<?x?xi32>, %cu_seqlens_q: memref<?xi32>, %seqused_k: memref<?xi32>, %scale: f32, %q_descale: memref<1xf32>, %k_descale: memref<?x4xf32>, %v_descale: memref<?x4xf32>, %out: memref<?x4x256xbf16>) {
  attn.unified q(%q : memref<?x4x256xf8E4M3FN>) k_cache(%k_cache : memref<?x16x4x256xf8E4M3FN>) v_cache(%v_cache : memref<?x16x4x256xf8E4M3FN>) block_table(%block_table : memref<?x?xi32>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>) seqused_k(%seqused_k : memref<?xi32>) scale(%scale) q_descale(%q_descale : memref<1xf32>) k_descale(%k_descale : memref<?x4xf32>) v_descale(%v_descale : memref<?x4xf32>) out(%out : memref<?x4x256xbf16>)
  return
}
// -----
// name: prefix_prefill D=128 f16 MHA 64 heads sliding window 16 (grid)
func.func @kernel(%q: memref<?x64x128xf16>, %k: memref<?x64x128xf16>, %v: memref<?x64x128xf16>, %k_cache: memref<?x64x16x32x8xf16>, %v_cache: memref<?x64x128x32xf16>, %block_table: memref<?x?xi32>, %query_start: memref<?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %out: memref<?x64x128xf16>) {
  attn.prefix_prefill q(%q : memref<?x64x128xf16>) k(%k : memref<?x64x128xf16>) v(%v : memref<?x64x128xf16>) k_cache(%k_cache : memref<?x64x16x32x8xf16>) v_cache(%v_cache : memref<?x64x128x32xf16>) block_table(%block_table : memref<?x?xi32>) query_start(%query_start : memref<?xi32>) seq_lens(%seq_lens : memref<?xi32>) scale(%scale) out(%out : memref<?x64x128xf16>) {sliding_window = 16 : i64}
  return
}
// -----
// name: prefix_prefill D=128 f16 MHA 64 heads ALiBi (grid)
func.func @kernel(%q: memref<?x64x128xf16>, %k: memref<?x64x128xf16>, %v: memref<?x64x128xf16>, %k_cache: memref<?x64x16x32x8xf16>, %v_cache: memref<?x64x128x32xf16>, %block_table: memref<?x?xi32>, %query_start: memref<?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %alibi_slopes: memref<64xf32>, %out: memref<?x64x128xf16>) {
  attn.prefix_prefill q(%q : memref<?x64x128xf16>) k(%k : memref<?x64x128xf16>) v(%v : memref<?x64x128xf16>) k_cache(%k_cache : memref<?x64x16x32x8xf16>) v_cache(%v_cache : memref<?x64x128x32xf16>) block_table(%block_table : memref<?x?xi32>) query_start(%query_start : memref<?xi32>) seq_lens(%seq_lens : memref<?xi32>) scale(%scale) alibi_slopes(%alibi_slopes : memref<64xf32>) out(%out : memref<?x64x128xf16>)
  return
}
// -----
// name: prefix_prefill D=128 f16 GQA 64/1 ALiBi (grid)
func.func @kernel(%q: memref<?x64x128xf16>, %k: memref<?x1x128xf16>, %v: memref<?x1x128xf16>, %k_cache: memref<?x1x16x32x8xf16>, %v_cache: memref<?x1x128x32xf16>, %block_table: memref<?x?xi32>, %query_start: memref<?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %alibi_slopes: memref<64xf32>, %out: memref<?x64x128xf16>) {
  attn.prefix_prefill q(%q : memref<?x64x128xf16>) k(%k : memref<?x1x128xf16>) v(%v : memref<?x1x128xf16>) k_cache(%k_cache : memref<?x1x16x32x8xf16>) v_cache(%v_cache : memref<?x1x128x32xf16>) block_table(%block_table : memref<?x?xi32>) query_start(%query_start : memref<?xi32>) seq_lens(%seq_lens : memref<?xi32>) scale(%scale) alibi_slopes(%alibi_slopes : memref<64xf32>) out(%out : memref<?x64x128xf16>)
  return
}
