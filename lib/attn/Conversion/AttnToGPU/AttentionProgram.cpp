//===- AttentionProgram.cpp - the GPU attention program skeleton ----------===//
//
// The program skeleton (AttentionProgram.h) shared by the NVVM and ROCDL
// programs: state, initialization, the walk over the KV ranges, epilogue.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/AttentionProgram.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;

void AttentionProgram::emit(const ProgramRows &rows, ArrayRef<KvWalk> walks) {
  setUp(rows, walks);
  allocateState();
  auto consume = [&] {
    stageQuery(rows);
    initializeState(rows);
    for (const KvWalk &walk : walks) {
      if (walk.forEachBlockTile) {
        walkUnion(rows, walk);
        continue;
      }
      walk.visitRanges(
          e, [&](Value lo, Value hi) { walkRange(rows, walk, lo, hi); });
    }
    finishWalks(rows, walks);
    epilogue(rows);
  };
  if (!specialize(rows, walks, consume))
    consume();
}

void AttentionProgram::allocateState() {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  Type f32 = b.getF32Type();
  oAcc =
      memref::AllocaOp::create(b, MemRefType::get({accumulatorElems()}, f32));
  mState = memref::AllocaOp::create(b, MemRefType::get({rowSlots()}, f32));
  lState = memref::AllocaOp::create(b, MemRefType::get({rowSlots()}, f32));
}

StagedRow AttentionProgram::queryRow(const ProgramRows &rows, Value r,
                                     bool scaled) {
  Value tok = math.tokenOf(r);
  StagedRow s;
  s.valid = e.lt(tok, rows.numTokens);
  s.inRange = true; // (clamped below)
  Value qRow =
      e.add(rows.qTokBase, e.min(tok, e.sub(rows.numTokens, e.idx(1))));
  Value head = math.headOf(rows, r);
  s.mem = q;
  s.at = [=](Value d) { return SmallVector<Value>{qRow, head, d}; };
  s.scale = scaled ? rows.qScale : Value();
  s.quantize = scaled ? rows.qQuantize : Type();
  s.chunks = true;
  return s;
}

void AttentionProgram::initializeState(const ProgramRows &rows) {
  for (int64_t slot = 0; slot < rowSlots(); ++slot) {
    auto [m0, l0] = math.initialState(rows, slotRow(slot));
    // The sum is kept per lane and added over the row's lanes at the end:
    // only one of them starts with the sink's weight.
    l0 = e.select(isRowLeader(), l0, e.f32(0.0));
    e.store(m0, mState, {e.idx(slot)});
    e.store(l0, lState, {e.idx(slot)});
  }
  for (int64_t i = 0; i < accumulatorElems(); ++i)
    e.store(e.f32(0.0), oAcc, {e.idx(i)});
}

