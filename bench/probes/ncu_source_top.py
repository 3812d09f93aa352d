"""Reads `ncu --page source --csv --print-source sass` output (stdin) and
prints the instructions with the most warp-stall samples, with their
offsets and the stall reasons' columns, so that a profile says where the
warps of a kernel wait (for reading, not a benchmark)."""
import csv
import sys

rows = list(csv.DictReader(l for l in sys.stdin if l.count(",") > 3))
if not rows:
    sys.exit("no source rows")
key = next(k for k in rows[0] if "Warp Stall Sampling (All" in k)
total = sum(float(r[key] or 0) for r in rows)
top = sorted(rows, key=lambda r: -float(r[key] or 0))[:int(sys.argv[1]) if len(sys.argv) > 1 else 40]
for r in top:
    n = float(r[key] or 0)
    print(f"{100 * n / total:5.1f}% {r.get('Address', '?'):>8} {r.get('Source', '')[:90]}")
print(f"total samples {total:.0f} over {len(rows)} instructions")
