"""Compares the memrefs two runs printed with printMemrefF32, in order.

Usage: compare_printed_memrefs.py REF OUT. Each value must satisfy
|out - ref| <= 1e-5 + 1e-4 * |ref| (f32 rounding of differently ordered
sums); NaN only matches NaN. Prints one line per memref; exits 1 on a
mismatch or a different number of memrefs or values.
"""

import math
import re
import sys

NUM = re.compile(r"-?(?:nan|inf|\d+(?:\.\d*)?(?:e[-+]?\d+)?)", re.I)


def memrefs(path):
    out = []
    for block in open(path).read().split("Unranked Memref")[1:]:
        data = block.split("data =", 1)[1]
        out.append([float(x) for x in NUM.findall(data)])
    return out


ref, got = memrefs(sys.argv[1]), memrefs(sys.argv[2])
if len(ref) != len(got) or not ref:
    sys.exit(f"memref counts differ: {len(ref)} vs {len(got)}")
ok = True
for n, (a, b) in enumerate(zip(ref, got)):
    bad = len(a) != len(b) or any(
        (math.isnan(x) != math.isnan(y))
        or (not math.isnan(x) and abs(y - x) > 1e-5 + 1e-4 * abs(x))
        for x, y in zip(a, b))
    ok &= not bad
    print(f"memref {n}: {len(a)} values {'differ' if bad else 'agree'}")
if not ok:
    sys.exit(1)
print(f"all {len(ref)} agree")