void AttentionProgram::epilogue(const ProgramRows &programRows) {
  ProgramRows rows = programRows;
  auto narrow = [&](Value x) -> Value {
    return arith::IndexCastUIOp::create(
        b, b.getIndexType(), arith::IndexCastOp::create(b, b.getI32Type(), x));
  };
  if (narrowOutputRows) {
    rows.qTokBase = narrow(rows.qTokBase);
    if (rows.partialRowBase)
      rows.partialRowBase = narrow(rows.partialRowBase);
  }
  // 16-bit outputs without an fp8 clamp go out a pair per store (rows of
  // 16-bit GPU operands are 16-byte aligned: the runtime checks): half the
  // store instructions; or, where the target trades pairs between lanes,
  // 16 bytes per store.
  auto outType = cast<MemRefType>(o.out.getType());
  Type outElem = outType.getElementType();
  bool pairs = !o.segmentMax && !o.outScale &&
               (outElem.isF16() || outElem.isBF16()) &&
               outType.isLastDimUnitStride();
  // The pair (v0, v1) * factor in the output type.
  auto packPair = [&](Value v0, Value v1, Value factor) {
    auto half = [&](Value v) {
      return arith::TruncFOp::create(b, outElem, e.mulF(v, factor)).getResult();
    };
    return vector::FromElementsOp::create(b, VectorType::get({2}, outElem),
                                          ValueRange{half(v0), half(v1)})
        .getResult();
  };
  auto outputFactor = [&](Value l, Value outScale) {
    Value factor = math.outputFactor(l, outScale);
    return accumulatorScale ? e.mulF(factor, accumulatorScale) : factor;
  };
  for (int64_t slot = 0; slot < rowSlots(); ++slot) {
    Value st = e.idx(slot);
    // Shuffles first: every lane of the warp (wave) takes part.
    Value l = reduceRow(e.load(lState, {st}), /*isMax=*/false);
    Value row = slotRow(slot);
    Value tok = math.tokenOf(row);
    Value valid = e.lt(tok, rows.numTokens);
    if (Value stores = storesRows())
      valid = e.andI(valid, stores);
    // The row's log-sum-exp (natural log; -inf for an empty row), stored
    // after the outputs so that the accumulators are dead by then (before
    // them, f32 D=64 on sm_90a spilled).
    Value lse;
    if (o.lse)
      lse = e.mulF(e.addF(e.load(mState, {st}), e.log2(l)), e.f32(kLn2));
    auto storeLse = [&] {
      if (o.lse)
        e.ifThen(e.andI(valid, isRowLeader()), [&] {
          e.store(lse, o.lse,
                  {e.add(rows.qTokBase, tok), math.headOf(rows, row)});
        });
    };
    // 16 bytes per store where the target trades pairs between lanes (every
    // lane takes part: the factor of a row past the tokens is computed too,
    // and never stored).
    if (pairs) {
      Value factor; // (made by the first pack: none where unsupported)
      auto pack = [&](Value v0, Value v1) {
        if (!factor)
          factor = outputFactor(l, Value());
        return packPair(v0, v1, factor);
      };
      auto store = [&](Value d, Value chunk) {
        e.ifThen(valid, [&] {
          vector::StoreOp::create(
              b, chunk, o.out,
              ValueRange{e.add(rows.qTokBase, tok), math.headOf(rows, row), d},
              /*nontemporal=*/false, llvm::Align(16));
        });
      };
      if (visitOutputChunks(slot, pack, store)) {
        storeLse();
        continue;
      }
    }
    e.ifThen(valid, [&] {
      Value qRow = e.add(rows.qTokBase, tok);
      Value head = math.headOf(rows, row);
      Value factor;
      Value pRow;
      if (o.segmentMax) {
        // A split-KV segment: unnormalized output, max (natural log base)
        // and sum for attn.merge_states.
        pRow = e.add(rows.partialBase(), tok);
        e.ifThen(isRowLeader(), [&] {
          Value mx = e.load(mState, {st});
          e.store(e.mulF(mx, e.f32(kLn2)), o.segmentMax,
                  {pRow, head, rows.segment});
          e.store(l, o.segmentSum, {pRow, head, rows.segment});
        });
      } else {
        factor = outputFactor(l, o.outScale);
      }
      if (pairs && visitOutputPairs(slot, [&](Value d, Value v0, Value v1) {
            vector::StoreOp::create(b, packPair(v0, v1, factor), o.out,
                                    ValueRange{qRow, head, d},
                                    /*nontemporal=*/false, llvm::Align(4));
          }))
        return;
      visitOutputs(slot, [&](Value d, Value v, bool partial) {
        auto store = [&] {
          if (o.segmentMax)
            e.store(accumulatorScale ? e.mulF(v, accumulatorScale) : v, o.out,
                    {pRow, head, rows.segment, d});
          else
            e.storeOutput(e.mulF(v, factor), o.out, {qRow, head, d},
                          bool(o.outScale));
        };
        if (partial)
          e.ifThen(e.lt(d, e.idx(shape.headDim)), store);
        else
          store();
      });
    });
    storeLse();
  }
}
