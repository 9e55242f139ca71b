"""Region DCE's liveness: the re-check that replaces a second whole walk reaches the same
fixed point as walking until nothing changes (MLIR's propagateLiveness loop)."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.ir import Region

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.passes import greedy
from shardc.passes.greedy import _Liveness  # pyright: ignore[reportPrivateUsage]

ROOT = Path(__file__).resolve().parents[3]

# The back edge forwards %i1 to %i: the first walk sees bb2 before %i is live, so only
# the re-check finds %i1 live; %dead / %d2 stay dead through the loop.
LOOP = """
func.func @loop(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  cf.br ^bb1(%c0, %c0 : i32, i32)
^bb1(%i: i32, %dead: i32):
  %cmp = arith.cmpi slt, %i, %n : i32
  %d2 = arith.addi %dead, %i : i32
  cf.cond_br %cmp, ^bb2, ^bb3
^bb2:
  %i1 = arith.addi %i, %i : i32
  cf.br ^bb1(%i1, %d2 : i32, i32)
^bb3:
  %unused = arith.muli %i, %i : i32
  return %i : i32
}
"""


def _walk_until_stable(regions: list[Region]) -> set[object]:
    liveness = _Liveness()
    liveness.changed = True
    while liveness.changed:
        liveness.changed = False
        for region in regions:
            liveness.region(region)
    return liveness.live


def _with_recheck(regions: list[Region]) -> tuple[set[object], int]:
    walks = 0
    original = _Liveness.region

    def counting(self: _Liveness, region: Region) -> None:
        nonlocal walks
        walks += region in regions
        original(self, region)

    captured: dict[str, _Liveness] = {}
    real_delete = greedy._delete_dead  # pyright: ignore[reportPrivateUsage]

    def keep(regions_: list[Region], liveness: _Liveness) -> bool:
        captured["l"] = liveness
        return False

    greedy._delete_dead = keep  # pyright: ignore[reportPrivateUsage]
    _Liveness.region = counting  # type: ignore[method-assign]
    try:
        greedy.run_region_dce(regions)
    finally:
        greedy._delete_dead = real_delete  # pyright: ignore[reportPrivateUsage]
        _Liveness.region = original  # type: ignore[method-assign]
    return captured["l"].live, walks


def _function_regions(text: str, name: str) -> list[Region]:
    module = LocatingParser(make_context(), text, name).parse_module()
    return [op.regions[0] for op in module.walk() if op.name == "func.func" and op.regions[0].blocks]


def test_back_edge_needs_the_recheck_and_matches() -> None:
    regions = _function_regions(LOOP, "loop.mlir")
    want = _walk_until_stable(regions)
    got, walks = _with_recheck(regions)
    assert got == want
    assert walks >= 2, "the back edge makes the re-check ask for another walk"
    # (the live set holds ids: values are named through the region's own values)
    values = [
        v
        for region in regions
        for op in region.walk()
        for v in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args))
    ] + [a for region in regions for b in region.blocks for a in b.args]
    names = {v.name_hint for v in values if id(v) in got}
    assert "i1" in names and "dead" not in names and "d2" not in names


@pytest.mark.parametrize(
    "path",
    ["tests/data/torch_mlir/gpt.mlir", "tests/data/torch_mlir/mlp.mlir", "examples/mlp.mlir"],
)
def test_straight_line_programs_need_one_walk_and_match(path: str) -> None:
    regions = _function_regions((ROOT / path).read_text(), path)
    want = _walk_until_stable(regions)
    got, walks = _with_recheck(regions)
    assert got == want
    assert walks == len(regions), "one walk per region: the re-check finds nothing new"
