// RUN: attn-opt %s --split-input-file --pass-pipeline="builtin.module(llvm.func(attn-nvvm-tensor-map-params))" --verify-diagnostics | FileCheck %s

// The leading attn.tensor_map_params parameters become 128-byte
// grid-constant by-value parameters; the others keep their attributes.
// CHECK-LABEL: llvm.func @kernel(
// CHECK-SAME: %arg0: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
// CHECK-SAME: %arg1: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
// CHECK-SAME: %arg2: !llvm.ptr, %arg3: i64)
llvm.func @kernel(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr, %d: i64) attributes {attn.tensor_map_params = 2 : i64, nvvm.kernel} {
  llvm.return
}

// -----

// Functions without the attribute are left alone.
// CHECK-LABEL: llvm.func @plain(%arg0: !llvm.ptr)
llvm.func @plain(%a: !llvm.ptr) attributes {nvvm.kernel} {
  llvm.return
}

// -----

// expected-error @below {{attn.tensor_map_params = 3 exceeds the 2 parameters}}
llvm.func @too_many(%a: !llvm.ptr, %b: !llvm.ptr) attributes {attn.tensor_map_params = 3 : i64, nvvm.kernel} {
  llvm.return
}

// -----

// expected-error @below {{tensor-map parameter 0 is not a pointer}}
llvm.func @not_a_pointer(%a: i64) attributes {attn.tensor_map_params = 1 : i64, nvvm.kernel} {
  llvm.return
}
