//===- AttnAttrs.td - attn dialect attributes --------------*- tablegen -*-===//

#ifndef ATTN_IR_ATTNATTRS_TD
#define ATTN_IR_ATTNATTRS_TD

include "attn/IR/AttnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

// The three forms in which the seeds add an ALiBi bias to a score. For a
// query at absolute position `qpos` of a sequence with `ctx` cached tokens
// and a key at position `kpos`, the bias is `slope * d` with
//   relative: d = kpos - qpos   (prefix prefill; <= 0 under causal masking)
//   context:  d = kpos - ctx    (unified attention)
//   absolute: d = kpos
// All three differ by a per-row constant and so give the same softmax; they
// differ in the partial row maxima that split-KV forms expose.
def Attn_AlibiForm : I32EnumAttr<"AlibiForm", "ALiBi bias form", [
    I32EnumAttrCase<"relative", 0>,
    I32EnumAttrCase<"context", 1>,
    I32EnumAttrCase<"absolute", 2>,
    I32EnumAttrCase<"sqrt", 3>
  ]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}

def Attn_AlibiFormAttr : EnumAttr<Attn_Dialect, Attn_AlibiForm, "alibi"> {
  let assemblyFormat = "`<` $value `>`";
}

// How a kernel op is tiled: `block_q` query tokens per program, times
// `heads_per_program` query heads of one KV head packed into the M tile (GQA
// packing), and `block_n` keys per KV tile. Chosen by `attn-plan` per target.
def Attn_ScheduleAttr : AttrDef<Attn_Dialect, "Schedule"> {
  let mnemonic = "schedule";
  let summary = "tile sizes of an attention op";
  let description = [{
    `block_q` query tokens times `heads_per_program` query heads (of one KV
    head) form a program's M tile; `block_n` keys form a KV tile. `warps`
    (GPU targets) splits the M tile into that many row slabs, one per warp
    or wave; 0 lets the target give each warp one 16-row MMA tile.
  }];
  let parameters = (ins "int64_t":$block_q, "int64_t":$block_n,
                        "int64_t":$heads_per_program,
                        DefaultValuedParameter<"int64_t", "0">:$warps);
  let assemblyFormat = "`<` struct(params) `>`";
  // Ranges (attn/IR/AttnLimits.h) hold wherever the attribute appears, so
  // that no pass multiplies unchecked sizes.
  let genVerifyDecl = 1;
}

#endif // ATTN_IR_ATTNATTRS_TD
