"""What a cold compile does faster (issue #16), each the same result as before: the
built module consumed (fused in place, no copy; its text printed first and parsed on
demand), the cyclic GC paused while compiling, `del` placement from the statements'
identifiers, fusion's order test from block positions, and the step builder's ops made
without IRDL's generic constructor."""

from __future__ import annotations

import ast
import gc
import io

import numpy as np
import pytest
from xdsl.dialects import arith, math, tensor
from xdsl.dialects.builtin import FloatAttr, TensorType, f32
from xdsl.dialects.linalg import ops as linalg
from xdsl.ir import Block
from xdsl.printer import Printer

from shardc.ir.printer import module_to_string
from shardc.runtime.codegen import compile as rt_compile
from shardc.runtime.codegen.cache import compile_cached, make_key, parse_lowered
from shardc.runtime.codegen.compile import compile_module

pytestmark = pytest.mark.usefixtures("_own_cache")  # conftest: an empty cache directory per test

CHAIN = """
func.func @f(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %e = tensor.empty() : tensor<64x64xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    linalg.yield %p : f32
  } -> tensor<64x64xf32>
  %e2 = tensor.empty() : tensor<64x64xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%m, %a : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e2 : tensor<64x64xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %q = arith.addf %x, %y : f32
    linalg.yield %q : f32
  } -> tensor<64x64xf32>
  %e3 = tensor.empty() : tensor<64x64xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<64x64xf32>) outs(%e3 : tensor<64x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.negf %x : f32
    linalg.yield %r : f32
  } -> tensor<64x64xf32>
  return %s, %t : tensor<64x64xf32>, tensor<64x64xf32>
}
"""


def _args():
    rng = np.random.default_rng(0)
    return rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)


# --- the consumed module ------------------------------------------------------------------


def test_a_consumed_module_compiles_as_a_copied_one():
    text = module_to_string(parse_lowered(CHAIN))
    copied = compile_module(parse_lowered(CHAIN), "m")
    built = []

    def build():
        built.append(parse_lowered(CHAIN))
        return built[0], {}

    got = compile_cached(make_key("test-consume", text=CHAIN), build, "m", consume=True)
    assert got.compiled.source == copied.source
    assert module_to_string(built[0]) != text  # fused in place: nothing was copied
    assert callable(got.module)  # the lowered module, parsed when asked for
    assert module_to_string(got.module()) == text
    a, b = _args()
    for x, y in zip(got.compiled.call("f", a, b), copied.call("f", a, b)):
        np.testing.assert_array_equal(x, y)
    hit = compile_cached(make_key("test-consume", text=CHAIN), build, "m", consume=True)
    assert hit.source == "cache" and len(built) == 1
    assert module_to_string(hit.module()) == text  # the entry holds the text before fusion


def test_compile_module_leaves_its_input_unless_told():
    m = parse_lowered(CHAIN)
    before = module_to_string(m)
    compile_module(m, "m")
    assert module_to_string(m) == before
    compile_module(m, "m", copy=False)
    assert module_to_string(m) != before


def test_the_cyclic_gc_is_paused_while_compiling():
    seen = []

    def build():
        seen.append(gc.isenabled())
        return parse_lowered(CHAIN), {}

    assert gc.isenabled()
    compile_cached(make_key("test-gc", text=CHAIN), build, "m", consume=True)
    assert seen == [False] and gc.isenabled()

    def failing():
        raise RuntimeError("no module")

    with pytest.raises(RuntimeError):
        compile_cached(make_key("test-gc-fail", text=CHAIN), failing, "m")
    assert gc.isenabled()  # restored on the way out of an error too


# --- `del` placement ----------------------------------------------------------------------


def _reference_free_dead_values(source: str) -> str:
    """The placement computed from the tree's Name nodes (the former implementation)."""
    tree = ast.parse(source)
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    assigned: set[str] = set()
    last: dict[str, int] = {}
    closures: dict[str, set[str]] = {}
    for k, stmt in enumerate(fn.body):
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                assigned.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        if isinstance(stmt, ast.FunctionDef):
            closures[stmt.name] = names
            continue
        for name in list(names):
            names |= closures.get(name, set())
        for name in names:
            last[name] = k
    lines = source.split("\n")
    inserts: dict[int, tuple[str, list[str]]] = {}
    for name, k in last.items():
        stmt = fn.body[k]
        if name in assigned and not isinstance(stmt, ast.Return) and name.split("_")[0] not in ("body",):
            inserts.setdefault(stmt.end_lineno or stmt.lineno, ("    ", []))[1].append(name)
    for stmt in fn.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name.startswith("body_"):
            local_last: dict[str, ast.stmt] = {}
            local_assigned: set[str] = set()
            for inner in stmt.body:
                if isinstance(inner, ast.Assign):
                    for t in inner.targets:
                        local_assigned.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
                for n in ast.walk(inner):
                    if isinstance(n, ast.Name):
                        local_last[n.id] = inner
            indent = " " * (stmt.body[0].col_offset if stmt.body else 8)
            for name, inner in local_last.items():
                if name in local_assigned and not isinstance(inner, ast.Return):
                    inserts.setdefault(inner.end_lineno or inner.lineno, (indent, []))[1].append(name)
    out: list[str] = []
    for i, line in enumerate(lines, start=1):
        out.append(line)
        if i in inserts:
            indent, names = inserts[i]
            out.append(f"{indent}del {', '.join(sorted(names))}")
    return "\n".join(out)


def _without_dels(chunk: str) -> str:
    return "\n".join(line for line in chunk.split("\n") if not line.lstrip().startswith("del "))


