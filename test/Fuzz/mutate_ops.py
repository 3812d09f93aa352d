#!/usr/bin/env python3
"""Mutation fuzzer for the attn verifiers and pipelines: attn-opt must never
crash, hang or accept an op that is malformed by construction.

Takes the valid ops of test/Dialect/ops.mlir in three forms (the custom
assembly, the generic form with its operandSegmentSizes, and bytecode written
from mutated generic text without verification), mutates dimensions, element
types, ranks, integer attributes, schedules and operand segments, and runs
attn-opt on each mutant. A mutant may be accepted or rejected with a
diagnostic; an accepted one then goes through the CPU, NVVM and ROCDL
pipelines, each of which must succeed or fail with a diagnostic.

Failures: a signal or an exit status other than 0 or 1 (crash, assert,
abort), a run over the time cap (hang), a rejection without "error:", and an
accepted mutant that the mutation made malformed for certain (a required
operand segment without its one value, a negative segment, an element type
no operand takes, an attribute or schedule field outside its range). Each
failing mutant is written to --save DIR so it can become a regression test
(test/Fuzz/regressions/).

usage: mutate_ops.py ATTN_OPT OPS_MLIR [--count N] [--seed S] [--jobs J]
           [--forms custom,generic,bytecode] [--pipelines cpu,nvvm,rocdl]
           [--timeout SECONDS] [--save DIR]
"""
import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

DIMS = ["?", "0", "1", "2", "3", "4", "7", "8", "16", "32", "64", "128",
        "1025", "4097", "65537", "2147483648", "4611686018427387904"]
ELEMS = ["f32", "f16", "bf16", "f8E4M3FN", "f8E5M2", "i32", "i64", "i8"]
INTS = ["-5", "-1", "0", "1", "3", "64", "4097", "65537", "2147483648",
        "9223372036854775807"]
SCHEDULE_FIELDS = ["-1", "0", "1", "2", "16", "64", "128", "1024", "4096",
                   "4097", "2147483648", "9223372036854775807"]

# The ODS operand groups of the ops with operandSegmentSizes, in order; '?'
# marks an optional group (the verifiers' verifyOperandSegments tables).
GROUPS = {
    "prefix_prefill": "q k v k_cache v_cache block_table query_start seq_lens "
                      "scale k_scale? v_scale? alibi_slopes? sinks? "
                      "out_scale? out",
    "unified": "q k_cache v_cache block_table cu_seqlens_q seqused_k scale "
               "softcap? q_descale? k_descale? v_descale? alibi_slopes? "
               "sinks? qq_bias? mm_prefix_range? rswa_prefix_lens? "
               "k_scale_cache? v_scale_cache? causal_flags? "
               "out_scale? out segment_max? segment_sum? lse? merged_out? "
               "merge_counters?",
    "flash": "q k v cu_seqlens_q cu_seqlens_k scale bias? dropout_p? "
             "philox_seed? philox_offset? q_scale? k_scale? v_scale? "
             "p_scale? out_scale? out lse?",
    "merge_states": "partial segment_max? segment_sum? segment_lse? sinks? "
                    "out_scale? out",
}
GROUPS = {op: names.split() for op, names in GROUPS.items()}

# Integer attributes and their valid ranges (attn/IR/AttnLimits.h).
INT_ATTR_RANGES = {"sliding_window": (1, 2**31 - 1),
                   "num_segments": (1, 4096),
                   "rswa_window": (1, 2**31 - 1),
                   "chunk_lookback": (0, 2**31 - 2),
                   "min_query_len": (1, 2**63 - 1),
                   "max_query_len": (1, 2**63 - 1),
                   "block_size": (1, 65536),
                   "q_block_size": (1, 65536)}
SCHEDULE_RANGES = {"block_q": (1, 4096), "block_n": (1, 4096),
                   "heads_per_program": (1, 4096), "warps": (0, 32),
                   "producer_warps": (0, 4)}

PIPELINES = {
    "cpu": ["--attn-lower-to-cpu-pipeline"],
    "nvvm": ["--attn-lower-to-nvvm-pipeline=chip=sm_90a"],
    "rocdl": ["--attn-lower-to-rocdl-pipeline=chip=gfx942 format=isa"],
}


def _memref_spots(text):
    return list(re.finditer(r"memref<((?:[?\d]+x)+)", text))


