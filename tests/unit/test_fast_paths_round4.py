"""Compile-time fast paths (issue #16, round 4), each checked against the path it
replaces: named linalg ops read by one regular expression, direct accessors of the
shard and mpi ops, `Sharding.of` remembered by property identity, plain tensor and
memref type text remembered by identity, the dominance check keyed by id."""

from __future__ import annotations

import glob
from io import StringIO
from pathlib import Path

import pytest
from xdsl.irdl.operations import BeforeVariadicSingleAccessor, get_accessors_from_op_def
from xdsl.utils.exceptions import ParseError

from shardc.context import make_context
from shardc.dialects import mpi, shard
from shardc.ir import fast_parser
from shardc.ir import printer as printer_module
from shardc.ir.fast_parser import FastParser
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import print_module
from shardc.ir.verifier import verify

ROOT = Path(__file__).resolve().parents[2]

NAMED = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %z: f32, %m: memref<4x16xf32>,
             %p: tensor<2x4x8xf32>, %q: tensor<2x8x16xf32>, %i: tensor<4x8xi32>,
             %ma: memref<4x8xf32>, %mb: memref<8x16xf32>) -> tensor<4x16xf32> {
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %g = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>)
                     outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %h = linalg.matmul ins(%a,%b:tensor<4x8xf32>,tensor<8x16xf32>) outs(%g:tensor<4x16xf32>)->tensor<4x16xf32>
  linalg.fill ins(%z : f32) outs(%m : memref<4x16xf32>)
  linalg.matmul ins(%ma, %mb : memref<4x8xf32>, memref<8x16xf32>) outs(%m : memref<4x16xf32>)
  %e3 = tensor.empty() : tensor<2x4x16xf32>
  %bm = linalg.batch_matmul ins(%p, %q : tensor<2x4x8xf32>, tensor<2x8x16xf32>)
                            outs(%e3 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %x = linalg.matmul ins(%i, %b : tensor<4x8xi32>, tensor<8x16xf32>) outs(%h : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.matmul {attr = 1 : i64} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%x : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
"""


def _parse(text: str, *, fast: bool, monkeypatch: pytest.MonkeyPatch):
    """The module and how many named ops the fast path read."""
    read = [0]
    original = FastParser.parse_named_operands_fast

    def counting(self: FastParser):
        found = original(self) if fast else None
        read[0] += found is not None
        return found

    with monkeypatch.context() as m:
        m.setattr(FastParser, "parse_named_operands_fast", counting)
        m.setattr(fast_parser, "TOKEN_BY_TOKEN_FIRST", 0)  # the regexes from the first op
        module = LocatingParser(make_context(), text, "t.mlir").parse_module()
    return module, read[0]


def _text(module, generic: bool = False) -> str:
    out = StringIO()
    print_module(module, out, generic=generic)
    return out.getvalue()


def _fields(module) -> list[tuple]:
    """Everything visible of every op, in walk order: class, operand positions (as the
    index of the defining op/argument), result types, properties and attributes in
    order, locations."""
    index: dict[int, int] = {}
    rows = []
    for n, op in enumerate(module.walk()):
        for r in op.results:
            index[id(r)] = n
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    index[id(arg)] = -1 - arg.index
        rows.append(
            (
                type(op),
                tuple(index.get(id(v)) for v in op.operands),
                tuple(op.result_types),
                tuple(op.properties.items()),
                tuple(op.attributes.items()),
                op.location,
            )
        )
    return rows


def test_named_ops_read_at_once_are_the_ops_the_token_parser_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    slow, none_read = _parse(NAMED, fast=False, monkeypatch=monkeypatch)
    # the second parse meets every type text the first one cached
    fast, read = _parse(NAMED, fast=True, monkeypatch=monkeypatch)
    assert none_read == 0
    # fill/matmul/batch_matmul in the plain form; not the one with a leading dict
    assert read >= 6
    assert _fields(fast) == _fields(slow)
    assert _text(fast) == _text(slow)
    assert _text(fast, generic=True) == _text(slow, generic=True)
    assert verify(fast) and verify(slow)


def test_a_processs_first_named_ops_are_read_token_by_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The regular expressions compile at the process's op after the first
    `TOKEN_BY_TOKEN_FIRST` (16): examples/mlp.mlir's four named ops never pay for them."""
    monkeypatch.setattr(fast_parser, "_NAMED_REGEXES", None)
    monkeypatch.setattr(fast_parser, "_named_ops_met", 0)
    read: list[bool] = []
    original = FastParser.parse_named_operands_fast

    def counting(self: FastParser):
        found = original(self)
        read.append(found is not None)
        return found

    monkeypatch.setattr(FastParser, "parse_named_operands_fast", counting)
    ctx = make_context()
    LocatingParser(ctx, (ROOT / "examples" / "mlp.mlir").read_text(), "mlp.mlir").parse_module()
    assert read == [False] * 4 and fast_parser._NAMED_REGEXES is None
    matmul = "  %m{} = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>"
    text = (
        "func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) {\n"
        + "\n".join(matmul.format(i) for i in range(16))
        + "\n  return\n}\n"
    )
    module = LocatingParser(ctx, text, "t.mlir").parse_module()
    assert read[4:] == [False] * 12 + [True] * 4 and fast_parser._NAMED_REGEXES is not None
    assert _text(module) == _text(_parse(text, fast=False, monkeypatch=monkeypatch)[0])


@pytest.mark.parametrize(
    "body",
    [
        # a type that differs from the value's
        "%g = linalg.matmul ins(%a, %a : tensor<4x8xf32>, tensor<8x16xf32>) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>",
        # more values than types, and the other way round
        "%g = linalg.matmul ins(%a, %b, %a : tensor<4x8xf32>, tensor<8x16xf32>) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>",
        "%g = linalg.fill ins(%z : f32, f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>",
        # an index into a value that has one result
        "%g = linalg.fill ins(%z : f32) outs(%e#1 : tensor<4x16xf32>) -> tensor<4x16xf32>",
        # results that do not fit the op
        "%g = linalg.fill ins(%z : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x8xf32>",
    ],
)
def test_named_op_errors_are_the_token_parsers(body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (
        "func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %z: f32) {\n"
        "  %e = tensor.empty() : tensor<4x16xf32>\n"
        "  %k = linalg.fill ins(%z : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>\n"
        f"  {body}\n"
        "  return\n}\n"
    )
    outcomes = []
    for fast in (False, True):
        try:
            module, _ = _parse(text, fast=fast, monkeypatch=monkeypatch)
        except ParseError as e:
            outcomes.append(("parse", str(e)))
            continue
        out = StringIO()
        from shardc.ir import diagnostics
        from shardc.ir.diagnostics import DiagnosticEngine

        with diagnostics.engine_scope(DiagnosticEngine(stream=out)):
            ok = verify(module)
        outcomes.append(("verify", ok, out.getvalue()))
    assert outcomes[0] == outcomes[1]


def _shard_and_mpi_ops(valid_only: bool = False):
    """Every shard and mpi op of the dialect tests; the valid files must parse whole
    (their ops' declarative formats look the accessors up)."""
    ctx = make_context()
    files = sorted(glob.glob(str(ROOT / "tests/filecheck/dialects/shard/*.mlir")))
    files += sorted(glob.glob(str(ROOT / "tests/filecheck/dialects/mpi/*.mlir")))
    files += [str(ROOT / "examples/mlp.mlir")]
    ops = []
    for name in files:
        invalid = "invalid" in name
        if valid_only and invalid:
            continue
        for chunk in Path(name).read_text().split("// -----"):
            if invalid:
                try:
                    module = LocatingParser(ctx, chunk, name).parse_module()
                except Exception:  # noqa: BLE001 - the invalid cases of the suite
                    continue
            else:
                module = LocatingParser(ctx, chunk, name).parse_module()
            ops.extend(op for op in module.walk() if type(op) in _CLASSES)
    return ops


def test_valid_dialect_files_parse_and_print_with_the_direct_accessors() -> None:
    ops = _shard_and_mpi_ops(valid_only=True)
    assert {op.name for op in ops} >= {"mpi.comm_rank", "shard.broadcast", "shard.recv", "shard.shard"}
    for op in ops:
        assert str(op)  # the declarative printers read the operands through them


_CLASSES = {*shard.Shard.operations, *mpi.MPI.operations}


def _read(get) -> tuple:
    try:
        return ("value", id(get()))
    except Exception as e:  # noqa: BLE001 - compared, not hidden
        return ("error", type(e))


def test_direct_accessors_read_what_xdsls_accessors_read() -> None:
    ops = _shard_and_mpi_ops()
    checked = 0
    for op in ops:
        cls = type(op)
        reference = get_accessors_from_op_def(cls.get_irdl_definition(), None)
        for name, value in vars(cls).items():
            if type(value) is BeforeVariadicSingleAccessor or not isinstance(value, BeforeVariadicSingleAccessor):
                continue  # (xDSL's own, or another kind)
            # (an op of an invalid test case may lack operands: the same error then)
            assert _read(lambda: getattr(op, name)) == _read(lambda: reference[name].__get__(op, cls)), (
                cls.__name__,
                name,
            )
            checked += 1
    assert checked > 100
    assert {type(op) for op in ops} >= {shard.ShardOp, shard.ShardingOp, shard.AllReduceOp}


def test_direct_accessors_stay_read_only() -> None:
    op = next(op for op in _shard_and_mpi_ops() if isinstance(op, shard.ShardOp))
    with pytest.raises(NotImplementedError):
        op.src = op.src  # type: ignore[misc]
    assert shard.ShardOp.get_irdl_definition().operands[0][0] == "src"


def test_remembered_sharding_is_the_computed_one() -> None:
    ops = [op for op in _shard_and_mpi_ops() if isinstance(op, shard.ShardingOp)]
    assert ops
    shard._SHARDINGS.clear()  # pyright: ignore[reportPrivateUsage]
    def outcome(get) -> tuple:
        try:
            return ("value", get())
        except Exception as e:  # noqa: BLE001 - an invalid case: the same error
            return ("error", type(e))

    valid = 0
    for op in ops:
        first = outcome(lambda: shard.Sharding.of(op))
        assert first == outcome(lambda: shard.Sharding._of(op))  # pyright: ignore[reportPrivateUsage]
        assert outcome(lambda: shard.Sharding.of(op.result)) == first  # the second time: remembered
        valid += first[0] == "value"
    assert valid > 10
    # another split (a new property object): a new entry, not the remembered one
    op = next(op for op in ops if not op.operands and verify_op_ok(op))
    op.properties["split_axes"] = shard._split_axes_attr(((0,), (1,)))  # pyright: ignore[reportPrivateUsage]
    after = shard.Sharding.of(op)
    assert after.split_axes == ((0,), (1,)) and after == shard.Sharding._of(op)  # pyright: ignore[reportPrivateUsage]


def verify_op_ok(op) -> bool:
    try:
        shard.Sharding._of(op)  # pyright: ignore[reportPrivateUsage]
    except Exception:  # noqa: BLE001
        return False
    return True


TYPES = """
func.func @f(%a: memref<4x?xf32>, %b: memref<2xi8, strided<[2], offset: ?>>, %c: memref<3xf32, 1 : i64>,
             %d: memref<f64>, %e: memref<2xcomplex<f32>>, %t: tensor<4xf32>) -> memref<4x?xf32> {
  return %a : memref<4x?xf32>
}
"""


def test_remembered_memref_types_print_as_before() -> None:
    printer_module._TYPE_TEXT.clear()  # pyright: ignore[reportPrivateUsage]
    module = LocatingParser(make_context(), TYPES, "t.mlir").parse_module()
    first = _text(module)
    second = _text(module)  # from the table
    assert first == second
    for spelled in (
        "%arg0: memref<4x?xf32>", "%arg1: memref<2xi8, strided<[2], offset: ?>>",
        "%arg2: memref<3xf32, 1>", "%arg3: memref<f64>", "%arg4: memref<2xcomplex<f32>>",
        "%arg5: tensor<4xf32>", "-> memref<4x?xf32>",
    ):
        assert spelled in first, spelled
    remembered = {str(t) for t, _ in printer_module._TYPE_TEXT.values()}  # pyright: ignore[reportPrivateUsage]
    assert remembered and not any("strided" in t or "complex" in t or ", 1" in t for t in remembered)


def test_dominance_error_is_still_reported() -> None:
    text = """
func.func @f(%z: f32) -> tensor<4xf32> {
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  return %f : tensor<4xf32>
}
"""
    from shardc.ir import diagnostics
    from shardc.ir.diagnostics import DiagnosticEngine

    module = LocatingParser(make_context(), text, "t.mlir").parse_module()
    out = StringIO()
    with diagnostics.engine_scope(DiagnosticEngine(stream=out)):
        assert not verify(module)
    assert "t.mlir:3:" in out.getvalue() and "operand #1 does not dominate this use" in out.getvalue()


def test_driver_insertion_point_is_xdsls() -> None:
    from xdsl.rewriter import InsertPoint

    from shardc.passes.greedy import DriverRewriter, GreedyDriver, PatternList

    module = LocatingParser(make_context(), NAMED, "t.mlir").parse_module()
    region = module.body
    driver = GreedyDriver(None, region, PatternList(()))
    ops = list(module.walk())[2:]
    rewriter = DriverRewriter(driver, InsertPoint.before(ops[0]))
    for op in ops:
        rewriter.reset(op)
        assert rewriter.insertion_point == InsertPoint.before(op)
        assert type(rewriter.insertion_point) is InsertPoint
    detached = ops[-1].clone()
    with pytest.raises(ValueError, match="must have a parent block"):
        rewriter.reset(detached)
