"""Text normalisation for comparing shardc-opt and mlir-opt outputs.

SSA value names and block labels are renamed in order of first appearance, so two
printers that choose different names (`%sharding` vs `%0`, `%arg0` vs `%a`) compare equal
when the structure is the same. Group suffixes (`%0#1`, `%0:2`) are kept. String
literals (`"a %b ^c"`) are left untouched, and trailing spaces and blank lines dropped.
"""

import re

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|%[A-Za-z0-9_$.\-]+|\^[A-Za-z0-9_$.\-]+')


def normalize_ssa_names(text: str) -> str:
    values: dict[str, str] = {}
    blocks: dict[str, str] = {}

    def rename(m: re.Match[str]) -> str:
        token = m.group(0)
        if token[0] == "%":
            return values.setdefault(token, f"%v{len(values)}")
        if token[0] == "^":
            return blocks.setdefault(token, f"^b{len(blocks)}")
        return token

    text = _TOKEN.sub(rename, text)
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return "\n".join(line for line in lines if line)
