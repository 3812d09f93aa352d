//===- WarpPersistent.cpp - persistent grids of claimed programs (sm_90a) -===//
//
// Persistent launches of the Hopper pipeline (schedule `persistent`): one
// block per SM initializes the ring's mbarriers once, then its producer and
// consumer warpgroups each loop over the block's programs. A block walks
// the program of its own id, then the ones its producer claims from a
// counter of the kernel's module, handed to the block's threads through
// shared memory (handOver).
//
//===----------------------------------------------------------------------===//

#include "WarpAttention.h"
#include "WarpProgram.h"
#include "Wgmma.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::warp;

namespace {
/// Persistent kernels' program counter (claimProgram): an i32 of global
/// memory of the kernel's module, zero when the module loads; each
/// launch's last claim leaves it zero again. Launches of one loaded kernel
/// therefore must not overlap (docs/runtime.md).
constexpr llvm::StringLiteral kProgramCounter = "attn_program_counter";
/// Claimed programs handed from the producer's first thread to the block's
/// threads: two i32 of shared memory, the one after round r's at r % 2.
constexpr llvm::StringLiteral kClaimedPrograms = "attn_claimed_programs";
/// The K and V bytes (of an average sequence) of the head groups whose
/// programs a persistent grid claims together, unless causal. On H200
/// (bench/results/2026-11-30-h200-session23.md) dense calls ran fastest
/// with one group a section from 1 MB a group up: sections of 8 MB were
/// 1-2% slower than the grid at 2048-8192 keys, one group 1-3% faster.
constexpr int64_t kSectionBytes = 1 << 20;

gpu::GPUModuleOp kernelModule(Block *entry) {
  return entry->getParentOp()->getParentOfType<gpu::GPUModuleOp>();
}

Value programCounter(ImplicitLocOpBuilder &b, Block *entry) {
  gpu::GPUModuleOp module = kernelModule(entry);
  auto global = module.lookupSymbol<LLVM::GlobalOp>(kProgramCounter);
  if (!global) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&module.getBodyRegion().front());
    global = LLVM::GlobalOp::create(b, b.getI32Type(), /*isConstant=*/false,
                                    LLVM::Linkage::Internal, kProgramCounter,
                                    b.getI32IntegerAttr(0), /*alignment=*/4,
                                    /*addrSpace=*/1);
  }
  return LLVM::AddressOfOp::create(b, global);
}

Value claimedPrograms(ImplicitLocOpBuilder &b, Block *entry) {
  gpu::GPUModuleOp module = kernelModule(entry);
  auto type = MemRefType::get(
      {2}, b.getI32Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
  if (!module.lookupSymbol<memref::GlobalOp>(kClaimedPrograms)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&module.getBodyRegion().front());
    memref::GlobalOp::create(b, kClaimedPrograms, b.getStringAttr("private"),
                             type, b.getUnitAttr(), /*constant=*/false,
                             IntegerAttr());
  }
  return memref::GetGlobalOp::create(b, type, kClaimedPrograms);
}

/// The producer's first thread (`claimer`) claims a program: the counter's
/// old value (relaxed: the id only says which program to walk), 0
/// elsewhere. Issued at the program's start, its latency passes under the
/// program's copies.
Value claimProgram(LoopEmitter &e, Block *entry, Value claimer) {
  ImplicitLocOpBuilder &b = e.builder();
  auto branch = scf::IfOp::create(b, TypeRange{b.getI32Type()}, claimer,
                                  /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&branch.getThenRegion().front());
    Value old = LLVM::AtomicRMWOp::create(
        b, LLVM::AtomicBinOp::add, programCounter(b, entry), e.i32(1),
        LLVM::AtomicOrdering::monotonic, "device");
    scf::YieldOp::create(b, old);
    b.setInsertionPointToStart(&branch.getElseRegion().front());
    scf::YieldOp::create(b, e.i32(0));
  }
  return branch.getResult(0);
}