def mutate(text, rng, generic):
    """One random mutation of `text`."""
    kinds = ["dim", "elem", "int", "rank", "elem_all", "schedule"]
    if generic:
        kinds += ["segments", "segments"]
    kind = rng.choice(kinds)
    if kind == "dim":
        spots = _memref_spots(text)
        if not spots:
            return text
        m = rng.choice(spots)
        dims = m.group(1).split("x")[:-1]
        dims[rng.randrange(len(dims))] = rng.choice(DIMS)
        return text[: m.start(1)] + "x".join(dims) + "x" + text[m.end(1):]
    if kind == "elem":
        spots = list(re.finditer(r"x(f32|f16|bf16|f8E4M3FN|f8E5M2|i32)>", text))
        if not spots:
            return text
        m = rng.choice(spots)
        return text[: m.start(1)] + rng.choice(ELEMS) + text[m.end(1):]
    if kind == "int":
        spots = list(re.finditer(r"= (-?\d+) : i64", text))
        if not spots:
            return text
        m = rng.choice(spots)
        return text[: m.start(1)] + rng.choice(INTS) + text[m.end(1):]
    if kind == "rank":
        spots = _memref_spots(text)
        if not spots:
            return text
        m = rng.choice(spots)
        dims = m.group(1).split("x")[:-1]
        if rng.random() < 0.5 and len(dims) > 1:
            dims.pop(rng.randrange(len(dims)))
        else:
            dims.insert(rng.randrange(len(dims) + 1), rng.choice(DIMS))
        return text[: m.start(1)] + "x".join(dims) + "x" + text[m.end(1):]
    if kind == "schedule":
        fields = {f: rng.choice(SCHEDULE_FIELDS) if rng.random() < 0.5 else v
                  for f, v in (("block_q", "16"), ("block_n", "32"),
                               ("heads_per_program", "1"), ("warps", "0"))}
        # Sometimes the sm_90a pipeline's fields too, persistent included
        # (each op and target must take them or reject them with a
        # diagnostic).
        if rng.random() < 0.3:
            fields.update(tma="true", producer_warps="4",
                          pingpong=rng.choice(["true", "false"]),
                          persistent=rng.choice(["true", "false"]))
        attr = ("#attn.schedule<" + ", ".join(f"{k} = {v}" for k, v in
                                               fields.items()) + ">")
        if "#attn.schedule<" in text:
            return re.sub(r"#attn\.schedule<[^>]*>", attr, text, count=1)
        return _add_attr(text, "schedule = " + attr, generic)
    if kind == "segments":
        m = re.search(r"operandSegmentSizes = array<i32: ([-\d, ]+)>", text)
        if not m:
            return text
        sizes = [int(s) for s in m.group(1).split(",")]
        i = rng.randrange(len(sizes))
        if rng.random() < 0.5 and len(sizes) > 1:
            # Move one value to another group: the count stays right.
            j = rng.randrange(len(sizes))
            sizes[i] -= 1
            sizes[j] += 1
        else:
            sizes[i] = rng.choice([-1, 0, 1, 2, 3])
        return (text[: m.start(1)] + ", ".join(map(str, sizes)) +
                text[m.end(1):])
    # Replace one element type everywhere (consistent but odd programs).
    a, b = rng.sample(ELEMS, 2)
    return text.replace("x" + a + ">", "x" + b + ">")


def _add_attr(text, attr, generic):
    """Adds `attr` to the attn op of `text`."""
    if generic:
        return re.sub(r'("attn\.\w+"\([^)]*\) <\{)', r"\1" + attr + ", ",
                      text, count=1)
    m = re.search(r"(attn\.\w+ [^\n]*(?:\n\s+[^\n]*)*?)(\s*\{([^{}]*)\})?\n\s*return",
                  text)
    if not m:
        return text
    if m.group(2):
        inner = m.group(3)
        return (text[: m.start(2)] + " {" + inner + ", " + attr + "}" +
                text[m.end(2):])
    return text[: m.end(1)] + " {" + attr + "}" + text[m.end(1):]


def malformed(text):
    """Why `text` holds an attn op that no verifier may accept, or None.
    Only mutations whose effect is certain count: a wrong segment layout,
    an element type that no operand takes, an attribute out of range."""
    m = re.search(r'"attn\.(\w+)"\(([^)]*)\) <\{[^\n]*?operandSegmentSizes = '
                  r'array<i32: ([-\d, ]+)>', text)
    if m:
        op, operands = m.group(1), m.group(2)
        sizes = [int(s) for s in m.group(3).split(",")]
        count = len([o for o in operands.split(",") if o.strip()])
        names = GROUPS.get(op)
        if any(s < 0 for s in sizes):
            return "negative operand segment"
        if sum(sizes) != count:
            return "operand segments do not sum to the operand count"
        if names and len(names) == len(sizes):
            for name, size in zip(names, sizes):
                if size > 1 or (size == 0 and not name.endswith("?")):
                    return f"operand segment '{name}' has {size} values"
    op_line = re.search(r"attn\.\w+.*", text, flags=re.S)
    # (i8 is valid in attn.unified: int8 caches with per-token-head scales
    # and the per-sequence causal flags.)
    bad_ints = "i64" if op_line and "attn.unified" in op_line.group(0) \
        else "i64|i8"
    if op_line and re.search(rf"memref<[^>]*x({bad_ints})[,>]",
                             op_line.group(0)):
        return "an operand of element type i64 or i8"
    for name, (lo, hi) in INT_ATTR_RANGES.items():
        for v in re.findall(rf"\b{name} = (-?\d+) : i64", text):
            if not lo <= int(v) <= hi:
                return f"{name} = {v} outside [{lo}, {hi}]"
    for sched in re.findall(r"#attn\.schedule<([^>]*)>", text):
        for name, v in re.findall(r"(\w+) = (-?\d+)", sched):
            lo, hi = SCHEDULE_RANGES[name]
            if not lo <= int(v) <= hi:
                return f"schedule {name} = {v} outside [{lo}, {hi}]"
    return None


