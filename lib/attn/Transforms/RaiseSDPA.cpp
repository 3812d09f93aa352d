//===- RaiseSDPA.cpp - attn-raise-sdpa: linalg attention to attn.flash ----===//
//
// Recognises scaled dot-product attention written with upstream linalg ops on
// tensors or on buffers and rewrites it into attn.flash when the two compute
// the same function (docs/raising.md states the conditions). The matcher
// walks back from the P.V contraction; every check that fails leaves the IR
// untouched.
//
//===----------------------------------------------------------------------===//

#include "attn/IR/AttnDialect.h"
#include "attn/IR/AttnOps.h"
#include "attn/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNRAISESDPA
#include "attn/Transforms/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;
using namespace mlir::attn;

namespace {

bool isF32(Value v) { return getElementTypeOrSelf(v.getType()).isF32(); }

bool hasUses(Value v, unsigned n) {
  return static_cast<unsigned>(std::distance(v.use_begin(), v.use_end())) == n;
}

/// How values flow between the matched ops. Tensors: through SSA results.
/// Buffers: through memrefs that one linalg op writes (a DPS init) and later
/// ops read (DPS inputs); every intermediate buffer must be a local
/// allocation touched by nothing but the matched ops and deallocations, so
/// that the matched ops alone decide its contents.
struct Flow {
  bool buffers = false;

  /// `op` works on the form being matched, writing one value.
  bool semantics(linalg::LinalgOp op) const {
    if (!op)
      return false;
    return buffers ? op.hasPureBufferSemantics() && op->getNumResults() == 0
                   : op.hasPureTensorSemantics() && op->getNumResults() == 1;
  }

  /// The value `op` computes: its result, or the buffer it writes.
  Value result(Operation *op) const {
    if (!buffers)
      return op->getResult(0);
    return cast<DestinationStyleOpInterface>(op).getDpsInits()[0];
  }

  static bool isInit(Operation *user, Value v) {
    auto dps = dyn_cast<DestinationStyleOpInterface>(user);
    return dps && llvm::is_contained(dps.getDpsInits(), v);
  }

  /// Buffers: whether `v` is a local allocation whose users are linalg
  /// ops (and deallocations) that write it at most twice (a linalg.fill, then
  /// one other op) before every read.
  static bool isLocalBuffer(Value v) {
    if (!v.getDefiningOp<memref::AllocOp>() &&
        !v.getDefiningOp<memref::AllocaOp>())
      return false;
    Operation *writer = nullptr, *fill = nullptr;
    for (Operation *user : v.getUsers()) {
      if (isa<memref::DeallocOp>(user))
        continue;
      if (!isa<DestinationStyleOpInterface>(user) ||
          user->getBlock() != v.getParentBlock())
        return false;
      if (!isInit(user, v))
        continue;
      auto dps = cast<DestinationStyleOpInterface>(user);
      // Read and written by one op: not a dataflow edge.
      if (llvm::any_of(dps.getDpsInputs(), [&](Value in) { return in == v; }))
        return false;
      if (isa<linalg::FillOp>(user) && !fill)
        fill = user;
      else if (!writer)
        writer = user;
      else
        return false;
    }
    if (!writer || (fill && !fill->isBeforeInBlock(writer)))
      return false;
    for (Operation *user : v.getUsers())
      if (!isa<memref::DeallocOp>(user) && !isInit(user, v) &&
          !writer->isBeforeInBlock(user))
        return false;
    return true;
  }

  /// The op that computes `v`: its defining op, or the one op (besides a
  /// linalg.fill) that writes the local buffer `v`.
  Operation *producer(Value v) const {
    if (!buffers)
      return v.getDefiningOp();
    if (!isa<MemRefType>(v.getType()) || !isLocalBuffer(v))
      return nullptr;
    for (Operation *user : v.getUsers())
      if (isInit(user, v) && !isa<linalg::FillOp>(user))
        return user;
    return nullptr;
  }
  template <typename OpTy> OpTy producer(Value v) const {
    return dyn_cast_or_null<OpTy>(producer(v));
  }

  /// `v` is read by exactly `n` ops (tensors: has n uses).
  bool readers(Value v, unsigned n) const {
    if (!buffers)
      return hasUses(v, n);
    if (!isLocalBuffer(v))
      return false;
    unsigned reads = 0;
    for (Operation *user : v.getUsers())
      if (!isa<memref::DeallocOp>(user) && !isInit(user, v))
        ++reads;
    return reads == n;
  }

  /// The linalg.fill that sets `init` before `op` writes it (buffers), or
  /// that produced the tensor `init`; null if there is none.
  linalg::FillOp fillOf(Value init, Operation *op) const {
    if (!buffers)
      return init.getDefiningOp<linalg::FillOp>();
    // The last fill of the buffer before `op`, with nothing writing it in
    // between (the region check in rewrite() rules out other writers).
    linalg::FillOp last;
    for (Operation *user : init.getUsers())
      if (auto fill = dyn_cast<linalg::FillOp>(user);
          fill && fill->getBlock() == op->getBlock() &&
          fill->isBeforeInBlock(op) && (!last || last->isBeforeInBlock(fill)))
        last = fill;
    return last;
  }

