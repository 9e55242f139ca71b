"""The mpi dialect from Python: builders, enums, result names and canonicalization."""


import pytest
from xdsl.builder import ImplicitBuilder
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, f32, i1, i32
from xdsl.parser import Parser
from xdsl.transforms.canonicalize import CanonicalizePass

from shardc.context import make_context
from shardc.dialects import mpi
from shardc.ir import diagnostics
from shardc.ir.diagnostics import DiagnosticEngine
from shardc.ir.printer import module_to_string


def _parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def _canonicalize(text: str) -> str:
    module = _parse(text)
    CanonicalizePass().apply(make_context(), module)
    module.verify()
    return module_to_string(module)


def test_enum_codes_match_mlir():
    assert len(mpi.ReductionOp) == 14
    assert mpi.ReductionOp.MPI_SUM == 3 and mpi.ReductionOp.MPI_REPLACE == 13
    assert len(mpi.ErrorClass) == 63
    assert mpi.ErrorClass.MPI_SUCCESS.code == 0
    assert mpi.ErrorClass.MPI_ERR_COMM.code == 8
    assert mpi.ErrorClass.MPI_ERR_LASTCODE.code == 62


@pytest.mark.parametrize("spelling", [mpi.ReductionOp.MPI_MAX, "MPI_MAX", 1])
def test_reduction_property_holds_the_i32_code(spelling: mpi.ReductionOp | str | int):
    assert mpi.reduction_op_attr(spelling) == IntegerAttr(1, i32)


def _build_all() -> ModuleOp:
    """One function using every builder, the way the shard-to-MPI lowering does."""
    buf_t = MemRefType(f32, [4])
    module = ModuleOp([])
    with ImplicitBuilder(module.body):
        fn = func.FuncOp("all", ((buf_t, MemRefType(f32, [1]), i32), ()))
    buf, out, tag = fn.args
    with ImplicitBuilder(fn.body):
        mpi.InitOp()
        world = mpi.CommWorldOp().comm
        rank = mpi.CommRankOp(world).rank
        size_op = mpi.CommSizeOp(world, retval=True)
        sub = mpi.CommSplitOp(world, rank, size_op.size).newcomm
        mpi.SendOp(buf, tag, rank, sub)
        mpi.RecvOp(buf, tag, rank, sub, retval=True)
        req = mpi.ISendOp(buf, tag, rank, world).req
        req2 = mpi.IRecvOp(buf, tag, rank, world, retval=True).req
        mpi.WaitOp(req)
        mpi.WaitOp(req2, retval=True)
        mpi.AllGatherOp(out, buf, world)
        mpi.AllReduceOp(buf, buf, "MPI_SUM", world)
        mpi.ReduceScatterBlockOp(buf, out, mpi.ReductionOp.MPI_MIN, world, retval=True)
        barrier = mpi.BarrierOp(world, retval=True)
        mpi.RetvalCheckOp(barrier.retval, mpi.ErrorClass.MPI_ERR_COMM)
        mpi.ErrorClassOp(barrier.retval)
        mpi.FinalizeOp(retval=True)
        func.ReturnOp()
    return module


def test_builders_make_valid_ops_that_print_like_mlir():
    module = _build_all()
    module.verify()
    text = module_to_string(module)
    for line in [
        "mpi.init\n",
        "%0 = mpi.comm_world : !mpi.comm",
        "%rank = mpi.comm_rank(%0) : i32",
        "%retval, %size = mpi.comm_size(%0) : !mpi.retval, i32",
        "%newcomm = mpi.comm_split(%0, %rank, %size) : !mpi.comm",
        "mpi.send(%arg0, %arg2, %rank, %newcomm) : memref<4xf32>, i32, i32\n",
        "= mpi.recv(%arg0, %arg2, %rank, %newcomm) : memref<4xf32>, i32, i32 -> !mpi.retval",
        "%req = mpi.isend(%arg0, %arg2, %rank, %0) : memref<4xf32>, i32, i32 -> !mpi.request",
        "mpi.irecv(%arg0, %arg2, %rank, %0) : memref<4xf32>, i32, i32 -> !mpi.retval, !mpi.request",
        "mpi.wait(%req) : !mpi.request\n",
        "mpi.allgather(%arg1, %arg0, %0) : memref<1xf32>, memref<4xf32>\n",
        "mpi.allreduce(%arg0, %arg0, MPI_SUM, %0) : memref<4xf32>, memref<4xf32>\n",
        "mpi.reduce_scatter_block(%arg0, %arg1, MPI_MIN, %0) : memref<4xf32>, memref<1xf32> "
        "-> !mpi.retval",
        "mpi.retval_check %",
        "= <MPI_ERR_COMM> : i1",
        "mpi.error_class %",
        "mpi.finalize : !mpi.retval",
    ]:
        assert line in text
    # and the text reads back to the same IR
    assert module_to_string(_parse(text)) == text