/// Round `round`'s hand-over of the block's next program through shared
/// word round % 2, after the program: the claimer (producer role) stores
/// it once every thread has read that word's previous one; then every
/// thread of the block reads it. Blocks start with programs [0, blocks):
/// claim c is program blocks + c, none past total; every block claims once
/// per program it walks, so a launch's claims are 0 .. total - 1 and the
/// last one leaves the counter zero for the next launch.
Value handOver(LoopEmitter &e, Block *entry, Value bars, Value round,
               Value claimer, Value claimed, Value total, Value blocks) {
  ImplicitLocOpBuilder &b = e.builder();
  Value word = arith::IndexCastUIOp::create(
      b, b.getIndexType(), arith::AndIOp::create(b, round, e.i32(1)));
  // The k-th use of a word completes its barriers' phase k.
  Value use = arith::ShRUIOp::create(b, round, e.i32(1));
  auto parity = [&](Value k) {
    return e.cmp(arith::CmpIPredicate::ne,
                 arith::AndIOp::create(b, k, e.i32(1)), e.i32(0));
  };
  Value words = claimedPrograms(b, entry);
  if (claimer)
    e.ifThen(claimer, [&] {
      e.ifThen(e.cmp(arith::CmpIPredicate::ne, use, e.i32(0)), [&] {
        nvgpu::MBarrierTryWaitParityOp::create(
            b, bars, parity(arith::SubIOp::create(b, use, e.i32(1))),
            e.idx(kWaitTicks), e.add(e.idx(kClaimEmptyBarrier), word));
      });
      e.store(arith::AddIOp::create(b, claimed, blocks), words, {word});
      e.ifThen(e.eq(claimed, arith::SubIOp::create(b, total, e.i32(1))), [&] {
        LLVM::StoreOp::create(b, e.i32(0), programCounter(b, entry));
      });
      nvgpu::MBarrierArriveOp::create(b, bars,
                                      e.add(e.idx(kClaimFullBarrier), word));
    });
  nvgpu::MBarrierTryWaitParityOp::create(b, bars, parity(use),
                                         e.idx(kWaitTicks),
                                         e.add(e.idx(kClaimFullBarrier), word));
  Value next = e.load(words, {word});
  nvgpu::MBarrierArriveOp::create(b, bars,
                                  e.add(e.idx(kClaimEmptyBarrier), word));
  return next;
}
} // namespace