  /// The value every element of `op`'s init holds before `op` runs: a
  /// filled constant (buffers: the fill is appended to `fills`).
  std::optional<APFloat> initValue(Operation *op,
                                   SmallVectorImpl<Operation *> &fills) const;
};

/// The float constant `v` is (a scalar, or a splat tensor).
std::optional<APFloat> floatConstant(Value v) {
  FloatAttr f;
  if (matchPattern(v, m_Constant(&f)))
    return f.getValue();
  DenseFPElementsAttr d;
  if (matchPattern(v, m_Constant(&d)) && d.isSplat())
    return d.getSplatValue<APFloat>();
  return std::nullopt;
}

/// The value every element of `init` holds: a linalg.fill of a constant or a
/// constant splat tensor.
std::optional<APFloat> fillValue(Value init) {
  if (auto fill = init.getDefiningOp<linalg::FillOp>())
    return floatConstant(fill.getInputs()[0]);
  return floatConstant(init);
}

std::optional<APFloat>
Flow::initValue(Operation *op, SmallVectorImpl<Operation *> &fills) const {
  Value init = cast<DestinationStyleOpInterface>(op).getDpsInits()[0];
  if (!buffers)
    return fillValue(init);
  linalg::FillOp fill = fillOf(init, op);
  if (!fill)
    return std::nullopt;
  fills.push_back(fill);
  return floatConstant(fill.getInputs()[0]);
}

/// A block argument of the payload, seen through an extension to f32.
BlockArgument argThroughExt(Value v) {
  if (auto ext = v.getDefiningOp<arith::ExtFOp>())
    v = ext.getIn();
  return dyn_cast<BlockArgument>(v);
}

/// The value the payload yields.
Value yielded(linalg::LinalgOp op) {
  return op.getBlock()->getTerminator()->getOperand(0);
}

/// A linalg op computing one tensor elementwise over `rank` parallel loops:
/// its output map is the identity and the payload ignores the output's old
/// value.
bool isElementwise(const Flow &f, linalg::LinalgOp op, int64_t rank) {
  if (!f.semantics(op) || op.getNumLoops() != static_cast<unsigned>(rank) ||
      op.getNumParallelLoops() != op.getNumLoops() || op.getNumDpsInits() != 1)
    return false;
  OpOperand *init = op.getDpsInitOperand(0);
  return op.getMatchingIndexingMap(init).isIdentity() &&
         !op.payloadUsesValueFromOperand(init) &&
         op.getBlock()->getTerminator()->getNumOperands() == 1;
}

/// A reduction over the last of `rank` loops into a tensor of rank - 1,
/// reading `input` whole; returns the payload's combining op.
Operation *lastDimReduction(const Flow &f, linalg::LinalgOp op, int64_t rank,
                            Value input) {
  if (!f.semantics(op) || op.getNumLoops() != static_cast<unsigned>(rank) ||
      op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getDpsInputOperand(0)->get() != input)
    return nullptr;
  SmallVector<utils::IteratorType> it = op.getIteratorTypesArray();
  for (int64_t d = 0; d < rank; ++d)
    if ((it[d] == utils::IteratorType::reduction) != (d == rank - 1))
      return nullptr;
  MLIRContext *ctx = op.getContext();
  SmallVector<AffineExpr> kept;
  for (int64_t d = 0; d + 1 < rank; ++d)
    kept.push_back(getAffineDimExpr(d, ctx));
  if (!op.getMatchingIndexingMap(op.getDpsInputOperand(0)).isIdentity() ||
      op.getMatchingIndexingMap(op.getDpsInitOperand(0)) !=
          AffineMap::get(rank, 0, kept, ctx))
    return nullptr;
  Operation *combine = yielded(op).getDefiningOp();
  if (!combine || combine->getNumOperands() != 2)
    return nullptr;
  Block *body = op.getBlock();
  Value in = body->getArgument(0), acc = body->getArgument(1);
  Value a = combine->getOperand(0), b = combine->getOperand(1);
  if (!((a == in && b == acc) || (a == acc && b == in)))
    return nullptr;
  return combine;
}

/// The map of operand `operand` of an op with `rank` loops, as a row/column
/// broadcast: the identity, or (for rank 3 and 4) the map dropping the
/// leading batch dim.
enum class Broadcast { none, batch, other };
Broadcast broadcastOf(AffineMap map, int64_t rank) {
  if (map.isIdentity())
    return Broadcast::none;
  MLIRContext *ctx = map.getContext();
  SmallVector<AffineExpr> kept;
  for (int64_t d = 1; d < rank; ++d)
    kept.push_back(getAffineDimExpr(d, ctx));
  if (rank >= 3 && map == AffineMap::get(rank, 0, kept, ctx))
    return Broadcast::batch;
  return Broadcast::other;
}

/// A contraction `out[b, m, n] = sum_r lhs[...] * rhs[...]` over f32 (inputs
/// possibly extended to it) into a zero-filled f32 init. `transposedRhs`
/// selects rhs[b, n, r] (Q.K^T) over rhs[b, r, n] (P.V). Batch dims are
/// absent when rank is 2. Loops may come in any order. The zero fill of a
/// buffer init is appended to `fills`.
bool isContraction(const Flow &f, linalg::LinalgOp op, int64_t rank,
                   bool transposedRhs, SmallVectorImpl<Operation *> &fills) {
  if (!f.semantics(op) || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 ||
      op.getNumLoops() != static_cast<unsigned>(rank + 1) ||
      op.getNumReductionLoops() != 1 || !isF32(f.result(op)))
    return false;
  // The loop roles, read off the output map and the one reduction loop.
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (!outMap.isProjectedPermutation() ||
      outMap.getNumResults() != static_cast<unsigned>(rank))
    return false;
  SmallVector<utils::IteratorType> it = op.getIteratorTypesArray();
  unsigned red = 0;
  for (unsigned d = 0; d < it.size(); ++d)
    if (it[d] == utils::IteratorType::reduction)
      red = d;
  MLIRContext *ctx = op.getContext();
  SmallVector<AffineExpr> o(outMap.getResults());
  AffineExpr r = getAffineDimExpr(red, ctx);
  AffineExpr n = o[rank - 1], m = o[rank - 2];
  SmallVector<AffineExpr> lhs, rhs;
  for (int64_t d = 0; d + 2 < rank; ++d) // batch (and head) dims
    lhs.push_back(o[d]), rhs.push_back(o[d]);
  lhs.append({m, r});
  if (transposedRhs)
    rhs.append({n, r});
  else
    rhs.append({r, n});
  unsigned loops = op.getNumLoops();
  if (op.getMatchingIndexingMap(op.getDpsInputOperand(0)) !=
          AffineMap::get(loops, 0, lhs, ctx) ||
      op.getMatchingIndexingMap(op.getDpsInputOperand(1)) !=
          AffineMap::get(loops, 0, rhs, ctx))
    return false;

  // Payload: acc + ext(a) * ext(b), in f32.
  Block *body = op.getBlock();
  auto add = yielded(op).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value acc = body->getArgument(2);
  Value prod = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  if ((add.getLhs() == acc) == (add.getRhs() == acc))
    return false;
  auto mul = prod.getDefiningOp<arith::MulFOp>();
  if (!mul || !mul.getType().isF32())
    return false;
  BlockArgument a = argThroughExt(mul.getLhs()),
                b = argThroughExt(mul.getRhs());
  if (!a || !b || a.getOwner() != body || b.getOwner() != body)
    return false;
  if (!((a.getArgNumber() == 0 && b.getArgNumber() == 1) ||
        (a.getArgNumber() == 1 && b.getArgNumber() == 0)))
    return false;
  for (Value in : op.getDpsInputs()) {
    Type t = getElementTypeOrSelf(in.getType());
    if (!t.isF32() && !t.isF16() && !t.isBF16())
      return false;
  }
  SmallVector<Operation *> fill;
  std::optional<APFloat> init = f.initValue(op, fill);
  if (!init || !init->isZero())
    return false;
  fills.append(fill);
  return true;
}

/// A linear form ci * i + cj * j + c of the query row i and key column j.
struct Linear {
  int64_t ci = 0, cj = 0, c = 0;
};

/// Reads an index computation in a payload whose loop `rowDim` is the query
/// row and `colDim` the key column.
std::optional<Linear> linearIndex(Value v, int64_t rowDim, int64_t colDim) {
  if (auto idx = v.getDefiningOp<linalg::IndexOp>()) {
    if (static_cast<int64_t>(idx.getDim()) == rowDim)
      return Linear{1, 0, 0};
    if (static_cast<int64_t>(idx.getDim()) == colDim)
      return Linear{0, 1, 0};
    return std::nullopt;
  }
  IntegerAttr cst;
  if (matchPattern(v, m_Constant(&cst)))
    return Linear{0, 0, cst.getValue().getSExtValue()};
  // Casts of index values keep them: sizes are static and small.
  if (auto cast = v.getDefiningOp<arith::IndexCastOp>())
    return linearIndex(cast.getIn(), rowDim, colDim);
  if (auto cast = v.getDefiningOp<arith::IndexCastUIOp>())
    return linearIndex(cast.getIn(), rowDim, colDim);
  auto combine = [&](Value a, Value b, int64_t sign) -> std::optional<Linear> {
    auto x = linearIndex(a, rowDim, colDim), y = linearIndex(b, rowDim, colDim);
    if (!x || !y)
      return std::nullopt;
    return Linear{x->ci + sign * y->ci, x->cj + sign * y->cj,
                  x->c + sign * y->c};
  };
  if (auto add = v.getDefiningOp<arith::AddIOp>())
    return combine(add.getLhs(), add.getRhs(), 1);
  if (auto sub = v.getDefiningOp<arith::SubIOp>())
    return combine(sub.getLhs(), sub.getRhs(), -1);
  return std::nullopt;
}

/// The smallest value of `l` over 0 <= i < rows, 0 <= j < cols.
int64_t minOver(Linear l, int64_t rows, int64_t cols) {
  return l.c + std::min<int64_t>(0, l.ci * (rows - 1)) +
         std::min<int64_t>(0, l.cj * (cols - 1));
}

/// For a condition over (i, j), the offset `off` such that the condition
/// holds exactly when j > i + off (true) or exactly when j <= i + off
/// (false, through `negated`).
std::optional<int64_t> causalOffset(Value cond, int64_t rowDim, int64_t colDim,
                                    int64_t rows, int64_t cols, bool &negated) {
  auto cmp = cond.getDefiningOp<arith::CmpIOp>();
  if (!cmp)
    return std::nullopt;
  auto a = linearIndex(cmp.getLhs(), rowDim, colDim);
  auto b = linearIndex(cmp.getRhs(), rowDim, colDim);
  if (!a || !b)
    return std::nullopt;
  using P = arith::CmpIPredicate;
  P pred = cmp.getPredicate();
  // Unsigned comparisons agree with signed ones on non-negative sides.
  if (pred == P::ugt || pred == P::uge || pred == P::ult || pred == P::ule) {
    if (minOver(*a, rows, cols) < 0 || minOver(*b, rows, cols) < 0)
      return std::nullopt;
    pred = pred == P::ugt   ? P::sgt
           : pred == P::uge ? P::sge
           : pred == P::ult ? P::slt
                            : P::sle;
  }
  // d = a - b = ci * i + cj * j + c, compared with 0; bring j to +1.
  Linear d{a->ci - b->ci, a->cj - b->cj, a->c - b->c};
  if (d.cj == -1) {
    d = Linear{-d.ci, 1, -d.c};
    // Swapping the sides of the comparison: d > 0 <=> -d < 0.
    switch (pred) {
    case P::sgt:
      pred = P::slt;
      break;
    case P::sge:
      pred = P::sle;
      break;
    case P::slt:
      pred = P::sgt;
      break;
    case P::sle:
      pred = P::sge;
      break;
    default:
      return std::nullopt;
    }
  }
  if (d.cj != 1 || d.ci != -1)
    return std::nullopt;
  // j - i + c PRED 0.
  switch (pred) {
  case P::sgt: // j > i - c
    negated = false;
    return -d.c;
  case P::sge: // j > i - c - 1
    negated = false;
    return -d.c - 1;
  case P::sle: // j <= i - c
    negated = true;
    return -d.c;
  case P::slt: // j <= i - c - 1
    negated = true;
    return -d.c - 1;
  default:
    return std::nullopt;
  }
}

/// A value that hides a key: -inf, or a finite value so negative that its
/// exp underflows to 0 next to any visible score (the type's lowest, or
/// at most -1e30).
bool isMaskFill(const APFloat &f) {
  if (f.isInfinity())
    return f.isNegative();
  if (f.isNaN() || !f.isNegative())
    return false;
  APFloat lowest = APFloat::getLargest(f.getSemantics(), /*Negative=*/true);
  return f.compare(lowest) == APFloat::cmpEqual || f.convertToDouble() <= -1e30;
}

/// `select(cond, fill, x)` / `select(cond, x, fill)` in a payload: whether
/// it hides exactly the keys j > i + (cols - rows). `x` is what survives.
bool isCausalSelect(arith::SelectOp sel, Value x, int64_t rowDim,
                    int64_t colDim, int64_t rows, int64_t cols) {
  Value fill;
  bool hideWhenTrue;
  if (sel.getFalseValue() == x)
    fill = sel.getTrueValue(), hideWhenTrue = true;
  else if (sel.getTrueValue() == x)
    fill = sel.getFalseValue(), hideWhenTrue = false;
  else
    return false;
  std::optional<APFloat> f = floatConstant(fill);
  if (!f || !isMaskFill(*f))
    return false;
  bool negated = false;
  std::optional<int64_t> off =
      causalOffset(sel.getCondition(), rowDim, colDim, rows, cols, negated);
  // Hidden set: {cond} when hideWhenTrue, else its complement; it must be
  // {j > i + off}.
  return off && negated != hideWhenTrue && *off == cols - rows;
}

/// What the matcher found; ops are erased after the rewrite when dead.
struct Sdpa {
  Value q, k, v;
  Value bias;          // [B, S, Sk] or [S, Sk] (broadcast over the batch)
  double scale = 1.0;  // score multiplier
  bool causal = false; // bottom-right, as attn.flash defines it
  Operation *root = nullptr;
  SmallVector<Operation *> ops;   // matched ops, producers last
  int64_t rank = 0;               // 4: [B, H, S, D]; 3: [B, S, D]; 2: [S, D]
  bool scaleSeen = false;         // the last step matched was the scale
  Flow flow;                      // tensors or buffers
  Value result;                   // what the root computes (its out buffer)
  int64_t kGroup = 1, vGroup = 1; // GQA: query heads per K / V head
};

class Matcher {
public:
  explicit Matcher(Sdpa &m) : m(m), f(m.flow) {}

