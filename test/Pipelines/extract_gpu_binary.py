"""Prints the PTX or AMDGPU assembly (or the kernel manifest, with
--manifest) that attn-lower-to-nvvm-pipeline or attn-lower-to-rocdl-pipeline
(format=isa) embedded in its output (read from stdin)."""
import re
import sys


def extract(text, manifest=False):
    pattern = (r'attn\.manifest = "((?:[^"\\]|\\.)*)"' if manifest
               else r'#gpu\.object<.*?assembly = "((?:[^"\\]|\\.)*)"')
    m = re.search(pattern, text, re.S)
    if not m:
        sys.exit("no embedded " + ("manifest" if manifest else "assembly"))
    return re.sub(r'\\([0-9A-Fa-f]{2}|\\|")',
                  lambda x: x.group(1) if x.group(1) in ('\\', '"')
                  else chr(int(x.group(1), 16)), m.group(1))


if __name__ == "__main__":
    sys.stdout.write(extract(sys.stdin.read(), "--manifest" in sys.argv))
