// Varlen FlashAttention-2 forward for a batch of prompts packed end to end:
// 16 heads of dim 128 in bf16, causal (aligned bottom-right when a sequence
// has fewer queries than keys).
func.func @varlen_causal_flash(
    %q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>,
    %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>, %scale: f32,
    %out: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>)
      v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>)
      cu_seqlens_k(%cu_seqlens_k : memref<?xi32>) scale(%scale)
      out(%out : memref<?x16x128xbf16>) {causal}
  return
}
