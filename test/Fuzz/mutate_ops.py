#!/usr/bin/env python3
"""Mutation fuzzer for the attn verifiers: attn-opt must never crash.

Takes the valid ops of test/Dialect/ops.mlir, mutates dimensions, element
types, attribute values and drops optional operand clauses, and runs attn-opt
on each mutant. A mutant may be accepted or rejected with a diagnostic; a
signal (crash, assert, abort) or a hang is a failure.

usage: mutate_ops.py ATTN_OPT OPS_MLIR [--count N] [--seed S]
"""
import argparse
import random
import re
import subprocess
import sys

DIMS = ["?", "0", "1", "2", "3", "4", "7", "8", "16", "32", "64", "128"]
ELEMS = ["f32", "f16", "bf16", "f8E4M3FN", "f8E5M2", "i32", "i64", "i8"]
INTS = ["-5", "-1", "0", "1", "3", "64", "9223372036854775807"]


def mutate(text, rng):
    kind = rng.randrange(5)
    if kind == 0:  # change one memref dimension
        spots = [m for m in re.finditer(r"memref<((?:[?\d]+x)+)", text)]
        m = rng.choice(spots)
        dims = m.group(1).split("x")[:-1]
        dims[rng.randrange(len(dims))] = rng.choice(DIMS)
        return text[: m.start(1)] + "x".join(dims) + "x" + text[m.end(1):]
    if kind == 1:  # change one element type
        spots = [m for m in re.finditer(r"x(f32|f16|bf16|f8E4M3FN|f8E5M2|i32)>", text)]
        m = rng.choice(spots)
        return text[: m.start(1)] + rng.choice(ELEMS) + text[m.end(1):]
    if kind == 2:  # change an integer attribute
        spots = [m for m in re.finditer(r"= (-?\d+) : i64", text)]
        if not spots:
            return text
        m = rng.choice(spots)
        return text[: m.start(1)] + rng.choice(INTS) + text[m.end(1):]
    if kind == 3:  # change rank of one memref
        spots = [m for m in re.finditer(r"memref<((?:[?\d]+x)+)", text)]
        m = rng.choice(spots)
        dims = m.group(1).split("x")[:-1]
        if rng.random() < 0.5 and len(dims) > 1:
            dims.pop(rng.randrange(len(dims)))
        else:
            dims.insert(rng.randrange(len(dims) + 1), rng.choice(DIMS))
        return text[: m.start(1)] + "x".join(dims) + "x" + text[m.end(1):]
    # replace an element type everywhere (keeps consistent-but-odd programs)
    a, b = rng.sample(ELEMS, 2)
    return text.replace("x" + a + ">", "x" + b + ">")


def functions(text):
    return re.findall(r"^func\.func .*?^}\n", text, flags=re.S | re.M)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attn_opt")
    ap.add_argument("ops_mlir")
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    funcs = functions(open(args.ops_mlir).read())
    assert funcs, "no functions found"
    rejected = accepted = 0
    for i in range(args.count):
        text = rng.choice(funcs)
        for _ in range(rng.randint(1, 3)):
            text = mutate(text, rng)
        try:
            proc = subprocess.run([args.attn_opt, "-"], input=text.encode(),
                                  capture_output=True, timeout=30)
        except subprocess.TimeoutExpired:
            print(f"HANG on mutant {i}:\n{text}")
            return 1
        if proc.returncode < 0 or proc.returncode > 1:
            print(f"CRASH (rc={proc.returncode}) on mutant {i}:\n{text}\n"
                  f"{proc.stderr.decode()[-2000:]}")
            return 1
        if proc.returncode == 0:
            accepted += 1
        else:
            if b"error:" not in proc.stderr:
                print(f"rejected without a diagnostic, mutant {i}:\n{text}")
                return 1
            rejected += 1
    print(f"{args.count} mutants: {accepted} accepted, {rejected} rejected "
          f"with a diagnostic, no crash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
