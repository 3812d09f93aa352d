"""Reads `ncu --page source --csv --print-source sass` output (stdin) and
prints the instructions with the most warp-stall samples (or, with a
second argument, the most of the first column whose name contains it,
e.g. "Shared Excessive"), with their addresses, so that a profile says
where the warps of a kernel wait (for reading, not a benchmark).

    python3 ncu_source_top.py [COUNT [COLUMN]] < source.csv"""
import csv
import sys

rows = list(csv.DictReader(l for l in sys.stdin if l.count(",") > 3))
if not rows:
    sys.exit("no source rows")
want = sys.argv[2] if len(sys.argv) > 2 else "Warp Stall Sampling (All"
key = next(k for k in rows[0] if want in k)
print(f"column: {key}")
def value(r):
    return float((r[key] or "0").replace(",", ""))


total = sum(value(r) for r in rows) or 1.0
top = sorted(rows, key=lambda r: -value(r))[:int(sys.argv[1]) if len(sys.argv) > 1 else 40]
for r in top:
    n = float((r[key] or "0").replace(",", ""))
    print(f"{100 * n / total:5.1f}% {r.get('Address', '?'):>8} {r.get('Source', '')[:90]}")
print(f"total samples {total:.0f} over {len(rows)} instructions")
