//===- Passes.td - attn conversion passes ------------------*- tablegen -*-===//
//
// The lowerings out of the attn dialect: to loops (AttnToSCF, the CPU
// reference and the shared tiled model) and to GPU kernels (AttnToGPU, with
// the NVVM and ROCDL backends below it).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_PASSES_TD
#define ATTN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertAttnToSCF : Pass<"convert-attn-to-scf"> {
  let summary = "Tile attn ops into online-softmax loops (scf/memref/arith)";
  let description = [{
    Lowers every attn op, following its `#attn.schedule`, into the
    target-independent tiled form: an `scf.parallel` grid of programs (query
    tile x head group x split), and per program a walk over KV tiles (dense
    range, paged block table, CSR block list, the two phases of prefix
    prefill, or one split-KV segment) whose steps load and dequantize the
    tile, compute the scores, apply softcap / ALiBi / bias and the masks,
    update the running max and sum with exp2 (log2(e) folded into the
    scale), accumulate P.V, and finish with the epilogue (normalization,
    zero for fully masked rows, fp8 clamping, or partial outputs). Ranges of
    KV tiles that are fully masked are not visited. `attn.merge_states`
    lowers to a loop nest over (token, head).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"
  ];
}

def ConvertAttnToGPU : Pass<"convert-attn-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower attn ops to GPU kernels (one thread block per program)";
  let description = [{
    Outlines every attn op into a `gpu.func` kernel of a `gpu.module
    @attn_kernels` and replaces it with a `gpu.launch_func` whose grid is
    computed from the operands' shapes. Kernel bodies come from the same
    op lowerings as `convert-attn-to-scf`, with programs emitted for the
    target's matrix units: for `nvvm`, warps of mma.sync m16n8k16 fed by
    ldmatrix, K/V/Q tiles staged in shared memory with cp.async (or
    gathered and dequantized through registers), and the online softmax on
    the accumulator fragments. With `chip=sm_90a`, programs of whole
    warpgroups (8 warps of one 16-row fragment, 64-column tiles) run QK and
    PV on wgmma.mma_async from 128-byte swizzled shared tiles, P from
    registers. For `rocdl` (chip gfx90a, gfx942: wave64 MFMA; gfx1100:
    wave32 WMMA), waves of 16x16x16 matrix instructions compute S^T = K Q^T
    and O^T = V^T P^T from LDS tiles, so each lane owns one query row, and
    exp2 is v_exp_f32 (no device library). The module gets
    `gpu.container_module` and
    an `attn.manifest` string: one JSON record per kernel with its name,
    parameter ABI, grid formula, threads and dynamic shared memory, which
    the runtime reads.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"nvvm\"",
           "GPU target: nvvm or rocdl (each present when built in)">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_80\"",
           "Chip: sm_80 .. sm_90a for nvvm (sm_90a runs programs of whole "
           "warpgroups on wgmma.mma_async); gfx90a, gfx942 or gfx1100 for "
           "rocdl">,
    Option<"f32Precision", "f32-precision", "std::string",
           /*default=*/"\"tf32\"",
           "Products of f32 ops on nvvm: tf32 (one mma.sync m16n8k8 tf32 "
           "per product, operands rounded with cvt.rna.tf32.f32, f32 "
           "accumulation; what vLLM's kernels do) or 3xtf32 (each operand "
           "split into a tf32 and the tf32 of its remainder, three MMAs per "
           "product: about f32's accuracy at three times the MMAs)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::gpu::GPUDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::vector::VectorDialect", "::mlir::amdgpu::AMDGPUDialect",
    "::mlir::ROCDL::ROCDLDialect"
  ];
}

def AttnNvvmTensorMapParams
    : Pass<"attn-nvvm-tensor-map-params", "::mlir::LLVM::LLVMFuncOp"> {
  let summary = "Pass the tensor maps of TMA kernels by value";
  let description = [{
    Kernels that convert-attn-to-gpu outlined with tensor maps (sm_90a
    programs that load tiles with cp.async.bulk.tensor) take them as their
    first `attn.tensor_map_params` parameters. After the kernel is lowered
    to an `llvm.func` (convert-gpu-to-nvvm), this marks each of them as a
    128-byte, 64-byte aligned by-value parameter (`llvm.byval`,
    `nvvm.grid_constant`: CUDA's `const __grid_constant__ CUtensorMap`), so
    that the copy engine reads the map from the launch's parameters and a
    CUDA graph replays it without host work. attn_mlir's runtime encodes
    the maps from the operands (docs/runtime.md).
  }];
}

def AttnNvvmStreamingCopies
    : Pass<"attn-nvvm-streaming-copies", "::mlir::LLVM::LLVMFuncOp"> {
  let summary = "Give a streaming kernel's cp.async copies an L2 evict-first "
                "policy";
  let description = [{
    Kernels that convert-attn-to-gpu marked `attn.streaming_copies` (split-KV
    decode programs, which read each page once) have each 16-byte
    `nvvm.cp.async.shared.global` (cache = cg) rewritten as PTX's
    `cp.async.cg.shared.global.L2::cache_hint` with the policy that
    `createpolicy.fractional.L2::evict_first` makes once at the kernel's
    entry: the lines they bring go first from L2, before lines that other
    kernels left there. (Upstream's op has no cache-hint operand.) The
    copy's shared address goes through a shuffle of the active lanes: CUDA
    13.0's ptxas gives a hinted copy whose address it splits into a
    register and a uniform offset a misaligned uniform descriptor, an
    illegal instruction at run time (bench/probes/cpasync_hint_fault.cu).
  }];
}

def AttnNvvmExternDynamicShared
    : Pass<"attn-nvvm-extern-dynamic-shared", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Keep dynamic shared memory apart from static shared variables";
  let description = [{
    convert-gpu-to-nvvm lowers `gpu.dynamic_shared_memory` to an internal
    zero-length shared global (`__dynamic_shmem__N`). NVPTX emits a global
    that only one kernel uses as a variable of that kernel ("demoted"),
    and prints the zero-length array as a one-byte `.shared` variable:
    ptxas then lays it out among the kernel's static shared variables
    (the mbarriers of `nvgpu.mbarrier.create`), and the tiles addressed
    from it overlap them. This pass gives every zero-length shared global
    external linkage, which NVPTX emits as CUDA's
    `.extern .shared .b8 name[]`: the launch's dynamic shared memory,
    which ptxas places past the static variables.
  }];
}

#endif // ATTN_CONVERSION_PASSES_TD
