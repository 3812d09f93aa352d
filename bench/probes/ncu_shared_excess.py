"""The SASS lines with the most excessive shared-memory wavefronts (bank
conflicts) in an Nsight Compute source CSV (`ncu -i rep --page source
--csv --print-source sass`), one kernel or several:

    python3 bench/probes/ncu_shared_excess.py [N] < source.csv
"""
import csv
import sys


def main():
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    rows = list(csv.reader(sys.stdin))
    head, kernels, cur = None, {}, None
    for r in rows:
        if r and r[0] == "Kernel Name":
            head, cur = None, r[1] if len(r) > 1 else "?"
            continue
        if r and r[0] == "Address":
            head = {name: i for i, name in enumerate(r)}
            continue
        if head is None or len(r) < len(head):
            continue
        def num(col):
            try:
                return float(r[head[col]].replace(",", ""))
            except (KeyError, ValueError):
                return 0.0
        kernels.setdefault(cur, []).append(
            (num("L1 Wavefronts Shared Excessive"), num("L1 Wavefronts Shared"),
             num("L1 Wavefronts Shared Ideal"), r[head["Address"]],
             r[head["Source"]]))
    for name, lines in kernels.items():
        total = sum(x[1] for x in lines)
        excess = sum(x[0] for x in lines)
        print(f"== {name}: shared wavefronts {total:.0f}, excessive {excess:.0f}"
              f" ({100 * excess / max(total, 1):.0f}%)")
        for ex, wf, ideal, addr, src in sorted(lines, reverse=True)[:top]:
            if ex <= 0:
                break
            print(f"  {ex:12.0f} of {wf:12.0f} (ideal {ideal:10.0f})  {addr}  {src.strip()[:90]}")


if __name__ == "__main__":
    main()
