//===- Pipelines.cpp - attn lowering pipelines ------------------*- C++ -*-===//

#include "attn/Pipelines/Pipelines.h"
#include "attn/Conversion/AttnToGPU/Targets.h"
#include "attn/Conversion/Passes.h"
#include "attn/Target/Chips.h"
#include "attn/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/GPUToROCDL/GPUToROCDLPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/Transforms/RequestCWrappers.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

using namespace mlir;
using namespace mlir::attn;

void mlir::attn::buildLowerToCpuPipeline(OpPassManager &pm,
                                         const CpuPipelineOptions &options) {
  // attn -> tiled loops with the CPU schedule.
  pm.addPass(
      createAttnPlan(AttnPlanOptions{options.planTarget, options.planChip}));
  pm.addPass(createConvertAttnToSCF());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.emitCInterface)
    pm.addNestedPass<func::FuncOp>(LLVM::createLLVMRequestCWrappersPass());
  // Loops -> LLVM. bf16 conversions are expanded to integer code; fp8 is
  // already integer code (Fp8Codec); tanh goes to libm.
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

#ifdef ATTN_ENABLE_NVVM
void mlir::attn::buildLowerToNvvmPipeline(OpPassManager &pm,
                                          const NvvmPipelineOptions &options) {
  pm.addPass(createAttnPlan(AttnPlanOptions{"nvvm", options.chip}));
  pm.addPass(createConvertAttnToGPU(
      ConvertAttnToGPUOptions{"nvvm", options.chip, options.f32Precision}));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Kernels -> NVVM (nvgpu's ldmatrix/cp.async, gpu ids/shuffles/barriers,
  // memref/arith/vector/math) -> PTX or cubin.
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createSCFToControlFlowPass());
  kernels.addPass(createConvertNVGPUToNVVMPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addNestedPass<LLVM::LLVMFuncOp>(createAttnNvvmTensorMapParams());
  kernels.addNestedPass<LLVM::LLVMFuncOp>(createAttnNvvmStreamingCopies());
  // (The tiles past the mbarriers, not over them.)
  kernels.addPass(createAttnNvvmExternDynamicShared());
  // PTX-builder NVVM ops (mbarrier.try_wait.parity) as inline assembly.
  kernels.addPass(createConvertNVVMToLLVMPass());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  if (target.features.empty())
    target.features = NvidiaChip::parse(options.chip).ptxFeatures().str();
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

#endif // ATTN_ENABLE_NVVM

#ifdef ATTN_ENABLE_ROCDL
namespace {
/// A pass that fails with `message`: how a pipeline reports, when it runs,
/// a problem found while it was built.
struct ReportPass : PassWrapper<ReportPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ReportPass)
  explicit ReportPass(std::string message) : message(std::move(message)) {}
  StringRef getArgument() const override { return "attn-report"; }
  void runOnOperation() override {
    getOperation().emitError() << message;
    signalPassFailure();
  }
  std::string message;
};

/// The directory whose llvm/bin/ld.lld links HSACO code objects (MLIR's
/// ROCDL serializer looks there): `toolkit`, $ROCM_PATH, the one installed
/// beside the running tool (<prefix>/lib/attn-mlir/rocm-toolkit for
/// <prefix>/bin/attn-opt: an installed attn-opt outlives its build tree),
/// the one set up at build time, or /opt/rocm. Empty when none has it.
std::string findRocmToolkit(StringRef toolkit, std::string &looked) {
  SmallVector<std::string> candidates;
  if (!toolkit.empty())
    candidates.push_back(toolkit.str());
  else {
    if (std::optional<std::string> env =
            llvm::sys::Process::GetEnv("ROCM_PATH"))
      candidates.push_back(*env);
    static int anchor;
    std::string exe = llvm::sys::fs::getMainExecutable(nullptr, &anchor);
    if (!exe.empty()) {
      SmallString<256> installed(
          llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
      llvm::sys::path::append(installed, "lib", "attn-mlir", "rocm-toolkit");
      candidates.push_back(std::string(installed));
    }
#ifdef ATTN_ROCDL_TOOLKIT
    candidates.push_back(ATTN_ROCDL_TOOLKIT);
#endif
    candidates.push_back("/opt/rocm");
  }
  for (const std::string &dir : candidates) {
    SmallString<256> lld(dir);
    llvm::sys::path::append(lld, "llvm", "bin", "ld.lld");
    if (llvm::sys::fs::can_execute(lld))
      return dir;
    looked += (looked.empty() ? "" : ", ") + std::string(lld);
  }
  return "";
}
} // namespace

void mlir::attn::buildLowerToRocdlPipeline(
    OpPassManager &pm, const RocdlPipelineOptions &options) {
  std::string toolkit, looked;
  if (options.format == "bin") {
    toolkit = findRocmToolkit(options.toolkit, looked);
    if (toolkit.empty()) {
      pm.addPass(std::make_unique<ReportPass>(
          "attn-lower-to-rocdl-pipeline: format=bin links the HSACO code "
          "object with ld.lld, which was not found (looked for " +
          looked +
          "); install it (apt install lld-22), pass toolkit=DIR with "
          "DIR/llvm/bin/ld.lld, or use format=isa"));
      return;
    }
  }
  pm.addPass(createAttnPlan(AttnPlanOptions{"rocdl", options.chip}));
  pm.addPass(
      createConvertAttnToGPU(ConvertAttnToGPUOptions{"rocdl", options.chip}));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Kernels -> ROCDL (amdgpu.mfma/wmma, gpu ids/shuffles/barriers, memref,
  // arith, vector; exp2 is already rocdl.exp2, so no ocml call remains).
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToROCDLOpsOptions rocdl;
  rocdl.chipset = options.chip;
  rocdl.runtime = gpu::amd::Runtime::HIP;
  kernels.addPass(createConvertGpuOpsToROCDLOps(rocdl));
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  GpuROCDLAttachTargetOptions target;
  target.chip = options.chip;
  target.optLevel = options.optLevel;
  std::optional<AmdChip> amd = AmdChip::parse(options.chip);
  target.wave64Flag = !amd || amd->waveSize == 64;
  pm.addPass(createGpuROCDLAttachTarget(target));
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  binary.toolkitPath = toolkit;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}
#endif // ATTN_ENABLE_ROCDL

void mlir::attn::registerAttnPipelines() {
  // The pipelines run convert-attn-to-gpu: its backends must be known.
  registerAttnGpuTargets();
#ifdef ATTN_ENABLE_ROCDL
  PassPipelineRegistration<RocdlPipelineOptions>(
      "attn-lower-to-rocdl-pipeline",
      "Lower attn ops to AMD matrix-core kernels (MFMA on gfx90a/gfx942, "
      "WMMA on gfx1100) in a gpu.module, then to ROCDL and AMDGPU assembly "
      "or an HSACO code object",
      buildLowerToRocdlPipeline);
#endif
#ifdef ATTN_ENABLE_NVVM
  PassPipelineRegistration<NvvmPipelineOptions>(
      "attn-lower-to-nvvm-pipeline",
      "Lower attn ops to NVIDIA tensor-core kernels (mma.sync, ldmatrix, "
      "cp.async) in a gpu.module, then to NVVM and PTX or cubin",
      buildLowerToNvvmPipeline);
#endif
  PassPipelineRegistration<CpuPipelineOptions>(
      "attn-lower-to-cpu-pipeline",
      "Lower attn ops to tiled loops with the CPU schedule, then to the LLVM "
      "dialect for the host (the reference execution path)",
      buildLowerToCpuPipeline);
}
