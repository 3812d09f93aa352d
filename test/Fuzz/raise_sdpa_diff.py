"""Differential fuzzing of attn-raise-sdpa.

Mutants of the functions in test/Transforms/attn-raise-sdpa*.mlir (an SSA
use swapped, a constant, predicate, index, dimension or float op changed)
go through attn-raise-sdpa: it must never crash or produce IR the verifier
rejects. Every f32 mutant it raises (tensors, or buffers: then every
argument is printed after the call) is then lowered through the CPU
pipeline twice, raised and not, and run with mlir-runner on the same
pseudo-random inputs: the outputs must agree (1e-4), which is the pass's
promise to rewrite only programs attn.flash computes exactly. Rows where
the original yields NaN may yield 0 raised (docs/raising.md).

usage: raise_sdpa_diff.py ATTN_OPT RUNNER RUNNER_LIBS TRANSFORM_LIB TESTS...
           [--seed S] [-n N]
Prints "N mutants: C crashes, R raised, K run both ways, M mismatches".
"""
import argparse
import math
import random
import re
import subprocess


def functions(paths):
    out = []
    for path in paths:
        text = open(path).read()
        # Attribute aliases and declarations the functions use (the
        # harness declares printMemrefF32 itself).
        decls = "\n".join(line for line in text.splitlines()
                          if (line.startswith("func.func private") and
                              "printMemrefF32" not in line) or
                          re.match(r"#\w+ = ", line))
        for chunk in re.split(r"\n(?=func\.func @)", text):
            if chunk.startswith("func.func @"):
                out.append((decls, chunk[:chunk.find("\n}\n") + 3]))
    return out


def mutate(rng, fn):
    lines = fn.splitlines()
    kind = rng.randrange(5)
    for _ in range(rng.randint(1, 3)):
        j = rng.randrange(len(lines))
        line = lines[j]
        if kind == 0:    # swap two SSA uses
            uses = re.findall(r"%[\w.]+", line)
            if len(uses) >= 3:
                a, b = rng.sample(uses[1:], 2)
                line = line.replace(a, "\0").replace(b, a).replace("\0", b)
        elif kind == 1:  # another constant
            line = re.sub(
                r"(arith.constant )(-?[\d.e+-]+|0x[0-9A-F]+)",
                lambda m: m.group(1) + rng.choice(
                    ["0.0", "1.0", "-1.0e+30", "0xFF800000", "2.5",
                     "0x7FC00000"]), line)
        elif kind == 2:  # another predicate
            line = re.sub(r"cmpi (\w+)", lambda m: "cmpi " + rng.choice(
                ["sgt", "sge", "slt", "sle", "ugt", "ult", "eq", "ne"]), line)
        elif kind == 3:  # another loop index, dimension or permutation
            line = re.sub(
                r"(linalg.index |dimension\(|dimensions = \[|permutation = \[)"
                r"(\d)", lambda m: m.group(1) + str(rng.randrange(4)), line)
        else:            # another float op
            line = re.sub(
                r"arith\.(addf|subf|mulf|divf|maximumf|maxnumf)",
                lambda m: "arith." + rng.choice(
                    ["addf", "subf", "mulf", "divf", "maximumf", "minimumf"]),
                line)
        lines[j] = line
    return "\n".join(lines) + "\n"


