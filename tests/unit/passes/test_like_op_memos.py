"""Answers computed once for many ops: propagation's option and annotation memos over ops
alike (`shardc.interfaces.sharding`), and the folding helpers' per-class tables
(`shardc.passes.folding`: trivially-dead, may-fold, maybe-constant). Each must answer as
the direct computation does, on every op of the lit suite's programs and of generated
ones, follow new registrations, and actually spare the work on a chain of alike ops."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, UnregisteredOp
from xdsl.ir import Attribute, Operation, OpResult
from xdsl.parser import Parser
from xdsl.traits import ConstantLike, HasFolder, IsTerminator, RecursiveMemoryEffect, SymbolOpInterface

import shardc.interfaces.sharding as si
import shardc.passes.folding as folding
from shardc.context import make_context
from shardc.dialects.shard import ShardingOp, ShardOp
from shardc.ir.printer import module_to_string
from shardc.passes import fold_registry
from shardc.passes.sharding_propagation import ShardingPropagationPass
from shardc.testing.gen_open_programs import FEATURES, generate_open_program
from shardc.testing.gen_programs import generate_chain

LIT = Path(__file__).resolve().parents[2] / "filecheck"


def _lit_modules() -> Iterator[ModuleOp]:
    """Every chunk of the lit suite that parses (the invalid ones are skipped)."""
    ctx = make_context()
    for path in sorted(LIT.rglob("*.mlir")):
        for chunk in path.read_text().split("// -----"):
            try:
                yield Parser(ctx, chunk).parse_module()
            except Exception:  # noqa: BLE001 - a chunk written to fail
                continue


@pytest.fixture(scope="module")
def lit_ops() -> list[Operation]:
    ops = [op for module in _lit_modules() for op in module.walk()]
    assert len({type(op) for op in ops}) > 60  # many dialects, many classes
    return ops


# -----------------------------------------------------------------------------------------
# Propagation: options and annotations over ops alike
# -----------------------------------------------------------------------------------------


def _same(a: si.ShardingOption | None, b: si.ShardingOption | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.sharding_array, a.grid, a.empty) == (b.sharding_array, b.grid, b.empty)


def _patterns(module: ModuleOp, op: Operation) -> list[tuple[list, list]]:
    """Sharding patterns to ask `op` about: each sharding of the module at each operand
    and result position alone, and all operands at once."""
    seen: dict[tuple, si.ShardingInfo] = {}
    for s in module.walk():
        if isinstance(s, ShardingOp):
            info = si.ShardingInfo.of(s.result)
            seen.setdefault((info.grid, info.split_axes), info)
    infos = list(seen.values())
    n, m = len(op.operands), len(op.results)
    out: list[tuple[list, list]] = [([None] * n, [None] * m)]
    for info in infos:
        out += [([info if j == i else None for j in range(n)], [None] * m) for i in range(n)]
        out += [([None] * n, [info if k == i else None for k in range(m)]) for i in range(m)]
        out.append(([info] * n, [None] * m))
    return out


def _check_module(module: ModuleOp) -> int:
    checked = 0
    with si.pass_cache():
        for op in list(module.walk()):
            impl = si.get_sharding_interface(op)
            if impl is None or isinstance(op, ShardOp | ShardingOp):
                continue
            for operands, results in _patterns(module, op):
                with si.collect_diagnostics():
                    direct = si._default_sharding_option(impl, op, operands, results)
                    memo = si.default_get_sharding_option(impl, op, operands, results)
                assert _same(memo, direct), op
                if memo is not None:  # a hit hands out a fresh option
                    memo.sharding_array.append([99])
                    memo.grid = "elsewhere"
                with si.collect_diagnostics():
                    again = si.default_get_sharding_option(impl, op, operands, results)
                assert _same(again, direct), op
                if direct is None or direct.empty or direct.grid is None:
                    continue
                expected = si._sharding_annotations(impl, op, direct)
                assert si.default_get_sharding_annotations(impl, op, direct) == expected, op
                checked += 1
    return checked


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(0, 60, 4))
def test_option_and_annotation_memos_answer_as_direct_on_open_programs(seed):
    text = generate_open_program(seed, FEATURES, num_ops=10)
    _check_module(Parser(make_context(), text).parse_module())


def test_option_and_annotation_memos_answer_as_direct_on_a_chain():
    module = Parser(make_context(), generate_chain(40)).parse_module()
    assert _check_module(module) > 40


@pytest.mark.slow
def test_option_memo_computes_each_pattern_once_on_a_chain(monkeypatch):
    """300 alike ops: the traversal asks for options and annotations a handful of times,
    not once per op and pattern."""
    calls = {"option": 0, "annotations": 0}
    option, annotations = si._default_sharding_option, si._sharding_annotations

    def counted_option(*args):
        calls["option"] += 1
        return option(*args)

    def counted_annotations(*args):
        calls["annotations"] += 1
        return annotations(*args)

    monkeypatch.setattr(si, "_default_sharding_option", counted_option)
    monkeypatch.setattr(si, "_sharding_annotations", counted_annotations)
    ctx = make_context()
    module = Parser(ctx, generate_chain(300)).parse_module()
    ShardingPropagationPass().apply(ctx, module)
    assert sum(isinstance(op, ShardOp) for op in module.walk()) > 300
    assert 0 < calls["option"] < 30
    assert 0 < calls["annotations"] < 30


def test_a_refused_option_is_asked_again_for_every_op(monkeypatch):
    """None (a conflict or a diagnostic) is never remembered: each op reports its own."""
    calls = []
    monkeypatch.setattr(si, "_default_sharding_option", lambda impl, op, a, b: calls.append(op))
    module = Parser(make_context(), generate_chain(3)).parse_module()
    ops = [op for op in module.walk() if op.name == "linalg.generic"] or [
        op for op in module.walk() if si.get_sharding_interface(op) is not None and not isinstance(op, ShardOp | ShardingOp)
    ]
    with si.pass_cache():
        for op in ops * 2:
            impl = si.get_sharding_interface(op)
            assert si.default_get_sharding_option(impl, op, [None] * len(op.operands), [None] * len(op.results)) is None
    assert calls == ops * 2


def _old_add_annotations(impl, op, option) -> bool:
    """The annotation order before the memo: results, then operands one by one."""
    maps = si.indexing_maps(impl, op)
    n = len(op.operands)
    for i, result in enumerate(op.results):
        si.insert_result_annotation(si.result_sharding_for_option(result, option, maps[n + i]), result)
    for i in range(n):
        try:
            sharding = si.operand_sharding_for_option(op.operands[i], option, maps[i])
        except si._Impossible:
            return False
        si.insert_operand_annotation(sharding, op, i)
    return True


@pytest.mark.slow
@pytest.mark.parametrize("refuse", [False, True])
@pytest.mark.parametrize("seed", range(1, 40, 6))
def test_adding_annotations_from_the_memo_builds_the_same_ir(seed, refuse, monkeypatch):
    """`default_add_sharding_annotations` with the memo's shardings inserts what the
    computation op by op did; where the memo has none (`refuse`: an impossible
    operand), it falls back to that computation."""
    text = generate_open_program(seed, FEATURES, num_ops=10)
    if refuse:
        monkeypatch.setattr(si, "default_get_sharding_annotations", lambda impl, op, option: None)
    texts = []
    for add in (si.default_add_sharding_annotations, _old_add_annotations):
        module = Parser(make_context(), text).parse_module()
        done = []
        with si.pass_cache():
            for op in list(module.walk()):
                impl = si.get_sharding_interface(op)
                if impl is None or isinstance(op, ShardOp | ShardingOp) or not op.results:
                    continue
                for operands, results in _patterns(module, op)[1:2]:
                    with si.collect_diagnostics():
                        option = si._default_sharding_option(impl, op, operands, results)
                    if option is None or option.empty or option.grid is None:
                        continue
                    done.append(add(impl, op, option))
        texts.append((module_to_string(module), done))
    assert texts[0] == texts[1]
    assert texts[0][1]  # something was annotated


# -----------------------------------------------------------------------------------------
# Folding helpers: per-class tables
# -----------------------------------------------------------------------------------------


def _reference_would_be_trivially_dead(root: Operation) -> bool:
    """MLIR's wouldOpBeTriviallyDead, asking every op's traits each time."""
    if isinstance(root, UnregisteredOp) or root.has_trait(IsTerminator) or root.has_trait(SymbolOpInterface):
        return False
    stack = [root]
    while stack:
        op = stack.pop()
        recursive = op.has_trait(RecursiveMemoryEffect)
        if recursive:
            stack.extend(o for r in op.regions for b in r.blocks for o in b.ops)
        droppable = folding._own_effects_are_droppable(op)
        if droppable is False or (droppable is None and not recursive):
            return False
    return True


def _reference_constant_value(value) -> Attribute | None:
    """MLIR's m_Constant, asking the registry and the traits each time."""
    if not isinstance(value, OpResult):
        return None
    op = value.op
    value_of = fold_registry.registered_constant(type(op))
    if value_of is not None:
        return value_of(op)
    if not op.has_trait(ConstantLike, value_if_unregistered=False):
        return None
    trait = op.get_trait(HasFolder)
    folded = None if trait is None else trait.fold(op)
    if folded is None:
        return None
    attr = folded[value.index]
    return attr if isinstance(attr, Attribute) else None


