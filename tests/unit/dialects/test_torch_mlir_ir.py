"""torch-mlir's linalg-on-tensors IR: every committed fixture parses, prints as mlir-opt
printed it, and round-trips; dense_resource blobs decode to the right arrays."""

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.arith import ConstantOp
from xdsl.dialects.builtin import DenseResourceAttr, TensorType, f32, i1, i64
from xdsl.dialects.builtin import BFloat16Type

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import module_to_string
from shardc.ir.resources import ResourceError, dense_resource_attr, declare_blob, resource_array, written_key

DATA = Path(__file__).resolve().parents[2] / "data" / "torch_mlir"


def parse(text: str, name: str = "<test>"):
    return LocatingParser(make_context(), text, name).parse_module()


def resource_constants(module) -> list[DenseResourceAttr]:
    return [
        op.value
        for op in module.walk()
        if isinstance(op, ConstantOp) and isinstance(op.value, DenseResourceAttr)
    ]


# -- dense_resource blobs ---------------------------------------------------------------


def test_resource_array_decodes_f32_i64_i1():
    text = """
func.func @f() -> (tensor<2x2xf32>, tensor<3xi64>, tensor<3xi1>) {
  %0 = arith.constant dense_resource<h2_f> : tensor<2x2xf32>
  %1 = arith.constant dense_resource<h2_i> : tensor<3xi64>
  %2 = arith.constant dense_resource<h2_b> : tensor<3xi1>
  return %0, %1, %2 : tensor<2x2xf32>, tensor<3xi64>, tensor<3xi1>
}
{-#
  dialect_resources: {
    builtin: {
      h2_f: "0x040000000000803F000000400000404000008040",
      h2_i: "0x0800000001000000000000000200000000000000FFFFFFFFFFFFFFFF",
      h2_b: "0x01000000010001"
    }
  }
#-}
"""
    module = parse(text)
    f, i, b = resource_constants(module)
    np.testing.assert_array_equal(resource_array(f, f.type), [[1, 2], [3, 4]])
    assert resource_array(f, f.type).dtype == np.float32
    np.testing.assert_array_equal(resource_array(i, i.type), [1, 2, -1])
    assert resource_array(i, i.type).dtype == np.int64
    np.testing.assert_array_equal(resource_array(b, b.type), [True, False, True])
    # and after printing and parsing the printed text again
    again = parse(module_to_string(module))
    f2, i2, b2 = resource_constants(again)
    assert f2.resource_handle.data == "h2_f"
    np.testing.assert_array_equal(resource_array(i2, i2.type), [1, 2, -1])
    np.testing.assert_array_equal(resource_array(b2, b2.type), [True, False, True])


def test_resource_array_errors_name_the_key():
    missing = DenseResourceAttr.from_params("h2_never_declared", TensorType(f32, [2]))
    with pytest.raises(ResourceError, match="h2_never_declared"):
        resource_array(missing, missing.type)
    declare_blob("h2_short", "0x0400000000008040")
    short = DenseResourceAttr.from_params("h2_short", TensorType(f32, [2]))
    with pytest.raises(ResourceError, match=r"h2_short.*4 bytes.*needs 8"):
        resource_array(short, short.type)


def test_same_key_other_bytes_is_renamed_like_mlir():
    text = """
func.func @f() -> tensor<1xf32> {
  %0 = arith.constant dense_resource<h2_clash> : tensor<1xf32>
  return %0 : tensor<1xf32>
}
{-#
  dialect_resources: {
    builtin: {
      h2_clash: "0x04000000BYTES"
    }
  }
#-}
"""
    one = parse(text.replace("BYTES", "0000803F"))
    two = parse(text.replace("BYTES", "00000040"))
    (a,), (b,) = resource_constants(one), resource_constants(two)
    assert a.resource_handle.data == "h2_clash" and b.resource_handle.data == "h2_clash_1"
    assert resource_array(a, a.type)[0] == 1.0 and resource_array(b, b.type)[0] == 2.0
    # the same bytes again keep their key
    (c,) = resource_constants(parse(text.replace("BYTES", "0000803F")))
    assert c.resource_handle.data == "h2_clash"
    # printed, the renamed key is the one the file wrote, as mlir-opt prints it ...
    printed = module_to_string(two)
    assert "dense_resource<h2_clash>" in printed and 'h2_clash: "0x0400000000000040"' in printed
    # ... and read back, it is the same blob again
    (d,) = resource_constants(parse(printed))
    assert d.resource_handle.data == "h2_clash_1" and resource_array(d, d.type)[0] == 2.0


