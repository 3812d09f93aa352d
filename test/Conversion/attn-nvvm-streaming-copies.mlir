// RUN: attn-opt %s --split-input-file --pass-pipeline="builtin.module(llvm.func(attn-nvvm-streaming-copies))" | FileCheck %s

// A kernel marked attn.streaming_copies: its 16-byte cg copies, whole or
// zero-filling (source size), become hinted copies whose shared address
// goes through a shuffle of the active lanes, all under one evict-first
// policy made at the entry; the 8-byte ca copy is left alone.
// CHECK-LABEL: llvm.func @stream(
// CHECK: %[[POL:.*]] = llvm.inline_asm "createpolicy.fractional.L2::evict_first.b64 $0, 1.0;", "=l"  : () -> i64
// CHECK: %[[D0:.*]] = llvm.ptrtoint %arg0 : !llvm.ptr<3> to i32
// CHECK: %[[S0:.*]] = llvm.ptrtoint %arg1 : !llvm.ptr<1> to i64
// CHECK: %[[N:.*]] = llvm.mlir.constant(16 : i32) : i32
// CHECK: llvm.inline_asm has_side_effects {{.*}}activemask.b32 m;{{.*}}shfl.sync.idx.b32 a, $0, l, 0x1f, m;{{.*}}cp.async.cg.shared.global.L2::cache_hint [a], [$1], 16, $2, $3;{{.*}}"r,l,r,l,~{memory}" %[[D0]], %[[S0]], %[[N]], %[[POL]]
// CHECK: llvm.inline_asm has_side_effects {{.*}}cp.async.cg.shared.global.L2::cache_hint [a], [$1], 16, $2, $3;{{.*}} %{{.*}}, %{{.*}}, %arg2, %[[POL]]
// CHECK: nvvm.cp.async.shared.global %arg0, %arg1, 8, cache = {{ *}}ca
// CHECK-NOT: cache = {{ *}}cg
// CHECK: llvm.return
llvm.func @stream(%dst: !llvm.ptr<3>, %src: !llvm.ptr<1>, %n: i32) attributes {attn.streaming_copies, nvvm.kernel} {
  nvvm.cp.async.shared.global %dst, %src, 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
  nvvm.cp.async.shared.global %dst, %src, 16, cache = cg, %n : !llvm.ptr<3>, !llvm.ptr<1>, i32
  nvvm.cp.async.shared.global %dst, %src, 8, cache = ca : !llvm.ptr<3>, !llvm.ptr<1>
  llvm.return
}

// -----

// Kernels without the attribute keep upstream's copies.
// CHECK-LABEL: llvm.func @plain(
// CHECK-NOT: llvm.inline_asm
// CHECK: nvvm.cp.async.shared.global %arg0, %arg1, 16, cache = {{ *}}cg
llvm.func @plain(%dst: !llvm.ptr<3>, %src: !llvm.ptr<1>) attributes {nvvm.kernel} {
  nvvm.cp.async.shared.global %dst, %src, 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
  llvm.return
}
