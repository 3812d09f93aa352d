// The downstream tool parses attn next to upstream IR and runs attn-mlir's
// NVVM pipeline to PTX for sm_90a.
// RUN: downstream-opt %s | FileCheck %s --check-prefix=PARSE
// RUN: downstream-opt %s --attn-lower-to-nvvm-pipeline="chip=sm_90a format=isa" \
// RUN:   | FileCheck %s --check-prefix=PTX

// PARSE: arith.mulf
// PARSE: attn.flash
// PARSE-SAME: {causal}

// PTX: gpu.binary @attn_kernels
// PTX-SAME: .target sm_90a
// PTX-SAME: wgmma.mma_async

func.func @kernel(
    %q: memref<?x8x128xbf16>, %k: memref<?x2x128xbf16>, %v: memref<?x2x128xbf16>,
    %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>, %temperature: f32,
    %out: memref<?x8x128xbf16>) {
  %rsqrt_d = arith.constant 0.0883883461 : f32
  %scale = arith.mulf %rsqrt_d, %temperature : f32
  attn.flash q(%q : memref<?x8x128xbf16>) k(%k : memref<?x2x128xbf16>)
      v(%v : memref<?x2x128xbf16>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>)
      cu_seqlens_k(%cu_seqlens_k : memref<?xi32>) scale(%scale)
      out(%out : memref<?x8x128xbf16>) {causal}
  return
}
