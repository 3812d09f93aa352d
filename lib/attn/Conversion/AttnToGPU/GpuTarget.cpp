//===- GpuTarget.cpp - the GPU backends and their shared grid -------------===//

#include "attn/Conversion/AttnToGPU/GpuTarget.h"
#include "llvm/ADT/StringMap.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::attn;

FailureOr<Type> mlir::attn::gpuComputeType(Type qType, bool f32) {
  if (qType.isF16() || qType.isBF16() || (f32 && qType.isF32()))
    return qType;
  if (isa<Float8E4M3FNType, Float8E5M2Type>(qType))
    return Float16Type::get(qType.getContext());
  return failure();
}

void GpuProgramTarget::grid(LoopEmitter &e, ArrayRef<Value> ubs,
                            llvm::function_ref<void(ValueRange)> body, Value) {
  // The launch grid is exactly `ubs` (the host computes the same extents).
  ImplicitLocOpBuilder &b = e.builder();
  SmallVector<Value> ids;
  gpu::Dimension dims[] = {gpu::Dimension::x, gpu::Dimension::y,
                           gpu::Dimension::z};
  for (size_t i = 0; i < ubs.size(); ++i)
    ids.push_back(gpu::BlockIdOp::create(b, dims[i]));
  // Blocks start in x order: walking the query tiles backwards starts the
  // longest causal programs (the last tiles of each sequence) first, so the
  // short ones fill the tail.
  ids[0] = arith::SubIOp::create(
      b, arith::SubIOp::create(b, ubs[0], arith::ConstantIndexOp::create(b, 1)),
      ids[0]);
  body(ids);
}

void GpuProgramTarget::spread(LoopEmitter &e, Value lo, Value hi,
                              llvm::function_ref<void(Value)> body) {
  Value tid = gpu::ThreadIdOp::create(e.builder(), gpu::Dimension::x);
  e.forLoop(e.add(lo, tid), hi, e.idx(threads), body);
}

Value GpuProgramTarget::lastArrival(LoopEmitter &e, Value counters,
                                    ValueRange at, Value expected) {
  ImplicitLocOpBuilder &b = e.builder();
  MLIRContext *ctx = b.getContext();
  // Every thread's stores of the program are done before thread 0's fence
  // releases them (the barrier orders them first, as CUDA's grid sync).
  gpu::BarrierOp::create(b);
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  Value word = memref::ViewOp::create(
      b,
      MemRefType::get({1}, b.getI32Type(), MemRefLayoutAttrInterface(), space),
      shared, e.idx(0), ValueRange{});
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  e.ifThen(e.eq(tid, e.idx(0)), [&] {
    deviceFence(b);
    Value last = ProgramTarget::lastArrival(e, counters, at, expected);
    // The other programs' stores, released before their counts, are
    // visible from here on.
    deviceFence(b);
    e.store(arith::ExtUIOp::create(b, b.getI32Type(), last), word, {e.idx(0)});
  });
  gpu::BarrierOp::create(b);
  return e.cmp(arith::CmpIPredicate::ne, e.load(word, {e.idx(0)}), e.i32(0));
}

void GpuProgramTarget::deviceFence(ImplicitLocOpBuilder &b) {
  LLVM::FenceOp::create(b, LLVM::AtomicOrdering::acq_rel, deviceSyncScope());
}

static llvm::StringMap<GpuTargetFactory> &gpuTargets() {
  static llvm::StringMap<GpuTargetFactory> targets;
  return targets;
}

void mlir::attn::registerGpuTarget(StringRef target, GpuTargetFactory factory) {
  gpuTargets()[target] = std::move(factory);
}

std::unique_ptr<GpuTarget> mlir::attn::createGpuTarget(StringRef target,
                                                       StringRef chip,
                                                       std::string &error,
                                                       bool exactF32) {
  auto it = gpuTargets().find(target);
  if (it != gpuTargets().end())
    return it->second(chip, exactF32, error);
  if (target == "nvvm" || target == "rocdl")
    error = ("target '" + target +
             "' is not built into this attn-mlir (configure with "
             "-DATTN_ENABLE_" +
             target.upper() + "=ON)")
                .str();
  else
    error = ("unknown target '" + target + "' (expected nvvm or rocdl)").str();
  return nullptr;
}