def harness(fn):
    """A main() that fills every f32 argument with sin of a scrambled index
    and prints the result (tensors) or every argument after the call
    (buffers: the outputs are arguments); None for other signatures."""
    m = re.match(r"func\.func @(\w+)\((.*?)\)( -> (tensor<[^>]*>))? \{", fn)
    if not m:
        return None
    name, args, _, res = m.groups()
    types = re.findall(r"%\w+: ((?:tensor|memref)<[^>]*>)", args)
    buffers = res is None
    if not types or any("f32" not in t or ("memref" in t) != buffers
                        for t in types + ([res] if res else [])):
        return None
    body, values = [], []
    for i, t in enumerate(types):
        rank = len(re.findall(r"(\d+)x", t))
        idx = ", ".join(f"d{j}" for j in range(rank))
        its = ", ".join(['"parallel"'] * rank)
        if buffers:
            body += [f"  %a{i} = memref.alloc() : {t}",
                     f"  linalg.generic {{indexing_maps = [affine_map<"
                     f"({idx}) -> ({idx})>], iterator_types = [{its}]}} "
                     f"outs(%a{i} : {t}) {{", "  ^bb0(%o: f32):"]
        else:
            body += [f"  %e{i} = tensor.empty() : {t}",
                     f"  %a{i} = linalg.generic {{indexing_maps = [affine_map<"
                     f"({idx}) -> ({idx})>], iterator_types = [{its}]}} "
                     f"outs(%e{i} : {t}) {{", "  ^bb0(%o: f32):"]
        acc = None
        for j in range(rank):
            body += [f"    %i{j} = linalg.index {j} : index",
                     f"    %m{j} = arith.constant {[97, 13, 7, 3][j]} : index",
                     f"    %p{j} = arith.muli %i{j}, %m{j} : index"]
            if acc:
                body.append(f"    %s{j} = arith.addi {acc}, %p{j} : index")
                acc = f"%s{j}"
            else:
                acc = f"%p{j}"
        body += [f"    %c = arith.index_cast {acc} : index to i64",
                 "    %f = arith.sitofp %c : i64 to f32",
                 f"    %k = arith.constant {0.7 + 0.31 * i} : f32",
                 "    %g = arith.mulf %f, %k : f32",
                 "    %h = math.sin %g : f32",
                 "    %two = arith.constant 2.0 : f32",
                 "    %y = arith.mulf %h, %two : f32",
                 "    linalg.yield %y : f32", "  }" if buffers else f"  }} -> {t}"]
        values.append(f"%a{i}")
    if buffers:
        body.append(f"  func.call @{name}({', '.join(values)}) : "
                    f"({', '.join(types)}) -> ()")
        for i, t in enumerate(types):
            body += [f"  %u{i} = memref.cast %a{i} : {t} to memref<*xf32>",
                     f"  func.call @printMemrefF32(%u{i}) : "
                     f"(memref<*xf32>) -> ()"]
        return ("func.func private @printMemrefF32(memref<*xf32>)\n"
                "func.func @main() {\n" + "\n".join(body) +
                "\n  return\n}\n")
    body += [f"  %r = func.call @{name}({', '.join(values)}) : "
             f"({', '.join(types)}) -> {res}",
             f"  %u = tensor.cast %r : {res} to tensor<*xf32>",
             "  func.call @printMemrefF32(%u) : (tensor<*xf32>) -> ()"]
    return ("func.func private @printMemrefF32(tensor<*xf32>)\n"
            "func.func @main() {\n" + "\n".join(body) + "\n  return\n}\n")


def execute(args, text, raise_):
    passes = ["--attn-raise-sdpa"] if raise_ else []
    lowered = subprocess.run(
        [args.attn_opt, "-"] + passes +
        [f"--transform-preload-library=transform-library-paths="
         f"{args.transform_lib}", "--transform-interpreter",
         "--one-shot-bufferize=bufferize-function-boundaries",
         "--convert-linalg-to-loops", "--attn-lower-to-cpu-pipeline"],
        input=text, capture_output=True, text=True)
    if lowered.returncode:
        return None
    ran = subprocess.run(
        [args.runner, "-e", "main", "-entry-point-result=void",
         f"-shared-libs={args.runner_libs}"],
        input=lowered.stdout, capture_output=True, text=True)
    if ran.returncode:
        return None
    values = []
    for data in ran.stdout.split("data =")[1:]:
        values += [float(x) for x in re.findall(
            r"-?(?:nan|inf|\d+\.?\d*(?:e[+-]?\d+)?)",
            data.split("Unranked Memref")[0])]
    return values


def agree(a, b):
    return len(a) == len(b) and all(
        (math.isnan(x) and (math.isnan(y) or y == 0.0)) or
        abs(x - y) <= 1e-4 + 1e-4 * abs(x) for x, y in zip(a, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attn_opt")
    ap.add_argument("runner")
    ap.add_argument("runner_libs")
    ap.add_argument("transform_lib")
    ap.add_argument("tests", nargs="+")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-n", type=int, default=100)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    pool = functions(args.tests)
    crashes = raised = compared = mismatches = 0
    for i in range(args.n):
        decls, fn = rng.choice(pool)
        mutant = mutate(rng, fn)
        text = decls + "\n" + mutant
        out = subprocess.run([args.attn_opt, "-", "--attn-raise-sdpa"],
                             input=text, capture_output=True, text=True)
        if (out.returncode < 0 or "Stack dump" in out.stderr or
                "LLVM ERROR" in out.stderr or "attn." in out.stderr):
            crashes += 1
            print(f"mutant {i}: attn-raise-sdpa failed:\n{text}\n"
                  f"{out.stderr[-800:]}")
            continue
        if out.returncode or "attn.flash" not in out.stdout:
            continue
        main_fn = harness(mutant)
        if main_fn is None:
            continue
        raised += 1
        program = text + "\n" + main_fn
        a, b = execute(args, program, False), execute(args, program, True)
        if a is None or b is None:
            if a is not None:  # the raised program failed alone
                mismatches += 1
                print(f"mutant {i}: only the raised program failed:\n{text}")
            continue
        compared += 1
        if not agree(a, b):
            mismatches += 1
            print(f"mutant {i}: raised and original differ:\n{text}")
    print(f"{args.n} mutants: {crashes} crashes, {raised} raised, "
          f"{compared} run both ways, {mismatches} mismatches")


if __name__ == "__main__":
    main()