  /// Matches a P.V contraction (or the truncation of one) as the root.
  bool matchRoot(Operation *op) {
    auto lin = dyn_cast<linalg::LinalgOp>(op);
    if (!lin)
      return false;
    m.flow.buffers = lin.hasPureBufferSemantics() && lin.getNumDpsInits() == 1;
    // The truncation of the f32 result to the input type, when present.
    linalg::LinalgOp pv = lin;
    linalg::LinalgOp trunc;
    if (isElementwise(f, lin, 4) || isElementwise(f, lin, 3) ||
        isElementwise(f, lin, 2)) {
      if (lin.getNumDpsInputs() != 1)
        return false;
      auto t = yielded(lin).getDefiningOp<arith::TruncFOp>();
      if (!t || t.getIn() != lin.getBlock()->getArgument(0))
        return false;
      trunc = lin;
      pv = f.producer<linalg::LinalgOp>(lin.getDpsInputs()[0]);
      if (!pv || !f.readers(f.result(pv), 1))
        return false;
    }
    if (!f.semantics(pv))
      return false;
    m.rank = cast<ShapedType>(f.result(pv).getType()).getRank();
    if (m.rank < 2 || m.rank > 4 ||
        !isContraction(f, pv, m.rank, /*transposedRhs=*/false, m.ops))
      return false;
    m.ops.push_back(op);
    if (trunc)
      m.ops.push_back(pv);
    m.root = op;
    m.v = throughHeadRepeat(pv.getDpsInputs()[1], m.vGroup);
    Value p = pv.getDpsInputs()[0];
    if (!f.readers(p, 1))
      return false;
    // P rounded to V's type before the product (as GPU flash kernels do).
    if (auto r = f.producer<linalg::LinalgOp>(p);
        r && isElementwise(f, r, m.rank) && r.getNumDpsInputs() == 1) {
      auto t = yielded(r).getDefiningOp<arith::TruncFOp>();
      if (t && t.getIn() == r.getBlock()->getArgument(0)) {
        m.ops.push_back(r);
        p = r.getDpsInputs()[0];
        if (!f.readers(p, 1) || !isF32(p))
          return false;
      }
    }
    if (!isF32(p))
      return false;
    Value x = matchSoftmax(p);
    if (!x || !matchScores(x, /*sawScale=*/false))
      return false;
    m.result = f.result(trunc ? trunc : pv);
    return checkTypes(m.result);
  }

private:
  Sdpa &m;
  const Flow &f;

