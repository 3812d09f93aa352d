//===- AttnInterfaces.td - attn op interfaces --------------*- tablegen -*-===//

#ifndef ATTN_IR_ATTNINTERFACES_TD
#define ATTN_IR_ATTNINTERFACES_TD

include "mlir/IR/OpBase.td"

def Attn_KernelOpInterface : OpInterface<"AttnKernelOpInterface"> {
  let cppNamespace = "::mlir::attn";
  let description = [{
    The four attention kernel ops (prefix_prefill, unified, flash,
    blocksparse): what planning and lowering ask of any of them. The query
    and its per-sequence offsets lay out the grid (query tiles x head
    groups x splits); the key source is where most staged keys come from;
    `accept` hands the concrete op to a lowering (AttnKernelVisitor), so
    lowerings dispatch once instead of testing each op type.
  }];
  let methods = [
    InterfaceMethod<"The queries, [tokens, q_heads, head_dim].",
      "::mlir::Value", "getQ">,
    InterfaceMethod<"The query offsets per sequence, [batch + 1] i32.",
      "::mlir::Value", "getQueryOffsets">,
    InterfaceMethod<"Where most staged keys come from (the cache of the "
                    "paged ops, k of the dense ones).",
      "::mlir::Value", "getKeySource">,
    InterfaceMethod<"Query heads.", "int64_t", "getNumQueryHeads">,
    InterfaceMethod<"KV heads.", "int64_t", "getNumKvHeads">,
    InterfaceMethod<"Head dimension.", "int64_t", "getHeadDim">,
    InterfaceMethod<"Programs per (query tile, head group): split-KV "
                    "segments, else 1.",
      "int64_t", "getGridSplits">,
    InterfaceMethod<"The tile schedule, if pinned or planned.",
      "::mlir::attn::ScheduleAttr", "getScheduleAttr">,
    InterfaceMethod<"Hands the concrete op to `visitor`.",
      "void", "accept", (ins "::mlir::attn::AttnKernelVisitor &":$visitor),
      [{}], [{ visitor.visit($_op); }]>,
  ];
}

#endif // ATTN_IR_ATTNINTERFACES_TD
