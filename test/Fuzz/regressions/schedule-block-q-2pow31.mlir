// Fuzzing report: ops.flash(..., schedule=(2**31, 64, 1)) verified, NVVM's
// shared-memory check overflowed and passed, and the CPU kernel segfaulted.
// EXPECT: #attn.schedule needs block_q and block_n of at most 4096, got 2147483648 and 64
func.func @f(%q: memref<?x16x128xf16>, %k: memref<?x16x128xf16>, %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xf16>) {
  attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>) v(%v : memref<?x16x128xf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xf16>) {schedule = #attn.schedule<block_q = 2147483648, block_n = 64, heads_per_program = 1>}
  return
}