  /// GQA written as repeat_interleave of K/V heads ([B, H, S, D] tensors):
  /// `x` = collapse_shape [[0], [1, 2], [3], [4]] of a linalg.broadcast
  /// (dimensions = [2]) of `kv` [B, Hk, S, D] to [B, Hk, G, S, D], so head
  /// h of x is head h / G of kv, attn.flash's GQA. Returns kv (and G), or
  /// x itself (G = 1) for any other producer. A broadcast before the head
  /// dim (tiling: head h is h % Hk) is not this and is not matched.
  Value throughHeadRepeat(Value x, int64_t &group) {
    group = 1;
    if (m.rank != 4 || f.buffers || !hasUses(x, 1))
      return x;
    auto collapse = x.getDefiningOp<tensor::CollapseShapeOp>();
    if (!collapse ||
        collapse.getReassociationIndices() !=
            SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}, {4}})
      return x;
    auto bc = collapse.getSrc().getDefiningOp<linalg::BroadcastOp>();
    if (!bc || !hasUses(bc->getResult(0), 1) ||
        bc.getDimensions() != ArrayRef<int64_t>{2})
      return x;
    auto repeated = cast<RankedTensorType>(bc->getResult(0).getType());
    if (!repeated.hasStaticShape())
      return x;
    group = repeated.getDimSize(2);
    m.ops.append({collapse, bc});
    return bc.getInput();
  }

  /// softmax over the last dim of `x` producing `p`; returns x.
  Value matchSoftmax(Value p) {
    if (auto sm = f.producer<linalg::SoftmaxOp>(p)) {
      if (sm.getDimension() != static_cast<uint64_t>(m.rank - 1) ||
          !isF32(sm.getInput()))
        return {};
      m.ops.push_back(sm);
      return f.readers(sm.getInput(), 1) ? sm.getInput() : Value();
    }
    // Decomposed: p = e / sum(e), e = exp(x - max(x)) (one or two ops).
    auto div = f.producer<linalg::LinalgOp>(p);
    if (!isElementwise(f, div, m.rank) || div.getNumDpsInputs() != 2)
      return {};
    auto d = yielded(div).getDefiningOp<arith::DivFOp>();
    Block *body = div.getBlock();
    if (!d || d.getLhs() != body->getArgument(0) ||
        d.getRhs() != body->getArgument(1) ||
        !div.getMatchingIndexingMap(div.getDpsInputOperand(0)).isIdentity())
      return {};
    Value e = div.getDpsInputs()[0], sum = div.getDpsInputs()[1];
    auto sumOp = f.producer<linalg::LinalgOp>(sum);
    Operation *add = lastDimReduction(f, sumOp, m.rank, e);
    if (!add || !isa<arith::AddFOp>(add) || !f.readers(sum, 1) ||
        !f.readers(e, 2) || !isF32(e))
      return {};
    // The denominator broadcasts along the reduced dim.
    if (div.getMatchingIndexingMap(div.getDpsInputOperand(1)) !=
        sumOp.getMatchingIndexingMap(sumOp.getDpsInitOperand(0)))
      return {};
    std::optional<APFloat> zero = f.initValue(sumOp, m.ops);
    if (!zero || !zero->isZero())
      return {};
    m.ops.append({div, sumOp});

    // e = exp(x - max), fused or as sub then exp.
    auto expOp = f.producer<linalg::LinalgOp>(e);
    if (!isElementwise(f, expOp, m.rank))
      return {};
    m.ops.push_back(expOp);
    auto exp = yielded(expOp).getDefiningOp<math::ExpOp>();
    if (!exp)
      return {};
    linalg::LinalgOp subOp = expOp;
    if (expOp.getNumDpsInputs() == 1) {
      if (exp.getOperand() != expOp.getBlock()->getArgument(0))
        return {};
      Value diff = expOp.getDpsInputs()[0];
      subOp = f.producer<linalg::LinalgOp>(diff);
      if (!f.readers(diff, 1) || !isElementwise(f, subOp, m.rank) ||
          subOp.getNumDpsInputs() != 2)
        return {};
      m.ops.push_back(subOp);
      auto sub = yielded(subOp).getDefiningOp<arith::SubFOp>();
      if (!sub || !isSubOfArgs(sub, subOp))
        return {};
    } else {
      auto sub = exp.getOperand().getDefiningOp<arith::SubFOp>();
      if (expOp.getNumDpsInputs() != 2 || !sub || !isSubOfArgs(sub, expOp))
        return {};
    }
    Value x = subOp.getDpsInputs()[0], max = subOp.getDpsInputs()[1];
    auto maxOp = f.producer<linalg::LinalgOp>(max);
    Operation *mx = lastDimReduction(f, maxOp, m.rank, x);
    if (!mx || !f.readers(max, 1) || !f.readers(x, 2) || !isF32(x) ||
        !subOp.getMatchingIndexingMap(subOp.getDpsInputOperand(0))
             .isIdentity() ||
        subOp.getMatchingIndexingMap(subOp.getDpsInputOperand(1)) !=
            maxOp.getMatchingIndexingMap(maxOp.getDpsInitOperand(0)))
      return {};
    // The max's start value must not change the max of a row that has a
    // visible score: -inf (or the lowest value), or NaN under maxnumf.
    std::optional<APFloat> init = f.initValue(maxOp, m.ops);
    if (!init || !(isa<arith::MaxNumFOp>(mx) || isa<arith::MaximumFOp>(mx)))
      return {};
    bool neutral =
        (init->isInfinity() && init->isNegative()) ||
        init->compare(APFloat::getLargest(init->getSemantics(), true)) ==
            APFloat::cmpEqual ||
        (init->isNaN() && isa<arith::MaxNumFOp>(mx));
    if (!neutral)
      return {};
    m.ops.push_back(maxOp);
    return x;
  }

  static bool isSubOfArgs(arith::SubFOp sub, linalg::LinalgOp op) {
    Block *body = op.getBlock();
    return sub.getLhs() == body->getArgument(0) &&
           sub.getRhs() == body->getArgument(1);
  }

  /// The scores before softmax: Q.K^T, optionally scaled (first), then
  /// with an additive bias and/or a causal mask, in either order.
  bool matchScores(Value x, bool sawScale) {
    auto op = f.producer<linalg::LinalgOp>(x);
    if (!op)
      return false;
    if (isContraction(f, op, m.rank, /*transposedRhs=*/true, m.ops)) {
      m.ops.push_back(op);
      m.q = op.getDpsInputs()[0];
      m.k = throughHeadRepeat(op.getDpsInputs()[1], m.kGroup);
      return true;
    }
    // Q.(K^T) with an explicit transpose of K.
    if (isContraction(f, op, m.rank, /*transposedRhs=*/false, m.ops)) {
      auto tr = f.producer<linalg::TransposeOp>(op.getDpsInputs()[1]);
      SmallVector<int64_t> perm =
          llvm::to_vector(llvm::seq<int64_t>(0, m.rank));
      std::swap(perm[m.rank - 2], perm[m.rank - 1]);
      if (!tr || !f.readers(f.result(tr), 1) ||
          tr.getPermutation() != ArrayRef<int64_t>(perm))
        return false;
      m.ops.append({op, tr});
      m.q = op.getDpsInputs()[0];
      m.k = throughHeadRepeat(tr.getInput(), m.kGroup);
      return true;
    }
    if (sawScale || !isElementwise(f, op, m.rank) || !isF32(x))
      return false;
    auto shape = cast<ShapedType>(x.getType()).getShape();
    int64_t rows = shape[m.rank - 2], cols = shape[m.rank - 1];
    Block *body = op.getBlock();
    Value result = yielded(op);
    Operation *def = result.getDefiningOp();
    if (!def)
      return false;
    m.ops.push_back(op);

    // Which input carries the scores: try each that is read elementwise.
    for (OpOperand *in : op.getDpsInputOperands()) {
      if (!op.getMatchingIndexingMap(in).isIdentity() ||
          !f.readers(in->get(), 1))
        continue;
      Value arg = body->getArgument(in->getOperandNumber());
      Sdpa saved = m;
      if (matchStep(op, in, arg, def, rows, cols) &&
          matchScores(in->get(), m.scaleSeen))
        return true;
      m = saved;
    }
    return false;
  }

  /// One elementwise step on the scores `arg` (operand `in` of `op`).
  bool matchStep(linalg::LinalgOp op, OpOperand *in, Value arg, Operation *def,
                 int64_t rows, int64_t cols) {
    m.scaleSeen = false;
    Block *body = op.getBlock();
    int64_t rowDim = m.rank - 2, colDim = m.rank - 1;
    auto other = [&](Value a, Value b) { return a == arg ? b : a; };
    // The other operand: a constant, or a constant splat input.
    auto constantOf = [&](Value v) -> std::optional<APFloat> {
      if (auto ba = dyn_cast<BlockArgument>(v);
          ba && ba.getOwner() == body &&
          ba.getArgNumber() < op.getNumDpsInputs())
        return floatConstant(op.getDpsInputs()[ba.getArgNumber()]);
      if (v.getParentBlock() == body && !v.getDefiningOp<arith::ConstantOp>())
        return std::nullopt;
      return floatConstant(v);
    };
    unsigned inputs = op.getNumDpsInputs();

    // Scale: x * c or x / c (the first step after Q.K^T only).
    if (isa<arith::MulFOp, arith::DivFOp>(def) && inputs <= 2 &&
        (def->getOperand(0) == arg ||
         (isa<arith::MulFOp>(def) && def->getOperand(1) == arg))) {
      Value c = other(def->getOperand(0), def->getOperand(1));
      std::optional<APFloat> f = constantOf(c);
      if (!f || c == arg)
        return false;
      if (inputs == 2 && !isa<BlockArgument>(c))
        return false;
      double v = f->convertToDouble();
      if (isa<arith::DivFOp>(def)) {
        if (v == 0.0 || !std::isfinite(v))
          return false;
        v = 1.0 / v;
      }
      if (!std::isfinite(v))
        return false;
      m.scale = v;
      m.scaleSeen = true;
      return true;
    }

    // Causal mask in place: select(cond(i, j), fill, x).
    if (auto sel = dyn_cast<arith::SelectOp>(def)) {
      if (inputs != 1 || m.causal ||
          !isCausalSelect(sel, arg, rowDim, colDim, rows, cols))
        return false;
      m.causal = true;
      return true;
    }

    // Additive: x + bias, or x + an index-built causal mask.
    auto add = dyn_cast<arith::AddFOp>(def);
    if (!add || inputs != 2 || (add.getLhs() != arg && add.getRhs() != arg))
      return false;
    Value addend = other(add.getLhs(), add.getRhs());
    // x + select(cond, fill, 0) computed in the payload.
    if (auto sel = addend.getDefiningOp<arith::SelectOp>()) {
      if (m.causal || sel->getBlock() != body)
        return false;
      for (Value kept : {sel.getTrueValue(), sel.getFalseValue()}) {
        std::optional<APFloat> z = floatConstant(kept);
        if (z && z->isZero() &&
            isCausalSelect(sel, kept, rowDim, colDim, rows, cols)) {
          m.causal = true;
          return true;
        }
      }
      return false;
    }
    BlockArgument ba = argThroughExt(addend);
    if (!ba || ba.getOwner() != body || ba == arg)
      return false;
    OpOperand *bOperand = op.getDpsInputOperand(ba.getArgNumber());
    Value b = bOperand->get();
    Broadcast bc = broadcastOf(op.getMatchingIndexingMap(bOperand), m.rank);
    if (bc == Broadcast::other)
      return false;
    if (matchIndexMask(b, rows, cols)) {
      if (m.causal)
        return false;
      m.causal = true;
      return true;
    }
    Type bt = getElementTypeOrSelf(b.getType());
    if (m.bias || !(bt.isF32() || bt.isF16() || bt.isBF16()) ||
        !cast<ShapedType>(b.getType()).hasStaticShape())
      return false;
    m.bias = b;
    return true;
  }

  /// A tensor built by a linalg op from indices alone: 0 where key j of row
  /// i is visible, a hiding fill where j > i + (cols - rows).
  bool matchIndexMask(Value b, int64_t rows, int64_t cols) {
    auto gen = f.producer<linalg::GenericOp>(b);
    if (!gen || gen.getNumDpsInputs() != 0 || gen.getNumDpsInits() != 1 ||
        !f.semantics(gen) || !f.readers(b, 1))
      return false;
    int64_t r = gen.getNumLoops();
    if (r < 2 || gen.getNumParallelLoops() != gen.getNumLoops() ||
        !gen.getMatchingIndexingMap(gen.getDpsInitOperand(0)).isIdentity() ||
        gen.payloadUsesValueFromOperand(gen.getDpsInitOperand(0)))
      return false;
    auto shape = cast<ShapedType>(b.getType()).getShape();
    if (shape[r - 2] != rows || shape[r - 1] != cols)
      return false;
    auto sel = yielded(gen).getDefiningOp<arith::SelectOp>();
    if (!sel)
      return false;
    // The kept value is a constant 0.
    for (Value kept : {sel.getTrueValue(), sel.getFalseValue()}) {
      std::optional<APFloat> z = floatConstant(kept);
      if (z && z->isZero() &&
          isCausalSelect(sel, kept, r - 2, r - 1, rows, cols)) {
        m.ops.push_back(gen);
        return true;
      }
    }
    return false;
  }

  /// Element types and shapes attn.flash takes: q, k, v of one type T (f32,
  /// f16, bf16) with static shapes, D equal for all three, and a result of
  /// type T. Buffers: identity layouts (reshaped without copies), and an out
  /// buffer that is none of the inputs.
  bool checkTypes(Value result) {
    auto qt = cast<ShapedType>(m.q.getType());
    auto kt = cast<ShapedType>(m.k.getType());
    auto vt = cast<ShapedType>(m.v.getType());
    auto rt = cast<ShapedType>(result.getType());
    if (f.buffers) {
      for (Value x : {m.q, m.k, m.v, result, m.bias})
        if (x && !cast<MemRefType>(x.getType()).getLayout().isIdentity())
          return false;
      if (llvm::is_contained({m.q, m.k, m.v, m.bias}, result))
        return false;
    }
    Type t = qt.getElementType();
    if (!(t.isF32() || t.isF16() || t.isBF16()) || kt.getElementType() != t ||
        vt.getElementType() != t || rt.getElementType() != t)
      return false;
    if (!qt.hasStaticShape() || !kt.hasStaticShape() || !vt.hasStaticShape() ||
        !rt.hasStaticShape())
      return false;
    int64_t r = m.rank;
    auto q = qt.getShape(), k = kt.getShape(), v = vt.getShape();
    // GQA: K and V repeated alike, Hk * G = H.
    if (m.kGroup != m.vGroup ||
        (m.kGroup > 1 && (k[1] != v[1] || k[1] * m.kGroup != q[1])))
      return false;
    if (q[r - 1] != k[r - 1] || v[r - 1] != q[r - 1] || k[r - 2] != v[r - 2])
      return false;
    // With Lq > Lk, bottom-right causal hides every key of the first rows:
    // flash writes 0 there, softmax NaN (or a uniform average).
    if (m.causal && q[r - 2] > k[r - 2])
      return false;
    if (m.bias) {
      auto bt = cast<ShapedType>(m.bias.getType());
      if (bt.getShape().take_back(2) != ArrayRef<int64_t>{q[r - 2], k[r - 2]})
        return false;
    }
    return true;
  }
};

} // namespace