@pytest.mark.slow
def test_class_tables_answer_as_the_traits_on_every_lit_op(lit_ops):
    dead = set()
    for op in lit_ops:
        expected = _reference_would_be_trivially_dead(op)
        assert folding.would_be_trivially_dead(op) is expected, op.name
        dead.add(expected)
        if not folding.may_fold(op):
            assert folding.try_fold(op) is None, op.name
        for result in op.results:
            assert folding.constant_value(result) == _reference_constant_value(result), op.name
    assert dead == {True, False}
    folds = {folding.may_fold(op) for op in lit_ops}
    assert folds == {True, False}


def test_class_tables_follow_new_registrations(lit_ops):
    init = next(op for op in lit_ops if op.name == "mpi.init")

    class Quiet(type(init)):  # a throwaway subclass: the registry stays as it was
        pass

    op = Quiet.create(result_types=[r.type for r in init.results], properties=dict(init.properties))
    try:
        assert not folding.would_be_trivially_dead(op)
        assert not folding.may_fold(op)
        assert folding.constant_value(op.results[0]) is None
        fold_registry.register_effect_free(Quiet, when=lambda o: False)
        assert not folding.would_be_trivially_dead(op)
        fold_registry.register_effect_free(Quiet)
        assert folding.would_be_trivially_dead(op)
        fold_registry.register_folder(Quiet)(lambda o: None)
        assert folding.may_fold(op)
        marker = IntegerAttr(7, 32)
        fold_registry.register_constant(Quiet, lambda o: marker)
        assert folding.constant_value(op.results[0]) is marker
    finally:
        fold_registry._EFFECT_FREE.pop(Quiet, None)
        fold_registry._FOLDERS.pop(Quiet, None)
        fold_registry._CONSTANTS.pop(Quiet, None)
        fold_registry._LOOKUPS.clear()


