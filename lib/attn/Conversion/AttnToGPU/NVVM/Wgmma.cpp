//===- Wgmma.cpp - warpgroup MMA (sm_90a) building blocks -----------------===//

#include "Wgmma.h"

#include <cassert>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::attn;

Value mlir::attn::inlinePtx(ImplicitLocOpBuilder &b, Type resultType,
                            ValueRange operands, StringRef text,
                            StringRef constraints, bool sideEffects) {
  auto op = LLVM::InlineAsmOp::create(
      b, resultType, operands, text, constraints, sideEffects,
      /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr(), ArrayAttr());
  return resultType ? op.getRes() : Value();
}

namespace {
SmallVector<Value> unpack(ImplicitLocOpBuilder &b, Value st, int64_t n) {
  SmallVector<Value> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, st, i));
  return out;
}

Type f32Struct(ImplicitLocOpBuilder &b, int64_t n) {
  return LLVM::LLVMStructType::getLiteral(b.getContext(),
                                          SmallVector<Type>(n, b.getF32Type()));
}
} // namespace

void wgmma::fence(ImplicitLocOpBuilder &b) {
  inlinePtx(b, Type(), {}, "wgmma.fence.sync.aligned;", "~{memory}");
}

void wgmma::commit(ImplicitLocOpBuilder &b) {
  inlinePtx(b, Type(), {}, "wgmma.commit_group.sync.aligned;", "~{memory}");
}

void wgmma::wait(ImplicitLocOpBuilder &b, int pending) {
  inlinePtx(b, Type(), {},
            "wgmma.wait_group.sync.aligned " + std::to_string(pending) + ";",
            "~{memory}");
}

void wgmma::fenceProxyAsync(ImplicitLocOpBuilder &b) {
  inlinePtx(b, Type(), {}, "fence.proxy.async.shared::cta;", "~{memory}");
}

Value wgmma::descriptor(ImplicitLocOpBuilder &b, Value address,
                        int64_t leadingBytes, int64_t strideBytes,
                        Swizzle swizzle) {
  Type i64 = b.getI64Type();
  auto c64 = [&](uint64_t v) {
    return arith::ConstantOp::create(b, b.getIntegerAttr(i64, v));
  };
  Value a = arith::IndexCastUIOp::create(b, i64, address);
  a = arith::AndIOp::create(b, arith::ShRUIOp::create(b, a, c64(4)),
                            c64(0x3FFF));
  // Bits 16-29: leading byte offset >> 4; 32-45: stride byte offset >> 4;
  // 62-63: the swizzle mode. Base offset 0: atoms are aligned.
  uint64_t fields = (uint64_t(leadingBytes >> 4) & 0x3FFF) << 16 |
                    (uint64_t(strideBytes >> 4) & 0x3FFF) << 32 |
                    static_cast<uint64_t>(swizzle) << 62;
  return arith::OrIOp::create(b, a, c64(fields));
}

SmallVector<Value> wgmma::mma(ImplicitLocOpBuilder &b, int64_t n, Type aType,
                              Type bType, Value aDesc, ArrayRef<Value> aRegs,
                              Value bDesc, bool transB, ArrayRef<Value> acc) {
  int64_t numAcc = n / 2;
  Type i32 = b.getI32Type();
  auto name = [](Type t) -> std::string {
    if (isa<Float8E4M3FNType>(t))
      return "e4m3";
    if (isa<Float8E5M2Type>(t))
      return "e5m2";
    return t.isF16() ? "f16" : "bf16";
  };
  bool fp8 = isa<Float8E4M3FNType, Float8E5M2Type>(aType);
  bool fp8B = isa<Float8E4M3FNType, Float8E5M2Type>(bType);
  assert(fp8 == fp8B && (fp8 || aType == bType) && !(fp8 && transB) &&
         "wgmma operand types");
  (void)fp8B;
  SmallVector<Value> operands(acc);
  std::string constraints;
  for (int64_t i = 0; i < numAcc; ++i)
    constraints += (i ? ",=f" : "=f");
  for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i)
    constraints += "," + std::to_string(i);
  int64_t next = numAcc + acc.size();
  std::string aText;
  if (aDesc) {
    operands.push_back(aDesc);
    constraints += ",l";
    aText = "$" + std::to_string(next++);
  } else {
    aText = "{";
    for (auto [i, r] : llvm::enumerate(aRegs)) {
      // f16 pairs arrive as vector<2xf16>.
      operands.push_back(r.getType() == i32
                             ? r
                             : LLVM::BitcastOp::create(b, i32, r).getResult());
      constraints += ",r";
      aText += (i ? ", $" : "$") + std::to_string(next++);
    }
    aText += "}";
  }
  operands.push_back(bDesc);
  constraints += ",l";
  std::string bText = "$" + std::to_string(next++);
  Value scaleD =
      arith::ConstantOp::create(b, b.getI32IntegerAttr(acc.empty() ? 0 : 1));
  operands.push_back(scaleD);
  constraints += ",r";
  std::string scaleText = "$" + std::to_string(next++);

  std::string d = "{";
  for (int64_t i = 0; i < numAcc; ++i)
    d += (i ? ", $" : "$") + std::to_string(i);
  d += "}";
  // imm-scale-a, imm-scale-b = 1; for 16-bit types imm-trans-a = 0
  // (K-major, descriptor A only) and imm-trans-b as asked (fp8 has neither).
  std::string trans;
  if (!fp8)
    trans = std::string(aDesc ? ", 0" : "") + ", " + (transB ? "1" : "0");
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, " + scaleText +
                     ", 0;\nwgmma.mma_async.sync.aligned.m64n" +
                     std::to_string(n) + (fp8 ? "k32" : "k16") + ".f32." +
                     name(aType) + "." + name(bType) + " " + d + ", " + aText +
                     ", " + bText + ", p, 1, 1" + trans + ";\n}";
  Value res = inlinePtx(b, f32Struct(b, numAcc), operands, text, constraints);
  return unpack(b, res, numAcc);
}

SmallVector<Value> wgmma::fenceOperands(ImplicitLocOpBuilder &b,
                                        ArrayRef<Value> values) {
  int64_t n = values.size();
  std::string constraints;
  for (int64_t i = 0; i < n; ++i)
    constraints += (i ? ",=f" : "=f");
  for (int64_t i = 0; i < n; ++i)
    constraints += "," + std::to_string(i);
  Value res = inlinePtx(b, f32Struct(b, n), values, "", constraints);
  return unpack(b, res, n);
}