namespace {

/// [B, S, D] (or [S, D]) -> [B * S, 1, D]: one head, B packed sequences; a
/// tensor reshaped, or views of an identity-layout memref.
Value toTokensHeadsDim(OpBuilder &b, Location loc, Value t, int64_t rank) {
  auto type = cast<ShapedType>(t.getType());
  ArrayRef<int64_t> s = type.getShape();
  int64_t tokens = rank == 3 ? s[0] * s[1] : s[0];
  SmallVector<ReassociationIndices> rowsOf = {{0, 1}, {2}},
                                    split = {{0}, {1, 2}};
  if (isa<MemRefType>(type)) {
    Value rows =
        rank == 3 ? memref::CollapseShapeOp::create(b, loc, t, rowsOf) : t;
    return memref::ExpandShapeOp::create(
        b, loc, MemRefType::get({tokens, 1, s.back()}, type.getElementType()),
        rows, split);
  }
  Value rows =
      rank == 3 ? tensor::CollapseShapeOp::create(b, loc, t, rowsOf) : t;
  return tensor::ExpandShapeOp::create(
      b, loc,
      RankedTensorType::get({tokens, 1, s.back()}, type.getElementType()), rows,
      split);
}

Value toBuffer(OpBuilder &b, Location loc, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  auto memref = MemRefType::get(type.getShape(), type.getElementType());
  return bufferization::ToBufferOp::create(b, loc, memref, t,
                                           /*read_only=*/true);
}

/// Buffers: whether replacing the matched ops by one attn.flash at the root
/// keeps the program's meaning. Every op from the first matched one to the
/// root is matched, free of memory effects, or allocates or frees a local
/// buffer of the match; every intermediate buffer is used by matched ops
/// and deallocations only. Then nothing else reads or writes q, k, v, the
/// bias or out while the matched ops run, and flash reads its inputs at
/// the root as the original read them earlier.
bool isSelfContained(const Sdpa &m) {
  Block *block = m.root->getBlock();
  DenseSet<Operation *> matched(m.ops.begin(), m.ops.end());
  DenseSet<Value> locals;
  Operation *first = m.root;
  for (Operation *op : m.ops) {
    if (op->getBlock() != block)
      return false;
    if (op->isBeforeInBlock(first))
      first = op;
    for (Value init : cast<DestinationStyleOpInterface>(op).getDpsInits())
      if (init != m.result)
        locals.insert(init);
  }
  for (Value local : locals) {
    if (!Flow::isLocalBuffer(local) && !local.getDefiningOp<memref::AllocOp>())
      return false;
    for (Operation *user : local.getUsers())
      if (!matched.contains(user) && !isa<memref::DeallocOp>(user))
        return false;
  }
  for (Operation *op = first; op != m.root; op = op->getNextNode()) {
    if (matched.contains(op) || isMemoryEffectFree(op))
      continue;
    if (isa<memref::AllocOp, memref::AllocaOp>(op))
      continue; // a fresh buffer aliases nothing
    if (auto dealloc = dyn_cast<memref::DeallocOp>(op);
        dealloc && locals.contains(dealloc.getMemref()))
      continue;
    return false;
  }
  return true;
}

/// Buffers: the matched ops go, and with them the local buffers they
/// communicated through (their allocations and deallocations).
void eraseMatchedBuffers(Sdpa &m) {
  SetVector<Value> locals;
  for (Operation *op : m.ops)
    for (Value init : cast<DestinationStyleOpInterface>(op).getDpsInits())
      if (init != m.result)
        locals.insert(init);
  SetVector<Operation *> ops(m.ops.begin(), m.ops.end());
  for (Operation *op : ops)
    op->erase();
  for (Value local : locals) {
    for (Operation *user : llvm::make_early_inc_range(local.getUsers()))
      if (isa<memref::DeallocOp>(user))
        user->erase();
    if (local.use_empty())
      local.getDefiningOp()->erase();
  }
}

/// Offsets of `batch` sequences of `len` rows each: 0, L, 2L, ...
Value sequenceOffsets(OpBuilder &b, Location loc, int64_t batch, int64_t len,
                      bool buffers) {
  SmallVector<int32_t> cu;
  for (int64_t i = 0; i <= batch; ++i)
    cu.push_back(static_cast<int32_t>(i * len));
  if (buffers) {
    // A stack array: the program may not be bufferized again.
    auto type = MemRefType::get({batch + 1}, b.getI32Type());
    Value buf = memref::AllocaOp::create(b, loc, type);
    for (int64_t i = 0; i <= batch; ++i)
      memref::StoreOp::create(
          b, loc, arith::ConstantIntOp::create(b, loc, cu[i], 32), buf,
          ValueRange{arith::ConstantIndexOp::create(b, loc, i)});
    return buf;
  }
  auto type = RankedTensorType::get({batch + 1}, b.getI32Type());
  Value cst = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, ArrayRef<int32_t>(cu)));
  return toBuffer(b, loc, cst);
}

