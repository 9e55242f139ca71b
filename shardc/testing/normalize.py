"""Text normalisation for comparing shardc-opt and mlir-opt outputs.

SSA value names and block labels are renamed in order of first appearance, so two
printers that choose different names (`%sharding` vs `%0`, `%arg0` vs `%a`) compare equal
when the structure is the same. Group suffixes (`%0#1`, `%0:2`) are kept.
"""

import re

_SSA = re.compile(r"%[A-Za-z0-9_$.\-]+")
_BLOCK = re.compile(r"\^[A-Za-z0-9_$.\-]+")


def normalize_ssa_names(text: str) -> str:
    values: dict[str, str] = {}
    blocks: dict[str, str] = {}

    def value(m: re.Match[str]) -> str:
        return values.setdefault(m.group(0), f"%v{len(values)}")

    def block(m: re.Match[str]) -> str:
        return blocks.setdefault(m.group(0), f"^b{len(blocks)}")

    text = _SSA.sub(value, text)
    text = _BLOCK.sub(block, text)
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return "\n".join(line for line in lines if line)