def test_renamed_keys_sharing_one_module_print_apart():
    """Two blobs whose files both wrote `h2_both`, in one module: the first prints as
    `h2_both`, the second as `h2_both_1`, and the printed text parses back to both."""
    from xdsl.dialects.builtin import ModuleOp

    text = """
func.func @FN() -> tensor<1xf32> {
  %0 = arith.constant dense_resource<h2_both> : tensor<1xf32>
  return %0 : tensor<1xf32>
}
{-#
  dialect_resources: {
    builtin: {
      h2_both: "0x04000000BYTES"
    }
  }
#-}
"""
    one = parse(text.replace("FN", "one").replace("BYTES", "0000803F"))
    two = parse(text.replace("FN", "two").replace("BYTES", "00004040"))
    both = ModuleOp([op.clone() for m in (one, two) for op in m.body.block.ops])
    printed = module_to_string(both)
    assert "dense_resource<h2_both>" in printed and "dense_resource<h2_both_1>" in printed
    values = [resource_array(a, a.type)[0] for a in resource_constants(parse(printed))]
    assert values == [1.0, 3.0]


def test_xdsl_parser_blobs_decode_too():
    """IR read by xDSL's own Parser (its blobs on xDSL's builtin dialect) decodes as well."""
    from xdsl.parser import Parser

    text = (
        "%0 = arith.constant dense_resource<h2_xdsl_only> : tensor<2xi32>\n"
        '{-#\n  dialect_resources: {\n    builtin: {\n      h2_xdsl_only: "0x040000000700000009000000"\n    }\n  }\n#-}\n'
    )
    (attr,) = resource_constants(Parser(make_context(), text).parse_module())
    np.testing.assert_array_equal(resource_array(attr, attr.type), [7, 9])


def test_external_resources_stay_with_their_module():
    from shardc.ir.resources import external_resources

    text = (
        "func.func @f() {\n  return\n}\n"
        '{-#\n  external_resources: {\n    tool: {\n      flag: true,\n      note: "x"\n    }\n  }\n#-}\n'
    )
    module = parse(text)
    assert external_resources(module) == [("tool", [("flag", True), ("note", "x")])]
    assert external_resources(parse("func.func @g() {\n  return\n}\n")) == []
    printed = module_to_string(module)
    assert printed.endswith('{-#\n  external_resources: {\n    tool: {\n      flag: true,\n      note: "x"\n    }\n  }\n#-}\n\n')
    assert module_to_string(parse(printed)) == printed


def test_dense_resource_attr_from_arrays():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    attr = dense_resource_attr(x, TensorType(f32, [2, 3]), "h2_built")
    np.testing.assert_array_equal(resource_array(attr, attr.type), x)
    ids = dense_resource_attr(np.array([5, -7]), TensorType(i64, [2]), "h2_built_i64")
    np.testing.assert_array_equal(resource_array(ids, ids.type), [5, -7])
    mask = dense_resource_attr(np.array([True, False]), TensorType(i1, [2]), "h2_built_i1")
    np.testing.assert_array_equal(resource_array(mask, mask.type), [True, False])
    bf = dense_resource_attr(np.array([1.5, -2.0]), TensorType(BFloat16Type(), [2]), "h2_built_bf16")
    np.testing.assert_array_equal(resource_array(bf, bf.type), [1.5, -2.0])


def test_baked_mlp_weights_decode():
    module = parse((DATA / "mlp_baked.mlir").read_text(), "mlp_baked.mlir")
    # By the key the file wrote: one that another export in this process entered first
    # (other tests before this one in a pytest worker) is entered renamed, `key_1`.
    attrs = {written_key(a.resource_handle.data): a for a in resource_constants(module)}
    bias = resource_array(attrs["torch_tensor_4_torch.float32"], attrs["torch_tensor_4_torch.float32"].type)
    assert bias.shape == (4,) and bias.dtype == np.float32
    # 0x3DB924A0 is the first element as the blob writes it
    assert bias[0] == np.frombuffer(bytes.fromhex("A024B93D"), "<f4")[0]
    w = attrs["torch_tensor_16_8_torch.float32"]
    assert resource_array(w, w.type).shape == (16, 8)


# -- the committed torch-mlir fixtures ----------------------------------------------------

FIXTURES = sorted(DATA.glob("*.mlir"))


def test_fixtures_found():
    assert {f.stem for f in FIXTURES} >= {"mlp", "gpt", "gpt_2layer", "mlp_baked"}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture_prints_as_mlir_opt_printed_it(path: Path):
    """The fixtures are mlir-opt 22.1.8's printing (less its final blank line)."""
    text = path.read_text()
    printed = module_to_string(parse(text, path.name))
    assert printed.rstrip("\n") == text.rstrip("\n")
    assert printed.endswith("\n\n")  # mlir-opt ends a module with a blank line


@pytest.mark.slow
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture_round_trips(path: Path):
    printed = module_to_string(parse(path.read_text(), path.name))
    assert module_to_string(parse(printed)) == printed
    generic = module_to_string(parse(printed), generic=True)
    assert module_to_string(parse(generic)) == printed


