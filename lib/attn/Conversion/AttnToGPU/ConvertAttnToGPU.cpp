//===- ConvertAttnToGPU.cpp - convert-attn-to-gpu pass ----------*- C++ -*-===//
//
// Outlines each attn op into a kernel of `gpu.module @attn_kernels`: the op
// is cloned into a gpu.func whose arguments are its operands, lowered there
// through the shared op lowerings (KernelLowering.h) with the GPU program
// target, and replaced on the host by a gpu.launch_func over the op's grid.
// The manifest (docs/runtime.md) records what a runtime needs to launch a
// kernel without MLIR: its parameter ABI, grid formula and resources.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/GpuTarget.h"
#include "attn/Conversion/AttnToSCF/KernelLowering.h"
#include "attn/Conversion/Passes.h"
#include "attn/IR/AttnOps.h"
#include "attn/Transforms/Schedule.h"
#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::attn {
#define GEN_PASS_DEF_CONVERTATTNTOGPU
#include "attn/Conversion/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;
using namespace mlir::attn;

/// The version of the kernel manifest's layout (docs/runtime.md); loaders
/// reject bundles of another version.
static constexpr int64_t kManifestFormatVersion = 2;

namespace {

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

/// JSON of one kernel parameter; memrefs are passed as MLIR's expanded
/// descriptor (allocated ptr, aligned ptr, offset, sizes, strides).
/// `arg` is the host function's argument the operand comes from (-1 when it
/// is computed in the function).
int64_t hostArgOf(Value operand) {
  if (auto ba = dyn_cast<BlockArgument>(operand))
    if (isa<func::FuncOp>(ba.getOwner()->getParentOp()))
      return ba.getArgNumber();
  return -1;
}

llvm::json::Value paramJson(Value operand) {
  Type t = operand.getType();
  int64_t arg = hostArgOf(operand);
  if (auto m = dyn_cast<MemRefType>(t))
    return llvm::json::Object{{"arg", arg},
                              {"kind", "memref"},
                              {"rank", m.getRank()},
                              {"dtype", typeName(m.getElementType())}};
  return llvm::json::Object{
      {"arg", arg}, {"kind", "scalar"}, {"dtype", typeName(t)}};
}

/// JSON of a tensor-map parameter: the operand it describes (an index
/// into the op's operands; `arg`: the host function's argument it comes
/// from, as for memrefs) and the box, outermost dim first.
llvm::json::Value tensorMapJson(Value operand,
                                const TensorMapRequest &request) {
  llvm::json::Array box;
  for (int64_t x : request.box)
    box.push_back(x);
  return llvm::json::Object{
      {"arg", hostArgOf(operand)},
      {"kind", "tensor_map"},
      {"operand", int64_t(request.operand)},
      {"box", std::move(box)},
      {"swizzle", 128},
      {"dtype",
       typeName(cast<MemRefType>(operand.getType()).getElementType())}};
}

/// The tensor map of `operand` on the host, as upstream models it
/// (nvgpu.tma.create.descriptor), viewed as the kernel's pointer argument.
Value hostTensorMap(ImplicitLocOpBuilder &b, Value operand,
                    ArrayRef<int64_t> box) {
  auto type = cast<MemRefType>(operand.getType());
  Value unranked = memref::CastOp::create(
      b, UnrankedMemRefType::get(type.getElementType(), 0), operand);
  SmallVector<Value> sizes;
  for (int64_t x : box)
    sizes.push_back(arith::ConstantIndexOp::create(b, x));
  auto space =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  auto desc = nvgpu::TensorMapDescriptorType::get(
      b.getContext(),
      MemRefType::get(box, type.getElementType(), MemRefLayoutAttrInterface(),
                      space),
      nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_256B,
      nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  Value map = nvgpu::TmaCreateDescriptorOp::create(b, desc, unranked, sizes);
  return UnrealizedConversionCastOp::create(
             b, LLVM::LLVMPointerType::get(b.getContext()), map)
      .getResult(0);
}

/// The value of the op's query operand (kernel ops), to pick the compute
/// type.
Value queryOf(Operation *op) {
  if (auto kernel = dyn_cast<AttnKernelOpInterface>(op))
    return kernel.getQ();
  return Value();
}

int64_t headDimOf(Operation *op) {
  Value q = queryOf(op);
  return cast<MemRefType>(q.getType()).getDimSize(2);
}

struct ConvertAttnToGPUPass
    : public mlir::attn::impl::ConvertAttnToGPUBase<ConvertAttnToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string error;
    if (f32Precision != "tf32" && f32Precision != "3xtf32") {
      module.emitError() << "convert-attn-to-gpu: unknown f32-precision '"
                         << f32Precision << "' (expected tf32 or 3xtf32)";
      return signalPassFailure();
    }
    std::unique_ptr<GpuTarget> gpuTarget =
        createGpuTarget(target, chip, error, f32Precision == "3xtf32");
    if (!gpuTarget) {
      module.emitError() << "convert-attn-to-gpu: " << error;
      return signalPassFailure();
    }
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<AttnDialect>(op->getDialect()))
        ops.push_back(op);
    });
    if (ops.empty())
      return;

    OpBuilder top(module.getBodyRegion());
    top.setInsertionPointToEnd(module.getBody());
    auto kernels =
        gpu::GPUModuleOp::create(top, module.getLoc(), "attn_kernels");
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));

    SymbolTable symbols(kernels);
    llvm::json::Array records;
    for (Operation *op : ops) {
      llvm::json::Object record;
      if (failed(outline(op, *gpuTarget, kernels, symbols, record)))
        return signalPassFailure();
      records.push_back(std::move(record));
    }
    // Loaders check the version (docs/runtime.md).
    llvm::json::Value manifest =
        llvm::json::Object{{"format_version", kManifestFormatVersion},
                           {"kernels", std::move(records)}};
    module->setAttr(
        "attn.manifest",
        StringAttr::get(&getContext(), llvm::formatv("{0}", manifest).str()));
  }

  LogicalResult outline(Operation *op, const GpuTarget &gpuTarget,
                        gpu::GPUModuleOp kernels, SymbolTable &symbols,
                        llvm::json::Object &record) {
    MLIRContext *ctx = op->getContext();
    auto func = op->getParentOfType<func::FuncOp>();
    std::string name = func ? func.getSymName().str() : "attn_kernel";

    // Resources of the program.
    Type computeType;
    KernelLaunch launch;
    SmallVector<TensorMapRequest> requests;
    if (Value q = queryOf(op)) {
      Type qType = cast<MemRefType>(q.getType()).getElementType();
      FailureOr<Type> ct = gpuTarget.computeType(qType);
      if (failed(ct))
        return op->emitOpError("convert-attn-to-gpu: query type ")
               << qType << " has no tensor-core path on " << target << " ("
               << gpuTarget.supportedTypes() << ")";
      computeType = *ct;
      ScheduleAttr s = scheduleOrDefault(op);
      TileShape shape{s.getBlockQ(),          s.getBlockN(),
                      s.getHeadsPerProgram(), headDimOf(op),
                      s.getWarps(),           s.getTma(),
                      s.getProducerWarps(),   s.getPingpong(),
                      s.getPersistent(),      s.getStages()};
      computeType = gpuTarget.programComputeType(op, shape, computeType);
      ProgramBody body = gpuTarget.bodyOf(shape);
      if (body.rowsPerWarp > kMaxRowsPerWarp ||
          body.accumulatorsPerLane > kMaxAccumulatorsPerLane)
        return op->emitOpError("convert-attn-to-gpu: the schedule ")
               << s << " unrolls " << body.rowsPerWarp << " rows per warp with "
               << body.accumulatorsPerLane
               << " f32 accumulators per lane; the budget is "
               << kMaxRowsPerWarp << " rows and " << kMaxAccumulatorsPerLane
               << " accumulators (more warps, or smaller block_q or block_n)";
      launch = gpuTarget.launchFor(op, shape, computeType);
      requests = gpuTarget.tensorMaps(op, shape, computeType);
      // Where the persistent grid is all that stands in the way, say so
      // (the rule below would blame TMA).
      if (shape.tma && requests.empty() && shape.persistent) {
        TileShape gridded = shape;
        gridded.persistent = false;
        if (!gpuTarget.tensorMaps(op, gridded, computeType).empty())
          return op->emitOpError("convert-attn-to-gpu: the schedule ")
                 << s
                 << " asks for a persistent grid, which only sm_90a flash "
                    "programs over dense f16/bf16 K and V by TMA and "
                    "block-sparse programs of one layout row have (not fp8 "
                    "wgmma flash, gathering producers of prefix prefill and "
                    "unified, or programs that pair blocks); the same "
                    "schedule without persistent is valid";
      }
      if (shape.tma && requests.empty())
        return op->emitOpError("convert-attn-to-gpu: the schedule ")
               << s
               << " asks for TMA, which only sm_90a flash and block-sparse "
                  "programs of warpgroups have, over dense f16/bf16 K and V "
                  "(head dim a multiple of 64, contiguous rows, "
                  "double-buffered tiles of at most 256 keys; one to three "
                  "consumer warpgroups, warps 4, 8 or 12 (12: flash only), "
                  "with producer_warps; fp8 Q, K and V: 128 keys, or for "
                  "heads of 128 on warps = 8 whole 32-key steps up to 224), "
                  "and unified programs of a gathering producer whose pages "
                  "are whole boxes of the KV tile (8 keys or more, dividing "
                  "block_n or a multiple of it)";
      if (shape.producerWarps && !shape.tma &&
          !gpuTarget.gathersKeys(op, shape, computeType))
        return op->emitOpError("convert-attn-to-gpu: the schedule ")
               << s
               << " asks for a producer warpgroup that gathers K/V with "
                  "cp.async (producer_warps without tma), which only sm_90a "
                  "prefix prefill and unified programs of warpgroups have, "
                  "over f16/bf16 caches like Q without scales (prefix "
                  "prefill: or fp8 caches; unified: without split-KV, lse, "
                  "descales and the rarer masks) (head dim 64 or 128, "
                  "double-buffered tiles)";
      if (auto sparse = dyn_cast<BlockSparseOp>(op);
          sparse && shape.blockQ > sparse.getQueryBlockSize() &&
          !gpuTarget.walksLayoutRowPairs(op, shape, computeType))
        return op->emitOpError("convert-attn-to-gpu: the schedule ")
               << s
               << " walks two layout rows a program (block_q twice the "
                  "query block), which only sm_90a block-sparse programs of "
                  "two consumer warpgroups in pingpong beside a TMA producer "
                  "have (heads_per_program = 1, warps = 8, query and key "
                  "blocks of 64, block_n = 128, f16/bf16 K and V by TMA)";
      if (!isa<UnifiedOp>(op) && gpuTarget.splitsKeys(op, shape, computeType))
        return op->emitOpError("convert-attn-to-gpu: the schedule ")
               << s
               << " gives a row slab several warps (more warps than 16-row "
                  "slabs), which split the keys of each tile only in "
                  "attn.unified programs (decode rows)";
      if (auto unified = dyn_cast<UnifiedOp>(op);
          unified && unified.fusesMerge()) {
        if (shape.producerWarps || shape.persistent)
          return op->emitOpError("convert-attn-to-gpu: the schedule ")
                 << s
                 << " has a producer warpgroup or a persistent grid; the "
                    "fused merge (merged_out) runs in programs whose "
                    "threads all reach its barrier (no producer_warps, not "
                    "persistent)";
        launch.sharedBytes = std::max(launch.sharedBytes, kArrivalSharedBytes);
      }
      if (launch.threads > 1024 ||
          launch.sharedBytes > gpuTarget.maxSharedBytes())
        return op->emitOpError("convert-attn-to-gpu: the schedule ")
               << s << " needs " << launch.threads << " threads and "
               << launch.sharedBytes << " bytes of shared memory; " << target
               << " allows 1024 and " << gpuTarget.maxSharedBytes()
               << " (pick smaller block_q, block_n or warps)";
    }
    FailureOr<SmallVector<GridExtent>> grid = kernelGrid(op);
    if (failed(grid))
      return op->emitOpError("convert-attn-to-gpu: no grid for this op");

    // The kernel: its tensor maps (TMA), then the op's operands, become its
    // arguments.
    OpBuilder kb(kernels.getBodyRegion());
    kb.setInsertionPointToEnd(kernels.getBody());
    SmallVector<Type> argTypes(requests.size(),
                               LLVM::LLVMPointerType::get(ctx));
    llvm::append_range(argTypes, op->getOperandTypes());
    auto type = FunctionType::get(ctx, argTypes, {});
    auto kernel = gpu::GPUFuncOp::create(kb, op->getLoc(), name, type);
    symbols.insert(kernel); // renames on a clash
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                    UnitAttr::get(ctx));
    if (!requests.empty())
      kernel->setAttr(kTensorMapParamsAttr,
                      IntegerAttr::get(IntegerType::get(ctx, 64),
                                       int64_t(requests.size())));
    if (launch.streamingCopies)
      kernel->setAttr(kStreamingCopiesAttr, UnitAttr::get(ctx));
    kernel.setKnownBlockSizeAttr(DenseI32ArrayAttr::get(
        ctx, {static_cast<int32_t>(launch.threads), 1, 1}));
    Block *entry = &kernel.getBody().front();
    ImplicitLocOpBuilder b(op->getLoc(), ctx);
    b.setInsertionPointToStart(entry);
    Value shared;
    if (launch.sharedBytes > 0) {
      auto space =
          gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
      shared = gpu::DynamicSharedMemoryOp::create(
          b, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                             MemRefLayoutAttrInterface(), space));
    }
    IRMapping mapping;
    ArrayRef<BlockArgument> mapArgs =
        entry->getArguments().take_front(requests.size());
    mapping.map(op->getOperands(),
                entry->getArguments().drop_front(requests.size()));
    SmallVector<TensorMapArg> maps;
    for (auto [request, arg] : llvm::zip(requests, mapArgs))
      maps.push_back({entry->getArgument(requests.size() + request.operand),
                      arg, request.box});
    Operation *clone = b.clone(*op, mapping);
    LoopEmitter e(b);
    e.setSqrt([&](ImplicitLocOpBuilder &ib, Value x) {
      return gpuTarget.sqrt(ib, x);
    });
    e.setExp2([&](ImplicitLocOpBuilder &ib, Value x) {
      return gpuTarget.exp2(ib, x);
    });
    e.setLog2([&](ImplicitLocOpBuilder &ib, Value x) {
      return gpuTarget.log2(ib, x);
    });
    e.setRcp([&](ImplicitLocOpBuilder &ib, Value x) {
      return gpuTarget.rcp(ib, x);
    });
    e.setMulHiU32([&](ImplicitLocOpBuilder &ib, Value x, Value y) {
      return gpuTarget.mulHiU32(ib, x, y);
    });
    std::unique_ptr<ProgramTarget> programs =
        gpuTarget.programs(entry, shared, computeType, launch, maps);
    if (failed(emitAttnOp(e, *programs, clone)))
      return op->emitOpError("convert-attn-to-gpu: op was not lowered");
    clone->erase();
    gpu::ReturnOp::create(b);

    // The host side: launch over the grid.
    ImplicitLocOpBuilder hb(op->getLoc(), op);
    LoopEmitter he(hb);
    SmallVector<Value> extents;
    for (const GridExtent &x : *grid)
      extents.push_back(x.materialize(he, op->getOperands()));
    while (extents.size() < 3)
      extents.push_back(he.idx(1));
    Value smem =
        arith::ConstantIntOp::create(hb, hb.getI32Type(), launch.sharedBytes);
    // Tensor maps encoded on the host (upstream's nvgpu op; attn_mlir's
    // runtime encodes them itself and passes them by value, see
    // attn-nvvm-tensor-map-params).
    SmallVector<Value> launchArgs;
    for (const TensorMapRequest &request : requests)
      launchArgs.push_back(
          hostTensorMap(hb, op->getOperand(request.operand), request.box));
    llvm::append_range(launchArgs, op->getOperands());
    gpu::LaunchFuncOp::create(
        hb, kernel, gpu::KernelDim3{extents[0], extents[1], extents[2]},
        gpu::KernelDim3{he.idx(launch.threads), he.idx(1), he.idx(1)}, smem,
        launchArgs);
    std::string opName = op->getName().getStringRef().str();
    llvm::json::Array params, extentsJson;
    for (const TensorMapRequest &request : requests)
      params.push_back(tensorMapJson(op->getOperand(request.operand), request));
    for (Value v : op->getOperands())
      params.push_back(paramJson(v));
    op->erase();

    for (const GridExtent &x : *grid)
      extentsJson.push_back(x.toJson());
    record = llvm::json::Object{
        {"name", kernel.getName().str()}, {"op", opName},
        {"threads", launch.threads},      {"shared_bytes", launch.sharedBytes},
        {"grid", std::move(extentsJson)}, {"params", std::move(params)}};
    if (launch.persistent)
      record["persistent"] = true;
    if (launch.smallGridProgramsPerSM)
      record["small_grid"] =
          llvm::json::Object{{"programs_per_sm", launch.smallGridProgramsPerSM},
                             {"shared_bytes", launch.smallGridSharedBytes}};
    return success();
  }
};

} // namespace
