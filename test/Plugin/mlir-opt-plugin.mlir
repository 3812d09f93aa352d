// Debian's stock mlir-opt with AttnPlugin.so parses attn IR and runs the
// attn pipelines to the LLVM dialect, PTX and AMDGPU assembly.
// REQUIRES: stock-mlir-opt
// RUN: %stock_mlir_opt --load-dialect-plugin=%attn_plugin %s | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: %stock_mlir_opt --load-dialect-plugin=%attn_plugin --load-pass-plugin=%attn_plugin \
// RUN:   --pass-pipeline="builtin.module(attn-lower-to-cpu-pipeline)" %s | FileCheck %s --check-prefix=CPU
// RUN: %if nvvm-backend %{ %stock_mlir_opt --load-dialect-plugin=%attn_plugin --load-pass-plugin=%attn_plugin \
// RUN:   --pass-pipeline="builtin.module(attn-lower-to-nvvm-pipeline{chip=sm_90a format=isa})" %s \
// RUN:   | FileCheck %s --check-prefix=NVVM %}
// RUN: %if rocdl-backend %{ %stock_mlir_opt --load-dialect-plugin=%attn_plugin --load-pass-plugin=%attn_plugin \
// RUN:   --pass-pipeline="builtin.module(attn-lower-to-rocdl-pipeline{chip=gfx942 format=isa})" %s \
// RUN:   | FileCheck %s --check-prefix=ROCDL %}
// Binaries: an HSACO code object (linked with the ld.lld the build set up)
// and, where ptxas is, a cubin.
// RUN: %if rocdl-backend %{ %stock_mlir_opt --load-dialect-plugin=%attn_plugin --load-pass-plugin=%attn_plugin \
// RUN:   --pass-pipeline="builtin.module(attn-lower-to-rocdl-pipeline{chip=gfx942 format=bin})" %s \
// RUN:   | FileCheck %s --check-prefix=BIN %}
// RUN: %if nvvm-backend && ptxas %{ %stock_mlir_opt --load-dialect-plugin=%attn_plugin --load-pass-plugin=%attn_plugin \
// RUN:   --pass-pipeline="builtin.module(attn-lower-to-nvvm-pipeline{chip=sm_90a format=bin})" %s \
// RUN:   | FileCheck %s --check-prefix=BIN %}

// BIN: gpu.binary @attn_kernels [#gpu.object<{{.*}} bin = "
// BIN-NOT: assembly =

// ROUNDTRIP: attn.flash q(%{{.*}} : memref<?x8x128xbf16>)
// ROUNDTRIP-SAME: {causal}

// CPU-NOT: attn.
// CPU: llvm.func @_mlir_ciface_kernel(

// The sm_90a program: TMA loads, register reallocation and wgmma in the PTX.
// NVVM: gpu.binary @attn_kernels
// NVVM-SAME: .target sm_90a
// NVVM-SAME: cp.async.bulk.tensor
// NVVM-SAME: setmaxnreg
// NVVM-SAME: wgmma.mma_async

// ROCDL: gpu.binary @attn_kernels
// ROCDL-SAME: .amdgcn_target \22amdgcn-amd-amdhsa--gfx942\22
// ROCDL-SAME: v_mfma_f32

func.func @kernel(
    %q: memref<?x8x128xbf16>, %k: memref<?x2x128xbf16>, %v: memref<?x2x128xbf16>,
    %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>, %scale: f32,
    %out: memref<?x8x128xbf16>) {
  attn.flash q(%q : memref<?x8x128xbf16>) k(%k : memref<?x2x128xbf16>)
      v(%v : memref<?x2x128xbf16>) cu_seqlens_q(%cu_seqlens_q : memref<?xi32>)
      cu_seqlens_k(%cu_seqlens_k : memref<?xi32>) scale(%scale)
      out(%out : memref<?x8x128xbf16>) {causal}
  return
}
