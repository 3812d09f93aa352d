// Fuzzing report: a pinned 1024-row M tile at D=16 on 4 waves made the
// ROCDL backend take minutes (2.6 MB of unrolled IR). The GPU pipelines now
// reject bodies beyond the budget; the CPU pipeline, which loops, compiles it.
// EXPECT-GPU: rows per warp
func.func @f(%q: memref<?x8x16xbf16>, %k: memref<?x2x16xbf16>, %v: memref<?x2x16xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x8x16xbf16>) {
  attn.flash q(%q : memref<?x8x16xbf16>) k(%k : memref<?x2x16xbf16>) v(%v : memref<?x2x16xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x8x16xbf16>) {schedule = #attn.schedule<block_q = 1024, block_n = 64, heads_per_program = 1, warps = 4>}
  return
}
