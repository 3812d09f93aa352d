// Merging 8 partial results per (token, head) given as normalized outputs and
// log-sum-exps (as FlashAttention-style split kernels produce), with
// attention sinks, into an fp8 output for the next fp8 GEMM.
func.func @merge_lse_with_sinks_fp8(
    %partial: memref<?x64x8x64xf32>, %lse: memref<?x64x8xf32>, %sinks: memref<64xf32>,
    %out_scale: memref<1xf32>, %out: memref<?x64x64xf8E4M3FN>) {
  attn.merge_states partial(%partial : memref<?x64x8x64xf32>)
      segment_lse(%lse : memref<?x64x8xf32>) sinks(%sinks : memref<64xf32>)
      out_scale(%out_scale : memref<1xf32>) out(%out : memref<?x64x64xf8E4M3FN>)
  return
}
