func.func @merge(%p: memref<?x2x?x16xf32>, %l: memref<?x3x?xf32>, %o: memref<?x2x16xf32>) {
  attn.merge_states partial(%p : memref<?x2x?x16xf32>) segment_lse(%l : memref<?x3x?xf32>) out(%o : memref<?x2x16xf32>)
  return
}
