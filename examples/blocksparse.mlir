// Block-sparse attention as in Phi-3-small: 32 query heads over 8 KV heads
// of dim 128, 64-token blocks, and a per-head CSR layout (local blocks plus a
// head-dependent vertical stride) for sequences of up to 8192 tokens
// (128 block rows).
func.func @phi3_small_blocksparse(
    %q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>,
    %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>,
    %crow: memref<32x129xi32>, %col: memref<32x?xi32>, %scale: f32,
    %out: memref<?x32x128xbf16>) {
  attn.blocksparse q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>)
      v(%v : memref<?x8x128xbf16>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>)
      cu_seqlens_k(%cu_seqlens_k : memref<?xi32>) crow(%crow : memref<32x129xi32>)
      col(%col : memref<32x?xi32>) scale(%scale) out(%out : memref<?x32x128xbf16>)
      {block_size = 64 : i64}
  return
}
