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
    or wave; 0 lets the target give each warp one 16-row MMA tile. On NVVM
    mma.sync programs of 16-bit or fp8 tiles, more warps than 16-row slabs
    (a multiple of them, each taking whole 16-key steps) split every KV
    tile's keys instead: each warp of a slab keeps its own softmax state
    over its keys, merged after the walk (decode rows: one slab, four
    warps); elsewhere extra warps pad the M tile.

    The KV pipeline (NVVM sm_90a): `tma` loads K/V tiles with the bulk tensor
    copy engine into an mbarrier ring; `producer_warps` (0 or 4) adds a
    warpgroup that only loads K/V, with the registers moved to the consumer
    warps (setmaxnreg): by those TMA copies, or without `tma` by 16-byte
    cp.async gathers of all its threads that arrive on the ring's mbarriers
    (paged caches, whose tiles are no TMA box); `pingpong` makes the two consumer
    warpgroups take turns at the tensor cores (named barriers), each one's
    softmax running under the other's MMAs, and issues QK of tile j before
    the softmax of tile j - 1 is done with PV. `persistent` launches at most
    one block per SM, each walking the program grid (block i starts with
    program i, then claims the next from a counter of the kernel's module,
    longest programs first), so that the producer loads the next program's
    tiles under the current one's last steps and epilogue. `stages` (NVVM, 0 to
    4) is how many K/V tiles a program holds in shared memory: 1 loads tile
    j + 1 into the buffers tile j is done with; n > 1 loads tiles j + 1 ..
    j + n - 1 while tile j computes; 0 lets the target choose (2 for
    programs of 128 rows or with a producer warpgroup, whose ring is two
    deep, and 1 otherwise). ROCDL programs keep one stage. Defaults
    (false, 0, false, false, 0) are elided when printed.
  }];
  let parameters = (ins "int64_t":$block_q, "int64_t":$block_n,
                        "int64_t":$heads_per_program,
                        DefaultValuedParameter<"int64_t", "0">:$warps,
                        DefaultValuedParameter<"bool", "false">:$tma,
                        DefaultValuedParameter<"int64_t", "0">:$producer_warps,
                        DefaultValuedParameter<"bool", "false">:$pingpong,
                        DefaultValuedParameter<"bool", "false">:$persistent,
                        DefaultValuedParameter<"int64_t", "0">:$stages);
  let builders = [
    AttrBuilder<(ins "int64_t":$block_q, "int64_t":$block_n,
                     "int64_t":$heads_per_program, "int64_t":$warps), [{
      return $_get($_ctxt, block_q, block_n, heads_per_program, warps,
                   false, 0, false, false, 0);
    }]>
  ];
  let assemblyFormat = "`<` struct(params) `>`";
  // Ranges (attn/IR/AttnLimits.h) hold wherever the attribute appears, so
  // that no pass multiplies unchecked sizes.
  let genVerifyDecl = 1;
}

#endif // ATTN_IR_ATTNATTRS_TD