def test_accessors():
    module = _build_all()
    ops = {op.name: op for op in module.walk()}
    allreduce = ops["mpi.allreduce"]
    assert isinstance(allreduce, mpi.AllReduceOp)
    assert allreduce.reduction is mpi.ReductionOp.MPI_SUM
    assert allreduce.properties["op"] == IntegerAttr(3, i32)
    assert allreduce.retval is None
    check = ops["mpi.retval_check"]
    assert isinstance(check, mpi.RetvalCheckOp)
    assert check.errclass == mpi.ErrorClassAttr(mpi.ErrorClass.MPI_ERR_COMM)
    assert check.res.type == i1


def test_result_names_follow_ods_for_ops_with_two_result_definitions():
    module = _build_all()
    names = {
        op.name: op.get_asm_result_names()
        for op in module.walk()
        if hasattr(op, "get_asm_result_names")
    }
    assert names["mpi.comm_rank"] == ["rank"]
    assert names["mpi.comm_size"] == ["retval", "size"]
    assert names["mpi.comm_split"] == ["newcomm"]
    assert names["mpi.isend"] == ["req"]
    assert names["mpi.irecv"] == ["retval", "req"]
    # single-result-definition ops keep plain numbers
    assert not hasattr(mpi.CommWorldOp, "get_asm_result_names")
    assert not hasattr(mpi.InitOp, "get_asm_result_names")


def test_custom_generic_custom_round_trip_is_stable():
    module = _build_all()
    generic = module_to_string(module, generic=True)
    assert '"mpi.allreduce"(%arg0, %arg0, %0) <{op = 3 : i32}>' in generic
    assert "<{errclass = #mpi.errclass<MPI_ERR_COMM>}>" in generic
    assert module_to_string(_parse(generic)) == module_to_string(module)


def test_fold_cast_uses_the_static_source():
    text = _canonicalize(
        """
        func.func @f(%b: memref<4xf32>, %t: i32, %c: !mpi.comm) {
          %d = memref.cast %b : memref<4xf32> to memref<?xf32>
          mpi.send(%d, %t, %t, %c) : memref<?xf32>, i32, i32
          return
        }"""
    )
    assert "mpi.send(%arg0, %arg1, %arg1, %arg2) : memref<4xf32>, i32, i32" in text
    assert "memref.cast" not in text


def test_world_rank_folds_to_an_i32_constant_wrapped_like_mlir():
    text = _canonicalize(
        """
        module attributes {mpi.dlti = #dlti.map<"MPI:comm_world_rank" = 4294967298>} {
          func.func @f() -> i32 {
            %w = mpi.comm_world : !mpi.comm
            %r = mpi.comm_rank(%w) : i32
            return %r : i32
          }
        }"""
    )
    assert "arith.constant 2 : i32" in text
    assert "mpi.comm_rank" not in text


def test_non_integer_dlti_value_is_an_error_that_keeps_the_op():
    seen: list[str] = []
    engine = DiagnosticEngine(handler=lambda d: seen.append(f"{d.severity}: {d.message}"))
    with diagnostics.engine_scope(engine):
        text = _canonicalize(
            """
            module attributes {mpi.dlti = #dlti.map<"MPI:comm_world_size" = "many">} {
              func.func @f() -> i32 {
                %w = mpi.comm_world : !mpi.comm
                %s = mpi.comm_size(%w) : i32
                return %s : i32
              }
            }"""
        )
    assert seen and set(seen) == {"error: Expected an integer attribute for MPI:comm_world_size"}
    assert "mpi.comm_size" in text
