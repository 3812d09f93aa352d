// Fuzzing report: segment layouts that move a value from one required group
// to another ([2, 0, ...]: q takes k's value) were accepted and printed with
// the wrong operands.
// EXPECT: operand 'q' requires exactly 1 value, but 'operandSegmentSizes' gives it 2
func.func @f(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %kc: memref<?x8x16x16x8xbf16>, %vc: memref<?x8x128x16xbf16>, %bt: memref<?x?xi32>, %qs: memref<?xi32>, %sl: memref<?xi32>, %s: f32, %o: memref<?x32x128xbf16>) {
  "attn.prefix_prefill"(%q, %k, %v, %kc, %vc, %bt, %qs, %sl, %s, %o) <{operandSegmentSizes = array<i32: 2, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1>}> : (memref<?x32x128xbf16>, memref<?x8x128xbf16>, memref<?x8x128xbf16>, memref<?x8x16x16x8xbf16>, memref<?x8x128x16xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>, f32, memref<?x32x128xbf16>) -> ()
  return
}
