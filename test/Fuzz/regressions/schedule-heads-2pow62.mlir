// Fuzzing report: heads_per_program near 2^62 made the M-tile products wrap.
// EXPECT: #attn.schedule tiles 1 x 4611686018427387904 rows
func.func @f(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 1, block_n = 64, heads_per_program = 4611686018427387904>}
  return
}