def test_multi_result_generic_structure():
    """gpt.mlir's softmax max/argmax: one generic, two results of two element types,
    whose uses print as `%N#0` / `%N#1`."""
    from xdsl.dialects.linalg.ops import GenericOp

    module = parse((DATA / "gpt.mlir").read_text(), "gpt.mlir")
    multi = [op for op in module.walk() if isinstance(op, GenericOp) and len(op.results) == 2]
    assert multi
    elements = {tuple(r.type.get_element_type() for r in op.results) for op in multi}
    assert elements == {(f32, i64)}
    text = module_to_string(module)
    assert " -> (tensor<4x2x8xf32>, tensor<4x2x8xi64>)" in text
    assert "tensor.expand_shape %51#0 [[0], [1], [2, 3]] output_shape [4, 2, 8, 1]" in text


def test_hex_float_in_dense_literal_is_its_bit_pattern():
    module = parse(
        "%0 = arith.constant dense<[0xFF800000, 0x3F800000]> : tensor<2xf32>\n"
        "%1 = arith.constant dense<0x7C00> : tensor<f16>\n"
        "%2 = arith.constant dense<[16, 2]> : tensor<2xi32>\n"
    )
    a, b, c = [op.value for op in module.walk() if isinstance(op, ConstantOp)]
    assert a.get_values() == (float("-inf"), 1.0)
    assert b.get_values() == (float("inf"),)
    assert c.get_values() == (16, 2)


def test_expand_shape_of_a_scalar_verifies():
    module = parse(
        "func.func @f(%s: tensor<f32>) -> tensor<1x1xf32> {\n"
        "  %0 = tensor.expand_shape %s [] output_shape [1, 1] : tensor<f32> into tensor<1x1xf32>\n"
        "  return %0 : tensor<1x1xf32>\n}\n"
    )
    module.verify()
    assert "tensor.expand_shape %arg0 [] output_shape [1, 1]" in module_to_string(module)


def test_trunci_overflow_flags_round_trip():
    text = (
        "func.func @f(%i: i64) -> (i32, i32) {\n"
        "  %0 = arith.trunci %i : i64 to i32\n"
        "  %1 = arith.trunci %i overflow<nsw> : i64 to i32\n"
        "  return %0, %1 : i32, i32\n}\n"
    )
    module = parse(text)
    module.verify()
    printed = module_to_string(module)
    assert "arith.trunci %arg0 : i64 to i32" in printed
    assert "arith.trunci %arg0 overflow<nsw> : i64 to i32" in printed
    generic = module_to_string(module, generic=True)
    assert "<{overflowFlags = #arith.overflow<none>}>" in generic


def test_remf_and_index_castui():
    module = parse(
        "func.func @f(%x: f32, %n: index) -> (f32, i64) {\n"
        "  %0 = arith.remf %x, %x fastmath<fast> : f32\n"
        "  %1 = arith.index_castui %n : index to i64\n"
        "  return %0, %1 : f32, i64\n}\n"
    )
    module.verify()
    printed = module_to_string(module)
    assert "arith.remf %arg0, %arg0 fastmath<fast> : f32" in printed
    assert "arith.index_castui %arg1 : index to i64" in printed


VARIADIC_REDUCE = """func.func @r(%w: tensor<4x8xf32>, %v: tensor<4x8xf32>, %r: tensor<4xf32>, %r2: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0:2 = linalg.reduce ins(%w, %v : tensor<4x8xf32>, tensor<4x8xf32>) outs(%r, %r2 : tensor<4xf32>, tensor<4xf32>) dimensions = [1]
    (%a: f32, %b: f32, %c: f32, %d: f32) {
      %s = arith.addf %a, %c : f32
      %m = arith.maximumf %b, %d : f32
      linalg.yield %s, %m : f32, f32
    }
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}
"""