@pytest.mark.slow
def test_dels_are_placed_as_from_the_tree_on_generated_code():
    from shardc.runtime.codegen.cache import split_functions
    from shardc.training.gpt import GPTConfig
    from shardc.training.trainer import TrainingConfig, compile_program

    cfg = TrainingConfig(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=16), per_device_batch=2, steps=1)
    prog = compile_program(cfg, cfg.grid(2))
    pieces = {k: v for k, v in split_functions(prog.compiled.source).items() if k is not None}  # type: ignore[attr-defined]
    assert set(pieces) >= {"train_step", "adamw_step", "loss"} or len(pieces) == 3
    for pyname, (_, text) in pieces.items():
        body = "\n".join(line for line in _without_dels(text).split("\n") if not line.startswith(f"{pyname}."))
        assert rt_compile.free_dead_values(body) == _reference_free_dead_values(body)  # pyright: ignore[reportPrivateUsage]


def test_a_name_in_a_literal_only_delays_its_del():
    source = "def f(a):\n    '@f'\n    x_1 = a + 1\n    y_2 = x_1 * 2\n    z_3 = g('x_1', y_2)\n    return z_3\n"
    out = rt_compile.free_dead_values(source)  # pyright: ignore[reportPrivateUsage]
    lines = out.split("\n")
    at = lines.index("    z_3 = g('x_1', y_2)")
    assert lines[at - 1] == "    y_2 = x_1 * 2"  # x_1's del is not before its last mention
    assert lines[at + 1] == "    del x_1, y_2"  # later than its last use, never earlier
    plain = rt_compile.free_dead_values(source.replace("'x_1'", "'w'"))  # pyright: ignore[reportPrivateUsage]
    assert "    y_2 = x_1 * 2\n    del x_1\n" in plain


# --- fusion's order test ------------------------------------------------------------------


def test_fusion_order_from_positions_agrees_with_walking_the_block():
    from shardc.runtime.codegen.fusion import after

    m = parse_lowered(CHAIN)
    block = next(op for op in m.walk() if op.name == "func.func").regions[0].blocks.first
    assert block is not None
    ops = list(block.ops)
    order = {op: k for k, op in enumerate(ops)}
    generics = [op for op in ops if isinstance(op, linalg.GenericOp)]
    for consumer in generics:
        for user in ops:
            assert after(user, consumer, order) == after(user, consumer)
        inner = consumer.body.block.last_op  # an op inside a generic climbs to it
        assert inner is not None
        for other in generics:
            assert after(inner, other, order) == after(inner, other)


# --- the step builder's ops ---------------------------------------------------------------


def _generic_text(*ops) -> str:
    out = io.StringIO()
    p = Printer(out, print_generic_format=True)
    for op in ops:
        p.print_op(op)
        out.write(f" {list(op.properties)} {list(op.attributes)}\n")
    return out.getvalue()


def test_builder_ops_are_those_of_the_xdsl_constructors():
    from shardc.training.ir_builder import Body, FuncBuilder, _same_type  # pyright: ignore[reportPrivateUsage]

    block = Block(arg_types=[f32, f32])
    x, y = block.args
    for cls in (arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.MaximumfOp):
        assert _generic_text(_same_type(cls, x, y)) == _generic_text(cls(x, y))
    for cls in (arith.NegfOp, math.ExpOp, math.LogOp, math.TanhOp, math.SqrtOp, math.RsqrtOp):
        assert _generic_text(_same_type(cls, x)) == _generic_text(cls(x))
    body = Body(Block(), f32)
    assert _generic_text(body.const(0.5).owner) == _generic_text(arith.ConstantOp(FloatAttr(0.5, f32)))
    fb = FuncBuilder("f", [("a", TensorType(f32, [4, 3]))], f32)
    e = fb.empty([4, 3])
    assert _generic_text(e.owner) == _generic_text(tensor.EmptyOp([], TensorType(f32, [4, 3])))
    z = fb.zeros([4, 3])
    fill = z.owner
    assert isinstance(fill, linalg.FillOp)
    init = fill.outputs[0]
    assert _generic_text(fill) == _generic_text(linalg.FillOp([fill.inputs[0]], [init], [init.type]))
    assert fb.tensor_type([4, 3]) is fb.tensor_type((4, 3))  # one object per type


def test_builder_generic_matches_the_xdsl_constructor():
    from xdsl.dialects.builtin import AffineMapAttr
    from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
    from xdsl.ir import Region
    from xdsl.ir.affine import AffineMap

    from shardc.training.ir_builder import FuncBuilder

    fb = FuncBuilder("f", [("a", TensorType(f32, [4, 3])), ("b", TensorType(f32, [3]))], f32)
    a, b = fb.args
    (out,) = fb.generic("ij,j->i", [a, b], [f32], lambda body, args: [body.add(args[2], body.mul(args[0], args[1]))], init_zero=True)
    op = out.owner
    assert isinstance(op, linalg.GenericOp)
    ref = linalg.GenericOp(
        list(op.inputs),
        list(op.outputs),
        Region(Block(arg_types=[f32, f32, f32])),
        [AffineMapAttr(AffineMap.from_callable(lambda i, j: (i, j))), AffineMapAttr(AffineMap.from_callable(lambda i, j: (j,))), AffineMapAttr(AffineMap.from_callable(lambda i, j: (i,)))],
        [IteratorTypeAttr(IteratorType.PARALLEL), IteratorTypeAttr(IteratorType.REDUCTION)],
        [r.type for r in op.results],
    )
    assert list(op.properties) == list(ref.properties)
    assert all(op.properties[k] == ref.properties[k] for k in ref.properties)
    assert list(op.attributes) == list(ref.attributes)
