"""Region DCE's deletion from the liveness analysis's list of dead ops (single-block
regions) erases exactly what the deletion walk erases, in the same order, and skips the
walk when nothing is dead."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, Region
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.ir.printer import module_to_string
from shardc.passes import greedy

LIT = Path(__file__).resolve().parents[2] / "filecheck"

# Dead ops at the top level, inside a live linalg body, and a dead linalg.generic whose
# body holds a dead op of its own (erased with it, never on its own).
NESTED = """
#id = affine_map<(d0) -> (d0)>
func.func @f(%a: tensor<4xf32>, %x: f32) -> tensor<4xf32> {
  %dead0 = arith.addf %x, %x : f32
  %live = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%a : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %unused = arith.mulf %in, %in : f32
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %gone = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%a : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %inner_dead = arith.subf %in, %in : f32
    %t = arith.mulf %in, %out : f32
    linalg.yield %t : f32
  } -> tensor<4xf32>
  %dead1 = arith.mulf %dead0, %x : f32
  return %live : tensor<4xf32>
}
"""

CLEAN = """
func.func @g(%x: f32) -> f32 {
  %y = arith.addf %x, %x : f32
  return %y : f32
}
"""


def _regions(module: ModuleOp) -> list[Region]:
    return [op.regions[0] for op in module.walk() if op.name == "func.func" and op.regions[0].blocks]


def _run(text: str, walk: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, bool, list[str]]:
    """Region DCE over `text`'s functions, with the listed deletion or (`walk`) the whole
    deletion walk: (the printed module, the result, the names of the ops erased, in order)."""
    module = Parser(make_context(), text).parse_module()
    erased: list[str] = []
    real = greedy._erase_dead_op  # pyright: ignore[reportPrivateUsage]

    def counted(op: Operation) -> None:
        erased.append(op.results[0].name_hint or op.name if op.results else op.name)
        real(op)

    with monkeypatch.context() as m:
        m.setattr(greedy, "_erase_dead_op", counted)
        if walk:
            m.setattr(greedy, "_delete_dead", greedy._delete_dead_walk)  # pyright: ignore[reportPrivateUsage]
        changed = greedy.run_region_dce(_regions(module))
    try:
        text = module_to_string(module)
    except Exception as e:  # noqa: BLE001 - DCE of a lone function can leave IR that
        text = f"unprintable: {e!r}"  # does not print (affine maps on erased values): alike
    return text, changed, erased


def test_listed_deletion_erases_what_the_walk_erases(monkeypatch: pytest.MonkeyPatch) -> None:
    listed = _run(NESTED, False, monkeypatch)
    walked = _run(NESTED, True, monkeypatch)
    assert listed == walked
    text, changed, erased = listed
    assert changed
    # reverse order, a live op's body at its place; %inner_dead goes with %gone
    assert erased == ["dead1", "gone", "unused", "dead0"]
    assert text.count("linalg.generic") == 1 and "arith.mulf" not in text and "arith.subf" not in text


def _lit_chunks() -> Iterator[str]:
    ctx = make_context()
    for path in sorted(LIT.rglob("*.mlir")):
        for chunk in path.read_text().split("// -----"):
            if "dense_resource" in chunk:
                continue  # resource keys are uniqued per process: each parse prints anew
            try:
                Parser(ctx, chunk).parse_module()
            except Exception:  # noqa: BLE001 - a chunk written to fail
                continue
            yield chunk


@pytest.mark.slow
def test_listed_deletion_matches_the_walk_on_every_lit_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    erasing = 0
    for chunk in _lit_chunks():
        listed = _run(chunk, False, monkeypatch)
        assert listed == _run(chunk, True, monkeypatch), chunk
        erasing += bool(listed[2])
    assert erasing >= 10  # many chunks have dead ops: the comparison is not empty


def test_nothing_dead_skips_the_deletion_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[object] = []
    real = greedy._delete_dead_walk  # pyright: ignore[reportPrivateUsage]

    def counted(regions: list[Region], liveness: object) -> bool:
        walks.append(regions)
        return real(regions, liveness)  # type: ignore[arg-type]

    monkeypatch.setattr(greedy, "_delete_dead_walk", counted)
    module = Parser(make_context(), CLEAN).parse_module()
    assert not greedy.run_region_dce(_regions(module))
    module = Parser(make_context(), NESTED).parse_module()
    assert greedy.run_region_dce(_regions(module))
    assert walks == []


def test_several_blocks_take_the_deletion_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Block arguments and successor operands die only there: the walk handles them."""
    text = """
    func.func @h(%c: i1, %x: i32) -> i32 {
      cf.cond_br %c, ^a(%x : i32), ^b
    ^a(%unused: i32):
      return %x : i32
    ^b:
      return %x : i32
    }
    """
    calls: list[object] = []
    real = greedy._delete_dead_walk  # pyright: ignore[reportPrivateUsage]

    def counted(regions: list[Region], liveness: object) -> bool:
        calls.append(regions)
        return real(regions, liveness)  # type: ignore[arg-type]

    monkeypatch.setattr(greedy, "_delete_dead_walk", counted)
    module = Parser(make_context(), text).parse_module()
    assert greedy.run_region_dce(_regions(module))
    assert calls and "%unused" not in module_to_string(module)


def test_one_block_regions_skip_the_unreachable_block_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where every region has one block none can be unreachable: only the liveness walk
    runs. With several blocks, unreachable ones are still erased first."""
    calls: list[object] = []
    real = greedy.erase_unreachable_blocks

    def counted(regions: list[Region]) -> bool:
        calls.append(regions)
        return real(regions)

    monkeypatch.setattr(greedy, "erase_unreachable_blocks", counted)
    module = Parser(make_context(), NESTED).parse_module()
    assert greedy.simplify_regions(_regions(module))
    assert calls == []
    text = """
    func.func @u(%x: i32) -> i32 {
      return %x : i32
    ^orphan:
      %y = arith.addi %x, %x : i32
      return %y : i32
    }
    """
    module = Parser(make_context(), text).parse_module()
    assert greedy.simplify_regions(_regions(module))
    assert len(calls) == 1 and "arith.addi" not in module_to_string(module)