def test_commutative_ops_may_fold_their_constants_to_the_right():
    text = """func.func @f(%a: f32, %i: i32) -> (f32, i32) {
      %c = arith.constant 1.5 : f32
      %k = arith.constant 3 : i32
      %0 = arith.mulf %c, %a : f32
      %1 = arith.maxsi %k, %i : i32
      return %0, %1 : f32, i32
    }"""
    module = Parser(make_context(), text).parse_module()
    ops = [op for op in module.walk() if op.name in ("arith.mulf", "arith.maxsi")]
    assert len(ops) == 2
    for op in ops:
        assert folding.may_fold(op)
        assert folding.try_fold(op) is not None  # the constant moved to the right
        assert folding.constant_value(op.operands[1]) is not None


def test_annotation_memo_tells_a_scalar_from_a_0d_tensor():
    """Two generics with the same maps, one reading a scalar and one a 0-d tensor: the
    first operand has no sharding, the second the grid's replicated one."""
    body = """^bb0(%bs: f32, %bx: f32, %bo: f32):
        %m = arith.mulf %bs, %bx : f32
        linalg.yield %m : f32
      } -> tensor<4xf32>"""
    maps = "indexing_maps = [affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = [#linalg.iterator_type<parallel>]"
    text = f"""shard.grid @grid(shape = 2)
    func.func @f(%s: f32, %t: tensor<f32>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {{
      %e = tensor.empty() : tensor<4xf32>
      %0 = linalg.generic {{{maps}}} ins(%s, %x : f32, tensor<4xf32>) outs(%e : tensor<4xf32>) {{
      {body}
      %1 = linalg.generic {{{maps}}} ins(%t, %x : tensor<f32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {{
      {body}
      return %0, %1 : tensor<4xf32>, tensor<4xf32>
    }}"""
    module = Parser(make_context(), text).parse_module()
    first, second = [op for op in module.walk() if op.name == "linalg.generic"]
    option = si.ShardingOption([[0]], "grid")
    with si.pass_cache():
        impl = si.get_sharding_interface(first)
        a = si.default_get_sharding_annotations(impl, first, option)
        b = si.default_get_sharding_annotations(impl, second, option)
    assert a is not None and b is not None
    assert a[0] is None and b[0] is not None and b[0].split_axes == ()
    assert a[1:] == b[1:]