/// [B, H, S, D]: one attn.flash per batch entry, in an scf.for, on
/// [S, H, D] views of q[b], k[b], v[b] and out[b] (a rank-reducing subview,
/// then memref.transpose: strided layouts, no copies): H heads of one
/// sequence each.
void rewriteHeads(Sdpa &m) {
  Operation *root = m.root;
  OpBuilder b(root);
  Location loc = root->getLoc();
  bool buffers = m.flow.buffers;
  auto qt = cast<ShapedType>(m.q.getType());
  auto kt = cast<ShapedType>(m.k.getType());
  auto rt = cast<ShapedType>(m.result.getType());
  int64_t batch = qt.getDimSize(0), lq = qt.getDimSize(2),
          lk = kt.getDimSize(2);
  auto asBuffer = [&](Value t) { return buffers ? t : toBuffer(b, loc, t); };
  Value q = asBuffer(m.q), k = asBuffer(m.k), v = asBuffer(m.v);
  auto outType = MemRefType::get(rt.getShape(), rt.getElementType());
  Value out =
      buffers ? m.result : memref::AllocOp::create(b, loc, outType).getResult();
  Value cuQ = sequenceOffsets(b, loc, 1, lq, buffers);
  Value cuK = sequenceOffsets(b, loc, 1, lk, buffers);
  Value scale = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(static_cast<float>(m.scale)));
  // A bias without the batch dim ([H, S, Sk]) is flash's [1, H, S, Sk].
  Value bias = m.bias ? asBuffer(m.bias) : Value();
  bool biasPerBatch = bias && cast<ShapedType>(bias.getType()).getRank() == 4;
  if (bias && !biasPerBatch) {
    auto bt = cast<MemRefType>(bias.getType());
    SmallVector<int64_t> shape = {1};
    llvm::append_range(shape, bt.getShape());
    bias = memref::ExpandShapeOp::create(
        b, loc, MemRefType::get(shape, bt.getElementType()), bias,
        SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}});
  }

  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value count = arith::ConstantIndexOp::create(b, loc, batch);
  auto loop = scf::ForOp::create(b, loc, zero, count, one);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value iv = loop.getInductionVar();
    // Entry iv of a [B, ...] buffer, keeping (`keep`) or dropping the dim.
    auto entry = [&](Value t, bool keep) {
      auto type = cast<MemRefType>(t.getType());
      ArrayRef<int64_t> s = type.getShape();
      SmallVector<OpFoldResult> offsets(s.size(), b.getIndexAttr(0));
      offsets[0] = iv;
      SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1)};
      for (int64_t d : s.drop_front())
        sizes.push_back(b.getIndexAttr(d));
      SmallVector<OpFoldResult> strides(s.size(), b.getIndexAttr(1));
      SmallVector<int64_t> shape(s.begin(), s.end());
      if (!keep)
        shape.erase(shape.begin());
      else
        shape[0] = 1;
      auto viewType = memref::SubViewOp::inferRankReducedResultType(
          shape, type, offsets, sizes, strides);
      return memref::SubViewOp::create(b, loc, viewType, t, offsets, sizes,
                                       strides)
          .getResult();
    };
    // [H, L, D] -> [L, H, D].
    auto heads = [&](Value t) {
      AffineMap perm = AffineMap::getPermutationMap(ArrayRef<unsigned>{1, 0, 2},
                                                    b.getContext());
      return memref::TransposeOp::create(b, loc, entry(t, false),
                                         AffineMapAttr::get(perm))
          .getResult();
    };
    Value biasView = biasPerBatch ? entry(bias, true) : bias;
    FlashOp::create(b, loc, heads(q), heads(k), heads(v), cuQ, cuK, scale,
                    biasView, Value(), Value(), Value(), Value(), Value(),
                    Value(), Value(), Value(), heads(out), /*lse=*/Value(),
                    m.causal, TypeAttr(), ScheduleAttr());
  }
  if (buffers) {
    eraseMatchedBuffers(m);
    return;
  }
  Value result = bufferization::ToTensorOp::create(
      b, loc, cast<RankedTensorType>(rt), out, /*restrict=*/true,
      /*writable=*/true);
  root->getResult(0).replaceAllUsesWith(result);
  for (Operation *op : m.ops)
    if (op->use_empty())
      op->erase();
}

