"""The runtime's two halves stay apart: generated code binds only objects of the run
side (`shardc.runtime.execute`), and the run side never imports the code-generation side
(`shardc.runtime.codegen`), so that a compile-cache hit loads no compiler."""

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import shardc.runtime.execute
from shardc.runtime import compile_text
from shardc.runtime.codegen import cache
from shardc.runtime.execute.comm import run_simulated

RUN_SIDE = "shardc.runtime.execute."

MATMUL = """
func.func @f(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x4xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  %r = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%i : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
"""

_MAP = "affine_map<(d0, d1) -> (d0, d1)>"
FUSED = f"""
func.func @f(%a: tensor<64x1024xf32>, %b: tensor<64x1024xf32>) -> tensor<64x1024xf32> {{
  %e = tensor.empty() : tensor<64x1024xf32>
  %s = linalg.generic {{indexing_maps = [{_MAP}, {_MAP}, {_MAP}], iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : tensor<64x1024xf32>, tensor<64x1024xf32>) outs(%e : tensor<64x1024xf32>) {{
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    linalg.yield %m : f32
  }} -> tensor<64x1024xf32>
  %t = linalg.generic {{indexing_maps = [{_MAP}, {_MAP}], iterator_types = ["parallel", "parallel"]}}
      ins(%s : tensor<64x1024xf32>) outs(%e : tensor<64x1024xf32>) {{
  ^bb0(%x: f32, %o: f32):
    %h = math.tanh %x : f32
    %r = math.erf %h : f32
    linalg.yield %r : f32
  }} -> tensor<64x1024xf32>
  return %t : tensor<64x1024xf32>
}}
"""

COLLECTIVES = """
shard.grid @g(shape = 2x2)
func.func @f(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<4x3xf32>, index) {
  %r = shard.all_reduce %x on @g grid_axes = [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  %a = shard.all_gather %x on @g grid_axes = [1] gather_axis = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
  %i = shard.process_linear_index on @g : index
  return %r, %a, %i : tensor<2x3xf32>, tensor<4x3xf32>, index
}
"""

CONV = """
func.func @f(%x: tensor<1x6x6x2xf32>, %w: tensor<3x3x2x4xf32>, %o: tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %r = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x6x6x2xf32>, tensor<3x3x2x4xf32>) outs(%o : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %r : tensor<1x4x4x4xf32>
}
"""


def bound_modules(bindings: dict[str, object]) -> set[str]:
    """The modules of every function, class and dataclass the bindings reach (inside
    containers and dataclass instances too): what the generated code calls."""
    found: set[str] = set()
    seen: set[int] = set()
    todo = list(bindings.values())
    while todo:
        v = todo.pop()
        if id(v) in seen or isinstance(v, str | bytes | int | float | np.ndarray | np.generic | np.dtype | np.ufunc) or v is None:
            continue
        seen.add(id(v))
        if isinstance(v, tuple | list | set | frozenset):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v.keys())
            todo.extend(v.values())
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            found.add(type(v).__module__)
            todo.extend(vars(v).values())
        elif isinstance(v, type) or callable(v):
            found.add(getattr(v, "__module__", None) or "?")
    return {m for m in found if m.startswith("shardc")}


def _check(cm) -> set[str]:
    modules = bound_modules(cm.bindings)
    assert modules, "the program binds no runtime object: the check would be empty"
    assert all(m.startswith(RUN_SIDE) for m in modules), sorted(m for m in modules if not m.startswith(RUN_SIDE))
    cache.dump_bindings({k: v for k, v in cm.bindings.items() if not callable(v) or getattr(v, "__qualname__", "").count(".") == 0})
    return modules


def test_a_matmul_binds_the_run_side_alone():
    cm = compile_text(MATMUL)
    modules = _check(cm)
    assert "shardc.runtime.execute.structured_run" in modules
    a, b = np.ones((8, 16), np.float32), np.ones((16, 4), np.float32)
    np.testing.assert_allclose(cm.call("f", a, b), a @ b)


def test_fused_elementwise_binds_the_run_side_alone():
    cm = compile_text(FUSED)
    modules = _check(cm)
    assert "shardc.runtime.execute.kernels.fused_run" in modules or "shardc.runtime.execute.structured_run" in modules
    a = np.full((64, 1024), 0.5, np.float32)
    assert cm.call("f", a, a).shape == (64, 1024)


def test_collectives_bind_the_run_side_alone():
    cm = compile_text(COLLECTIVES)
    assert "shardc.runtime.execute.kernels.shard_run" in _check(cm)
    xs = [np.full((2, 3), r, np.float32) for r in range(4)]
    out = run_simulated(4, lambda x: cm.call("f", x), per_rank_args=[(x,) for x in xs])
    np.testing.assert_allclose(out[0][0], np.full((2, 3), 6.0))
    assert [o[2] for o in out] == [0, 1, 2, 3]


def test_a_conv_binds_the_run_side_alone():
    cm = compile_text(CONV)
    _check(cm)
    x = np.ones((1, 6, 6, 2), np.float32)
    w = np.ones((3, 3, 2, 4), np.float32)
    np.testing.assert_allclose(cm.call("f", x, w, np.zeros((1, 4, 4, 4), np.float32)), np.full((1, 4, 4, 4), 18.0))


def test_an_entry_cannot_name_the_code_generation_side():
    from shardc.runtime.codegen.structured import emit_structured

    with pytest.raises(cache.UncacheableError):
        cache.dump_bindings({"x": emit_structured})


def _imports(tree: ast.AST, module: str) -> list[str]:
    out = []
    for node in ast.walk(tree):  # function-local imports too
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: -node.level]
                out.append(".".join(base + ([node.module] if node.module else [])))
            else:
                out.append(node.module or "")
    return out


def test_the_run_side_never_imports_code_generation():
    root = Path(shardc.runtime.execute.__file__).parent
    files = sorted(root.rglob("*.py"))
    assert len(files) > 10
    for path in files:
        module = "shardc.runtime.execute." + ".".join(path.relative_to(root).with_suffix("").parts)
        bad = [m for m in _imports(ast.parse(path.read_text()), module) if m.startswith(("shardc.runtime.codegen", "shardc.launch", "shardc.tools", "shardc.passes"))]
        assert not bad, f"{path}: imports {bad}"