def test_variadic_reduce_round_trips_and_runs():
    from shardc.dialects.linalg import ReduceOp
    from shardc.runtime import compile_text

    module = parse(VARIADIC_REDUCE)
    module.verify()
    (op,) = [o for o in module.walk() if isinstance(o, ReduceOp)]
    assert len(op.inputs) == len(op.inits) == 2 and len(op.results) == 2
    printed = module_to_string(module)
    assert "%reduced:2 = linalg.reduce ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%arg2, %arg3 :" in printed
    assert "(%in: f32, %in_0: f32, %init: f32, %init_1: f32) {" in printed
    assert module_to_string(parse(printed)) == printed
    assert module_to_string(parse(module_to_string(module, generic=True))) == printed
    rng = np.random.default_rng(0)
    w, v = rng.standard_normal((2, 4, 8)).astype(np.float32)
    r, r2 = np.zeros(4, np.float32), np.full(4, -np.inf, np.float32)
    total, peak = compile_text(VARIADIC_REDUCE).call("r", w, v, r, r2)
    np.testing.assert_allclose(total, w.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(peak, v.max(1))


def test_variadic_reduce_partitions_along_a_kept_dimension(opt):
    text = (
        "shard.grid @g(shape = 2)\n"
        + VARIADIC_REDUCE.replace(
            "  %0:2 = linalg.reduce ins(%w, %v",
            "  %sh = shard.sharding @g split_axes = [[0]] : !shard.sharding\n"
            "  %ws = shard.shard %w to %sh : tensor<4x8xf32>\n"
            "  %0:2 = linalg.reduce ins(%ws, %v",
        )
    )
    result = opt("-", "--sharding-propagation", "--shard-partition", stdin=text)
    assert result.returncode == 0, result.stderr
    assert "linalg.reduce ins(%arg0, %arg1 : tensor<2x8xf32>, tensor<2x8xf32>) outs(%arg2, %arg3 : tensor<2xf32>, tensor<2xf32>)" in result.stdout


def test_reduce_with_unequal_inputs_and_inits_is_a_diagnostic(opt):
    text = VARIADIC_REDUCE.replace("outs(%r, %r2 : tensor<4xf32>, tensor<4xf32>)", "outs(%r : tensor<4xf32>)")
    result = opt("-", stdin=text)
    assert result.returncode == 1
    assert "<stdin>:2:24: error: linalg.reduce needs as many inits as inputs, got 2 and 1" in result.stderr
    assert "Traceback" not in result.stderr


def test_shardc_opt_prints_baked_fixture_exactly(opt):
    path = DATA / "mlp_baked.mlir"
    result = opt(str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip("\n") == path.read_text().rstrip("\n")


# -- live exports ---------------------------------------------------------------------------


def _export(module, inputs, name, **kw):
    pytest.importorskip("torch_mlir", reason="torch-mlir is not installed: pip install -e '.[torch]'")
    from shardc.frontends.torch import export_module

    return export_module(module, inputs, func_name=name, **kw).text


@pytest.mark.slow
def test_live_exports_parse_and_round_trip():
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install -e '.[torch]'")
    nn, F = torch.nn, torch.nn.functional

    class Ops(nn.Module):
        def forward(self, x, y, t, ids):
            mask = torch.tril(torch.ones(4, 4, dtype=torch.bool))
            z = torch.where(x > 0, x, y).masked_fill(~mask, float("-inf")).softmax(-1)
            z = torch.cat([z, x.mean(-1, keepdim=True) + x.var(-1, keepdim=True)], dim=1)
            return F.cross_entropy(z, t) + (ids % 3).float().sum() + torch.rsqrt(x.abs() + 1).sum()

    torch.manual_seed(0)
    args = (torch.randn(4, 4), torch.randn(4, 4), torch.tensor([1, 0, 3, 2]), torch.tensor([3, 1, 2, 0]))
    text = _export(Ops(), args, "ops")
    module = parse(text)
    module.verify()
    printed = module_to_string(module)
    for syntax in ("tensor.concat", "cf.assert", "math.rsqrt", "arith.remsi", "tensor.extract "):
        assert syntax in printed
    assert module_to_string(parse(printed)) == printed


@pytest.mark.slow
def test_live_baked_export_resources_hold_the_weights():
    """torch-mlir bakes parameters and buffers as dense_resource blobs; decoded, they are
    the module's own tensors (f32 weights, an i1 buffer stored as i8 bytes)."""
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install -e '.[torch]'")
    nn = torch.nn

    class Baked(nn.Module):
        def __init__(self):
            super().__init__()
            self.e = nn.Embedding(6, 4)
            self.lin = nn.Linear(4, 3)

        def forward(self, i):
            return self.lin(self.e(i))

    torch.manual_seed(3)
    model = Baked()
    text = _export(model, (torch.tensor([[1, 5], [0, 2]]),), "baked", params_as_args=False)
    module = parse(text)
    arrays = sorted(
        (resource_array(a, a.type) for a in resource_constants(module)), key=lambda a: (a.shape, a.ravel()[0])
    )
    expected = sorted(
        (p.detach().numpy() for p in model.parameters()), key=lambda a: (a.shape, a.ravel()[0])
    )
    assert len(arrays) == len(expected) == 3
    for got, want in zip(arrays, expected):
        np.testing.assert_array_equal(got, want)
    # printed and parsed again, the same blobs
    again = parse(module_to_string(module))
    assert [resource_array(a, a.type).tobytes() for a in resource_constants(again)] == [
        resource_array(a, a.type).tobytes() for a in resource_constants(module)
    ]