void rewrite(Sdpa &m) {
  if (m.rank == 4)
    return rewriteHeads(m);
  Operation *root = m.root;
  OpBuilder b(root);
  Location loc = root->getLoc();
  bool buffers = m.flow.buffers;
  auto qt = cast<ShapedType>(m.q.getType());
  auto kt = cast<ShapedType>(m.k.getType());
  auto rt = cast<ShapedType>(m.result.getType());
  int64_t r = m.rank;
  int64_t batch = r == 3 ? qt.getDimSize(0) : 1;
  int64_t lq = qt.getDimSize(r - 2), lk = kt.getDimSize(r - 2);

  auto operand = [&](Value t) {
    Value packed = toTokensHeadsDim(b, loc, t, r);
    return buffers ? packed : toBuffer(b, loc, packed);
  };
  Value q = operand(m.q), k = operand(m.k), v = operand(m.v);
  Value cuQ = sequenceOffsets(b, loc, batch, lq, buffers);
  Value cuK = sequenceOffsets(b, loc, batch, lk, buffers);
  Value scale = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(static_cast<float>(m.scale)));
  Value bias;
  if (m.bias) {
    auto bt = cast<ShapedType>(m.bias.getType());
    bool perBatch = bt.getRank() == 3;
    SmallVector<int64_t> expanded = {perBatch ? bt.getDimSize(0) : 1, 1, lq,
                                     lk};
    SmallVector<ReassociationIndices> re =
        perBatch ? SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}}
                 : SmallVector<ReassociationIndices>{{0, 1, 2}, {3}};
    if (buffers)
      bias = memref::ExpandShapeOp::create(
          b, loc, MemRefType::get(expanded, bt.getElementType()), m.bias, re);
    else
      bias = toBuffer(b, loc,
                      tensor::ExpandShapeOp::create(
                          b, loc,
                          RankedTensorType::get(expanded, bt.getElementType()),
                          m.bias, re));
  }
  auto outType = MemRefType::get({batch * lq, 1, rt.getShape().back()},
                                 rt.getElementType());
  Value out = buffers ? toTokensHeadsDim(b, loc, m.result, r)
                      : memref::AllocOp::create(b, loc, outType).getResult();
  FlashOp::create(b, loc, q, k, v, cuQ, cuK, scale, bias, Value(), Value(),
                  Value(), Value(), Value(), Value(), Value(), Value(), out,
                  /*lse=*/Value(), m.causal, TypeAttr(), ScheduleAttr());
  if (buffers) {
    eraseMatchedBuffers(m);
    return;
  }
  Value packed = bufferization::ToTensorOp::create(
      b, loc, memref::getTensorTypeFromMemRefType(outType), out,
      /*restrict=*/true, /*writable=*/true);
  Value rows = tensor::CollapseShapeOp::create(
      b, loc, packed, SmallVector<ReassociationIndices>{{0}, {1, 2}});
  Value result = rows;
  if (r == 3)
    result = tensor::ExpandShapeOp::create(
        b, loc, cast<RankedTensorType>(rt), rows,
        SmallVector<ReassociationIndices>{{0, 1}, {2}});
  root->getResult(0).replaceAllUsesWith(result);
  // The matched ops are dead now; erase them consumers first.
  for (Operation *op : m.ops)
    if (op->use_empty())
      op->erase();
}

struct RaiseSDPAPass : attn::impl::AttnRaiseSDPABase<RaiseSDPAPass> {
  void runOnOperation() override {
    SmallVector<Operation *> candidates;
    getOperation()->walk(
        [&](linalg::LinalgOp op) { candidates.push_back(op); });
    // Ops of an earlier match are erased: skip them.
    DenseSet<Operation *> erased;
    for (Operation *op : candidates) {
      if (erased.contains(op))
        continue;
      Sdpa m;
      if (!Matcher(m).matchRoot(op) || (m.flow.buffers && !isSelfContained(m)))
        continue;
      for (Operation *o : m.ops)
        erased.insert(o);
      rewrite(m);
    }
  }
};

} // namespace
