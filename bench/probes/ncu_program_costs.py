"""What a program of a flash kernel costs outside its KV tiles, from two
ncu source-counter exports of one kernel binary (`ncu --section
SourceCounters ... --export`, then `ncu --import R --page source --csv
--print-source sass`, gzip or not) at two sequence lengths with the same
number of programs (16K tokens: S=512 and S=8192, 2048 programs of 4 and
64 tiles). Per SASS instruction, executions = programs * x + tiles * y;
solving the two runs gives x, the executions a program makes regardless of
its tiles. Prints the total per program and the contiguous code ranges
that carry it (first instruction of each). For reading, not a benchmark.

    python3 ncu_program_costs.py SHORT.csv[.gz] LONG.csv[.gz] [ratio] [programs]
    (ratio: tiles per program long/short, default 16; programs default 2048)
"""
import csv
import gzip
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return list(csv.DictReader(l for l in f if l.count(",") > 3))


def executed(row):
    return float((row["Instructions Executed"] or "0").replace(",", ""))


short, long_ = load(sys.argv[1]), load(sys.argv[2])
ratio = float(sys.argv[3]) if len(sys.argv) > 3 else 16.0
programs = float(sys.argv[4]) if len(sys.argv) > 4 else 2048.0
if len(short) != len(long_):
    sys.exit("the two exports are not of one binary")
per_program = [(ratio * executed(a) - executed(b)) / (ratio - 1) / programs
               for a, b in zip(short, long_)]
total_short = sum(map(executed, short))
total_long = sum(map(executed, long_))
print(f"warp instructions: short {total_short / 1e6:.1f} M, long "
      f"{total_long / 1e6:.1f} M (long / {ratio:g}: "
      f"{total_long / ratio / 1e6:.1f} M)")
print(f"outside the tiles: {sum(per_program):.0f} warp instructions a "
      f"program; a tile (long run): "
      f"{(total_long - sum(per_program) * programs) / programs / (ratio * 4):.0f}"
      f" (assuming 4 tiles a short program)")
ranges, start, acc = [], None, 0.0
for i, x in enumerate(per_program):
    if x >= 0.5:
        if start is None:
            start, acc = i, 0.0
        acc += x
    elif start is not None:
        ranges.append((acc, start, i - 1))
        start = None
if start is not None:
    ranges.append((acc, start, len(per_program) - 1))
for acc, s, t in sorted(ranges, reverse=True)[:15]:
    print(f"{acc:7.0f} a program  {t - s + 1:4d} instructions from "
          f"{short[s]['Address'][-6:]}: {short[s]['Source'].strip()[:60]}")
