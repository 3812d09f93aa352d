// Fuzzing report: a head dim of 2^31 verified, then the GPU pipelines
// aborted (LLVM ERROR: SmallVector unable to grow) or ran for minutes.
// EXPECT: operand 'q' dimension 2 (head_dim = 2147483648) must be at most 1024
func.func @f(%q: memref<?x16x2147483648xf16>, %k: memref<?x16x2147483648xf16>, %v: memref<?x16x2147483648xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x2147483648xf16>) {
  attn.flash q(%q : memref<?x16x2147483648xf16>) k(%k : memref<?x16x2147483648xf16>) v(%v : memref<?x16x2147483648xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x2147483648xf16>)
  return
}
