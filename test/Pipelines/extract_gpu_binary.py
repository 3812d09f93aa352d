"""Prints the PTX (or the kernel manifest, with --manifest) that
attn-lower-to-nvvm-pipeline embedded in its output (read from stdin)."""
import re
import sys

text = sys.stdin.read()
pattern = (r'attn\.manifest = "((?:[^"\\]|\\.)*)"' if "--manifest" in sys.argv
           else r'#gpu\.object<.*?assembly = "((?:[^"\\]|\\.)*)"')
m = re.search(pattern, text, re.S)
if not m:
    sys.exit("no embedded " + ("manifest" if "--manifest" in sys.argv else "PTX"))
sys.stdout.write(re.sub(r'\\([0-9A-Fa-f]{2}|\\|")',
                        lambda x: x.group(1) if x.group(1) in ('\\', '"')
                        else chr(int(x.group(1), 16)), m.group(1)))