void WarpProgramTarget::grid(LoopEmitter &e, ArrayRef<Value> ubs,
                             llvm::function_ref<void(ValueRange)> body,
                             Value kvBytesPerSequence) {
  if (!persistentConsumerWarps)
    return GpuProgramTarget::grid(e, ubs, body, kvBytesPerSequence);
  ImplicitLocOpBuilder &b = e.builder();
  // (An opaque read: the programs' own reads of the thread id are then not
  // merged into this one, which would live across setmaxnreg.)
  Value tid = arith::IndexCastUIOp::create(
      b, b.getIndexType(),
      inlinePtx(b, b.getI32Type(), ValueRange{}, "mov.u32 $0, %tid.x;", "=r"));
  PersistentKernel state;
  state.barriers =
      createRingBarriers(b, e, tid, persistentConsumerWarps * kLanes,
                         /*specialized=*/true, /*persistent=*/true);
  // 32-bit counters and grid arithmetic: the producer's loop has 32
  // registers.
  state.kvTiles = newCounter(e, entry);
  state.programs = newCounter(e, entry);
  // The block's linear id and the launch's blocks.
  gpu::Dimension dims[] = {gpu::Dimension::x, gpu::Dimension::y,
                           gpu::Dimension::z};
  Value first = e.idx(0), blocks = e.idx(1);
  for (gpu::Dimension d : llvm::reverse(dims)) {
    Value n = gpu::GridDimOp::create(b, d);
    first = e.add(e.mul(first, n), gpu::BlockIdOp::create(b, d));
    blocks = e.mul(blocks, n);
  }
  Value total = e.idx(1);
  SmallVector<Value> extents;
  for (Value ub : ubs) {
    total = e.mul(total, ub);
    extents.push_back(e.toI32(ub, /*isSigned=*/false));
  }
  Value first32 = e.toI32(first, /*isSigned=*/false),
        total32 = e.toI32(total, /*isSigned=*/false),
        blocks32 = e.toI32(blocks, /*isSigned=*/false);
  // The programs in sections of head groups: each section's query tiles
  // (over the whole varlen batch) last first, each with the section's
  // groups in turn. A block starts with the program of its own id and
  // claims each next one from a counter, so whichever block is free takes
  // the next. Causal programs take one section of every group
  // (claimsTileMajor), as do calls of unknown sequences: the longest programs
  // of all groups come first and the short ones fill the tail. Others take as
  // many groups a section as hold kSectionBytes of K and V for an average
  // sequence, at least one: the blocks in flight then share those groups' K and
  // V in L2, and short sequences still have the tail of tile-major order. On
  // H200 (bench/results/2026-11-30-h200-session23.md) one section of every
  // group ran 4-8% slower than the grid at 4096-8192 keys without the mask
  // (every group's K and V in flight) and 2-4% faster than sections of one
  // group with it. (A static deal, a snake over the blocks, left SMs
  // idle 10% of dense S = 1024: bench/results/2026-11-29-h200-session18.md;
  // a stride over the grid's own order was 26-41% slower still on causal
  // work, bench/results/2026-11-27-h100-persistent-snake.md.) The
  // producer's first thread claims at a program's start and hands the claim
  // to the block's threads after the program (handOver); programs without
  // rows (past a sequence's tiles) claim too, so a launch's claims number
  // its programs exactly.
  Value groups32 = e.i32(1);
  for (size_t i = 1; i < extents.size(); ++i)
    groups32 = arith::MulIOp::create(b, groups32, extents[i]);
  bool sections = !claimsTileMajor && kvBytesPerSequence;
  Value sectionGroups32, sectionPrograms32;
  if (sections) {
    // As many groups as fit (at least one), then spread evenly over the
    // sections it takes, so that the last section is not a small remainder
    // whose long programs would start last.
    Value fit = e.divU(e.idx(kSectionBytes),
                       arith::MaxUIOp::create(b, kvBytesPerSequence, e.idx(1)));
    fit = e.toI32(arith::MinUIOp::create(b, fit, e.idx(1 << 30)),
                  /*isSigned=*/false);
    fit = arith::MaxUIOp::create(b, e.i32(1),
                                 arith::MinUIOp::create(b, fit, groups32));
    Value count = arith::CeilDivUIOp::create(b, groups32, fit);
    sectionGroups32 = arith::CeilDivUIOp::create(b, groups32, count);
    sectionPrograms32 = arith::MulIOp::create(b, sectionGroups32, extents[0]);
  }
  Type i32 = b.getI32Type();
  auto loop = [&](PersistentKernel::Role role) {
    state.role = role;
    persistent = state;
    scf::WhileOp::create(
        b, TypeRange{i32, i32}, ValueRange{e.i32(0), first32},
        [&](OpBuilder &ob, Location loc, ValueRange args) {
          ImplicitLocOpBuilder ib(loc, ob);
          scf::ConditionOp::create(
              ib,
              arith::CmpIOp::create(ib, arith::CmpIPredicate::ult, args[1],
                                    total32),
              args);
        },
        [&](OpBuilder &, Location, ValueRange args) {
          // (The region's builder is `b`, placed in the new block.)
          Value round = args[0], linear = args[1];
          Value claimer;
          Value claimed;
          if (role == PersistentKernel::Role::Producer) {
            claimer = e.eq(gpu::ThreadIdOp::create(b, gpu::Dimension::x),
                           e.idx(persistentConsumerWarps * kLanes));
            claimed = claimProgram(e, entry, claimer);
          }
          // The query tile counted from the last, and the head group:
          // in one section of every group, the program's number over the
          // groups and its remainder; otherwise its section, the section's
          // first group and groups (the last section may hold fewer), then
          // the tile and group within the section.
          Value tile, rest;
          if (sections) {
            Value section =
                arith::DivUIOp::create(b, linear, sectionPrograms32);
            Value within = arith::RemUIOp::create(b, linear, sectionPrograms32);
            Value group0 = arith::MulIOp::create(b, section, sectionGroups32);
            Value inSection = arith::MinUIOp::create(
                b, sectionGroups32, arith::SubIOp::create(b, groups32, group0));
            tile = arith::DivUIOp::create(b, within, inSection);
            rest = arith::AddIOp::create(
                b, group0, arith::RemUIOp::create(b, within, inSection));
          } else {
            tile = arith::DivUIOp::create(b, linear, groups32);
            rest = arith::RemUIOp::create(b, linear, groups32);
          }
          SmallVector<Value> ids(extents.size());
          for (size_t i = 1; i < extents.size(); ++i) {
            ids[i] = arith::IndexCastUIOp::create(
                b, b.getIndexType(),
                arith::RemUIOp::create(b, rest, extents[i]));
            rest = arith::DivUIOp::create(b, rest, extents[i]);
          }
          ids[0] =
              e.sub(e.sub(ubs[0], e.idx(1)),
                    arith::IndexCastUIOp::create(b, b.getIndexType(), tile));
          body(ids);
          Value next = handOver(e, entry, state.barriers, round, claimer,
                                claimed, total32, blocks32);
          scf::YieldOp::create(
              b, ValueRange{arith::AddIOp::create(b, round, e.i32(1)), next});
        });
    persistent.reset();
  };
  splitRoles(
      b, e, entry, e.divU(tid, e.idx(kLanes)), persistentConsumerWarps,
      [&] { loop(PersistentKernel::Role::Producer); },
      [&] { loop(PersistentKernel::Role::Consumer); }, /*persistent=*/true);
}