def functions(text):
    return re.findall(r"^func\.func .*?^}\n", text, flags=re.S | re.M)


class Runner:
    def __init__(self, attn_opt, timeout, pipelines, tmp):
        self.attn_opt, self.timeout = attn_opt, timeout
        self.pipelines, self.tmp = pipelines, tmp

    def run(self, args, data):
        """(status, stderr): status 'ok', 'rejected' or a failure word. A run
        over the time cap is tried once more before it counts as a hang, so
        that a machine busy with other work does not make a slow run look
        like one (a real hang hangs twice)."""
        for attempt in range(2):
            try:
                proc = subprocess.run([self.attn_opt, *args], input=data,
                                      capture_output=True,
                                      timeout=self.timeout)
                break
            except subprocess.TimeoutExpired:
                if attempt:
                    return "hang", b""
        if proc.returncode == 0:
            return "ok", proc.stderr
        if proc.returncode == 1:
            if b"error:" not in proc.stderr:
                return "rejected without a diagnostic", proc.stderr
            return "rejected", proc.stderr
        return f"crash (rc={proc.returncode})", proc.stderr

    def check(self, index, text, form):
        """None, or (what failed, details) for one mutant."""
        if form == "bytecode":
            # Written without verification, exactly as a tool would receive
            # a damaged or hostile file.
            path = os.path.join(self.tmp, f"m{index}.mlirbc")
            status, err = self.run(
                ["-", "--mlir-very-unsafe-disable-verifier-on-parsing",
                 "--emit-bytecode", "-o", path], text.encode())
            if status == "rejected":
                return None  # not even parseable: nothing to write
            if status != "ok":
                return f"writing bytecode: {status}", err
            status, err = self.run([path], b"")
            source = [path]
        else:
            status, err = self.run(["-"], text.encode())
            source = ["-"]
        if status == "rejected":
            return None
        if status != "ok":
            return f"verifier: {status}", err
        why = malformed(text)
        if why:
            return f"accepted a malformed op ({why})", err
        data = b"" if form == "bytecode" else text.encode()
        for name in self.pipelines:
            status, err = self.run(source + PIPELINES[name], data)
            if status not in ("ok", "rejected"):
                return f"{name} pipeline: {status}", err
        if form == "bytecode":
            os.unlink(source[0])
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attn_opt")
    ap.add_argument("ops_mlir")
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--forms", default="custom,generic,bytecode")
    ap.add_argument("--pipelines", default="cpu,nvvm,rocdl")
    ap.add_argument("--save", help="directory for failing mutants")
    args = ap.parse_args()
    forms = args.forms.split(",")
    pipelines = [p for p in args.pipelines.split(",") if p]
    rng = random.Random(args.seed)

    custom = functions(open(args.ops_mlir).read())
    assert custom, "no functions found"
    generic = []
    for fn in custom:
        proc = subprocess.run([args.attn_opt, "-", "--mlir-print-op-generic"],
                              input=fn.encode(), capture_output=True)
        assert proc.returncode == 0, proc.stderr.decode()
        generic.append(proc.stdout.decode())
    # The fuzzer's table of operand groups must describe the ops as built.
    for text in generic:
        m = re.search(r'"attn\.(\w+)".*?operandSegmentSizes = array<i32: '
                      r'([-\d, ]+)>', text)
        if m and len(GROUPS[m.group(1)]) != len(m.group(2).split(",")):
            print(f"GROUPS of attn.{m.group(1)} is out of date")
            return 1

    mutants = []
    for i in range(args.count):
        form = forms[i % len(forms)]
        text = rng.choice(generic if form != "custom" else custom)
        for _ in range(rng.randint(1, 3)):
            text = mutate(text, rng, generic=form != "custom")
        mutants.append((i, text, form))

    with tempfile.TemporaryDirectory(prefix="attn_fuzz_") as tmp:
        runner = Runner(args.attn_opt, args.timeout, pipelines, tmp)
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda m: runner.check(*m), mutants))

    failures = [(m, r) for m, r in zip(mutants, results) if r]
    for (i, text, form), (what, err) in failures[:5]:
        print(f"FAILURE on mutant {i} ({form}): {what}\n{text}\n"
              f"{err.decode(errors='replace')[-2000:]}")
    if args.save and failures:
        os.makedirs(args.save, exist_ok=True)
        for (i, text, form), (what, _) in failures:
            with open(os.path.join(args.save, f"mutant{i}.mlir"), "w") as f:
                f.write(f"// {form}: {what}\n{text}")
    if failures:
        print(f"{len(failures)} of {args.count} mutants failed")
        return 1
    print(f"{args.count} mutants ({', '.join(forms)}; pipelines "
          f"{', '.join(pipelines) or 'none'}): no crash, no hang, no "
          f"malformed op accepted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
