// RUN: attn-opt %s --pass-pipeline="builtin.module(gpu.module(attn-nvvm-extern-dynamic-shared))" | FileCheck %s

// convert-gpu-to-nvvm's base of the dynamic shared memory (an internal
// zero-length shared global) becomes an external declaration, which NVPTX
// emits as `.extern .shared .b8 __dynamic_shmem__0[]`, past the static
// shared variables (the mbarriers) instead of among them. Static shared
// variables, globals of other address spaces and sized arrays keep their
// linkage.
// CHECK-LABEL: gpu.module @kernels
// CHECK: llvm.mlir.global external @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK: llvm.mlir.global internal @__mbarrier() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<12 x i64>
// CHECK: llvm.mlir.global internal @zero_global() {addr_space = 1 : i32} : !llvm.array<0 x i8>
gpu.module @kernels {
  llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
  llvm.mlir.global internal @__mbarrier() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<12 x i64>
  llvm.mlir.global internal @zero_global() {addr_space = 1 : i32} : !llvm.array<0 x i8>
  llvm.func @k() attributes {nvvm.kernel} {
    %0 = llvm.mlir.addressof @__dynamic_shmem__0 : !llvm.ptr<3>
    %1 = llvm.mlir.addressof @__mbarrier : !llvm.ptr<3>
    llvm.return
  }
}
