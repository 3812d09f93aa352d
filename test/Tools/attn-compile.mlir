// attn-compile: one process from an attn kernel to a host object file (the
// CPU pipeline, LLVM IR, -O3, code generation); its C interface is defined.
// RUN: attn-compile %s -o %t.o
// RUN: llvm-nm %t.o | FileCheck %s
// Another target's tile schedules (as ATTN_MLIR_CPU_PLAN selects them).
// RUN: attn-compile %s --plan-target=nvvm --plan-chip=sm_90a -o %t.plan.o
// RUN: llvm-nm %t.plan.o | FileCheck %s
// Bad input: the verifier's message, and a failing status.
// RUN: not attn-compile %S/Inputs/attn-compile-invalid.mlir -o %t.bad.o 2>&1 | FileCheck %s --check-prefix=BAD
// Bad pipeline options are named.
// RUN: not attn-compile %s --plan-target=tpu -o %t.tpu.o 2>&1 | FileCheck %s --check-prefix=TARGET

// CHECK: T _mlir_ciface_merge
// BAD: error: 'attn.merge_states' op
// TARGET: tpu

func.func @merge(%p: memref<?x2x?x16xf32>, %l: memref<?x2x?xf32>, %o: memref<?x2x16xf32>) {
  attn.merge_states partial(%p : memref<?x2x?x16xf32>) segment_lse(%l : memref<?x2x?xf32>) out(%o : memref<?x2x16xf32>)
  return
}
