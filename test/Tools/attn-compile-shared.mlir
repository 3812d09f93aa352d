// attn-compile --shared: the kernel's shared library, linked in-process by
// LLD (no C compiler), naming the host's libm (exp2f); it loads and runs
// (test/python/test_cache_integrity.py). -z defs: every symbol it uses is
// defined by the libraries it names.
// REQUIRES: attn-compile-lld
// RUN: attn-compile %s --shared -o %t.so
// RUN: llvm-readelf -h -d --dyn-syms %t.so | FileCheck %s
// RUN: not ls %t.so.o

// CHECK: Type:{{ +}}DYN (Shared object file)
// CHECK: (NEEDED){{ +}}Shared library: [libm.so.6]
// CHECK: FUNC{{ +}}GLOBAL DEFAULT{{.*}} _mlir_ciface_merge

func.func @merge(%p: memref<?x2x?x16xf32>, %l: memref<?x2x?xf32>, %o: memref<?x2x16xf32>) {
  attn.merge_states partial(%p : memref<?x2x?x16xf32>) segment_lse(%l : memref<?x2x?xf32>) out(%o : memref<?x2x16xf32>)
  return
}
