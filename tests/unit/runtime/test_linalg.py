"""linalg structured ops: each body class of the vectorized engine against numpy."""

import warnings

import numpy as np
import pytest

from shardc.runtime import compile_text

NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "i1": np.bool_, "f16": np.float16}


def tt(shape, ty):
    return f"tensor<{'x'.join(map(str, shape))}x{ty}>" if shape else f"tensor<{ty}>"


def generic(ins, out, maps, iters, body, n_dims, out_ty=None):
    """Build @f(ins...) -> out calling one linalg.generic; ins/out: (shape, elem type)."""
    dims = ", ".join(f"d{i}" for i in range(n_dims))
    map_txt = ", ".join(f"affine_map<({dims}) -> ({', '.join(m)})>" for m in maps)
    args = ", ".join(f"%a{i}: {tt(s, t)}" for i, (s, t) in enumerate(ins))
    ot = tt(*out)
    bb = ", ".join([f"%x{i}: {t}" for i, (_, t) in enumerate(ins)] + [f"%o: {out[1]}"])
    it = ", ".join(f'"{i}"' for i in iters)
    return f"""func.func @f({args}, %init: {ot}) -> {ot} {{
  %r = linalg.generic {{indexing_maps = [{map_txt}], iterator_types = [{it}]}} ins({', '.join(f'%a{i}' for i in range(len(ins)))} : {', '.join(tt(s, t) for s, t in ins)}) outs(%init : {ot}) {{
  ^bb0({bb}):
{body}
  }} -> {ot}
  return %r : {ot}
}}"""


def rand(rng, shape, ty):
    if ty.startswith("f"):
        return rng.standard_normal(shape).astype(NP[ty])
    if ty == "i1":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(-1000, 1000, shape).astype(NP[ty])


MATMUL_BODY = {
    "f": "    %m = arith.mulf %x0, %x1 : {t}\n    %s = arith.addf %o, %m : {t}\n    linalg.yield %s : {t}",
    "i": "    %m = arith.muli %x0, %x1 : {t}\n    %s = arith.addi %m, %o : {t}\n    linalg.yield %s : {t}",
}


@pytest.mark.parametrize("ty", ["f32", "f64", "i32", "i64"])
@pytest.mark.parametrize(
    "maps,spec",
    [
        ((["d0", "d2"], ["d2", "d1"], ["d0", "d1"]), "ik,kj->ij"),
        ((["d2", "d0"], ["d2", "d1"], ["d0", "d1"]), "ki,kj->ij"),  # transposed A
        ((["d0", "d2"], ["d1", "d2"], ["d1", "d0"]), "ik,jk->ji"),  # transposed B and output
    ],
)
def test_contraction_2d(ty, maps, spec, rng):
    sizes = {"i": 5, "j": 3, "k": 7}
    sa, sb = spec.split("->")[0].split(",")
    A = rand(rng, [sizes[c] for c in sa], ty)
    B = rand(rng, [sizes[c] for c in sb], ty)
    out_shape = [sizes[c] for c in spec.split("->")[1]]
    init = rand(rng, out_shape, ty)
    src = generic([(A.shape, ty), (B.shape, ty)], (out_shape, ty), maps, ["parallel", "parallel", "reduction"], MATMUL_BODY[ty[0]].format(t=ty), 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cm = compile_text(src)
    init0 = init.copy()
    got = cm.call("f", A, B, init)
    exp = init + np.einsum(spec, A, B)
    assert got.dtype == NP[ty]
    np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-4)
    assert (init == init0).all()
    assert "run_structured" in cm.source


def test_contraction_batched_with_casts_and_int_wrap(rng):
    # batch matmul with f16 inputs extended to f32 inside the body
    A = rng.standard_normal((2, 4, 6)).astype(np.float16)
    B = rng.standard_normal((2, 6, 3)).astype(np.float16)
    body = "    %p = arith.extf %x0 : f16 to f32\n    %q = arith.extf %x1 : f16 to f32\n    %m = arith.mulf %p, %q : f32\n    %s = arith.addf %o, %m : f32\n    linalg.yield %s : f32"
    src = generic([((2, 4, 6), "f16"), ((2, 6, 3), "f16")], ((2, 4, 3), "f32"), [["d0", "d1", "d3"], ["d0", "d3", "d2"], ["d0", "d1", "d2"]], ["parallel", "parallel", "parallel", "reduction"], body, 4)
    got = compile_text(src).call("f", A, B, np.zeros((2, 4, 3), np.float32))
    np.testing.assert_allclose(got, A.astype(np.float32) @ B.astype(np.float32), rtol=1e-5, atol=1e-5)
    # int32 accumulation wraps around
    big = np.full((1, 2), 2**30, np.int32)
    src = generic([((1, 2), "i32"), ((2, 1), "i32")], ((1, 1), "i32"), [["d0", "d2"], ["d2", "d1"], ["d0", "d1"]], ["parallel", "parallel", "reduction"], MATMUL_BODY["i"].format(t="i32"), 3)
    got = compile_text(src).call("f", big, np.full((2, 1), 2, np.int32), np.zeros((1, 1), np.int32))
    assert got[0, 0] == 0  # 2 * 2^30 * 2 = 2^32 wraps to 0


def test_contraction_three_factors_and_scale(rng):
    A, B, C = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((5,))
    body = "    %c = arith.constant 2.0 : f64\n    %m = arith.mulf %x0, %x1 : f64\n    %n = arith.mulf %m, %x2 : f64\n    %k = arith.mulf %n, %c : f64\n    %s = arith.addf %o, %k : f64\n    linalg.yield %s : f64"
    src = generic([((3, 4), "f64"), ((4, 5), "f64"), ((5,), "f64")], ((3,), "f64"), [["d0", "d1"], ["d1", "d2"], ["d2"], ["d0"]], ["parallel", "reduction", "reduction"], body, 3)
    got = compile_text(src).call("f", A, B, C, np.ones(3))
    np.testing.assert_allclose(got, 1 + 2 * np.einsum("ij,jk,k->i", A, B, C))


def test_named_matmul_fill_and_memref_outputs(rng):
    A, B = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((6, 5)).astype(np.float32)
    src = """func.func @f(%a: tensor<4x6xf32>, %b: tensor<6x5xf32>) -> tensor<4x5xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %r = linalg.matmul ins(%a, %b : tensor<4x6xf32>, tensor<6x5xf32>) outs(%f : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %r : tensor<4x5xf32>
}
func.func @m(%a: memref<4x6xf32>, %b: memref<6x5xf32>, %c: memref<4x5xf32>) {
  %z = arith.constant 1.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<4x5xf32>)
  linalg.matmul ins(%a, %b : memref<4x6xf32>, memref<6x5xf32>) outs(%c : memref<4x5xf32>)
  return
}"""
    cm = compile_text(src)
    np.testing.assert_allclose(cm.call("f", A, B), A @ B, rtol=1e-5, atol=1e-5)
    C = np.zeros((4, 5), np.float32)
    assert cm.call("m", A, B, C) is None
    np.testing.assert_allclose(C, 1 + A @ B, rtol=1e-5, atol=1e-5)


def test_elementwise_broadcast_maps_and_transpose(rng):
    X = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    body = "    %s = arith.addf %x0, %x1 : f32\n    %z = arith.constant 0.0 : f32\n    %r = arith.maximumf %s, %z : f32\n    linalg.yield %r : f32"
    # bias broadcast over d0, output transposed
    src = generic([((3, 4), "f32"), ((4,), "f32")], ((4, 3), "f32"), [["d0", "d1"], ["d1"], ["d1", "d0"]], ["parallel", "parallel"], body, 2)
    got = compile_text(src).call("f", X, b, np.empty((4, 3), np.float32))
    np.testing.assert_array_equal(got, np.maximum(X + b, 0).T)


def test_elementwise_uses_out_and_scalar_input(rng):
    X = rng.standard_normal((2, 3))
    src = """func.func @f(%x: tensor<2x3xf64>, %s: f64, %init: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %s : tensor<2x3xf64>, f64) outs(%init : tensor<2x3xf64>) {
  ^bb0(%a: f64, %b: f64, %o: f64):
    %m = arith.mulf %a, %b : f64
    %t = arith.subf %o, %m : f64
    linalg.yield %t : f64
  } -> tensor<2x3xf64>
  return %r : tensor<2x3xf64>
}"""
    init = rng.standard_normal((2, 3))
    np.testing.assert_allclose(compile_text(src).call("f", X, 3.0, init), init - 3.0 * X)


def test_elementwise_casts_in_body(rng):
    x = np.array([-1, 300, 5, -(2**31)], np.int32)
    body = (
        "    %a = arith.extui %x0 : i32 to i64\n    %b = arith.trunci %x0 : i32 to i8\n    %c = arith.extsi %b : i8 to i64\n"
        "    %d = arith.addi %a, %c : i64\n    %f = arith.uitofp %x0 : i32 to f64\n    %g = arith.fptosi %f : f64 to i64\n"
        "    %h = arith.addi %d, %g : i64\n    linalg.yield %h : i64"
    )
    src = generic([((4,), "i32")], ((4,), "i64"), [["d0"], ["d0"]], ["parallel"], body, 1)
    got = compile_text(src).call("f", x, np.zeros(4, np.int64))
    u = x.view(np.uint32).astype(np.int64)
    assert got.tolist() == (u + x.astype(np.int8).astype(np.int64) + u).tolist()


COMBINERS = [
    ("addf", "f32", lambda a, ax: a.sum(axis=ax), np.add),
    ("mulf", "f64", lambda a, ax: a.prod(axis=ax), np.multiply),
    ("maximumf", "f32", lambda a, ax: a.max(axis=ax), np.maximum),
    ("minimumf", "f32", lambda a, ax: a.min(axis=ax), np.minimum),
    ("maxnumf", "f64", lambda a, ax: np.fmax.reduce(a, axis=ax), np.fmax),
    ("minnumf", "f64", lambda a, ax: np.fmin.reduce(a, axis=ax), np.fmin),
    ("addi", "i32", lambda a, ax: a.sum(axis=ax, dtype=np.int32), np.add),
    ("muli", "i64", lambda a, ax: a.prod(axis=ax), np.multiply),
    ("maxsi", "i32", lambda a, ax: a.max(axis=ax), np.maximum),
    ("minsi", "i64", lambda a, ax: a.min(axis=ax), np.minimum),
    ("maxui", "i32", lambda a, ax: a.view(np.uint32).max(axis=ax).view(np.int32), None),
    ("minui", "i32", lambda a, ax: a.view(np.uint32).min(axis=ax).view(np.int32), None),
    ("ori", "i32", lambda a, ax: np.bitwise_or.reduce(a, axis=ax), np.bitwise_or),
    ("andi", "i64", lambda a, ax: np.bitwise_and.reduce(a, axis=ax), np.bitwise_and),
    ("xori", "i32", lambda a, ax: np.bitwise_xor.reduce(a, axis=ax), np.bitwise_xor),
    ("ori", "i1", lambda a, ax: a.any(axis=ax), np.logical_or),
]


@pytest.mark.parametrize("comb,ty,ref,combine", COMBINERS)
def test_reduction_combiners(comb, ty, ref, combine, rng):
    X = rand(rng, (3, 4, 5), ty)
    if ty.startswith("i") and ty != "i1" and comb == "muli":
        X = rng.integers(-3, 4, (3, 4, 5)).astype(NP[ty])
    init = rand(rng, (4,), ty)
    body = f"    %r = arith.{comb} %o, %x0 : {ty}\n    linalg.yield %r : {ty}"
    src = generic([((3, 4, 5), ty)], ((4,), ty), [["d0", "d1", "d2"], ["d1"]], ["reduction", "parallel", "reduction"], body, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = compile_text(src).call("f", X, init)
    red = ref(X, (0, 2))
    exp = combine(init, red) if combine is not None else ref(np.stack([np.broadcast_to(init, (4,)), red]), 0)
    assert got.dtype == NP[ty]
    np.testing.assert_allclose(got, exp, rtol=1e-5)


def test_reduction_of_expression_with_broadcast(rng):
    # sum_j exp(x[i]) over j that x does not depend on: multiplicity counts
    X = rng.standard_normal((3,))
    body = "    %e = math.exp %x0 : f64\n    %r = arith.addf %e, %o : f64\n    linalg.yield %r : f64"
    src = """func.func @f(%x: tensor<3xf64>, %y: tensor<3x4xf64>, %init: tensor<3xf64>) -> tensor<3xf64> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x, %y : tensor<3xf64>, tensor<3x4xf64>) outs(%init : tensor<3xf64>) {
  ^bb0(%x0: f64, %y0: f64, %o: f64):
""" + body + """
  } -> tensor<3xf64>
  return %r : tensor<3xf64>
}"""
    got = compile_text(src).call("f", X, np.zeros((3, 4)), np.zeros(3))
    np.testing.assert_allclose(got, 4 * np.exp(X))


def test_index_body():
    body = (
        "    %i = linalg.index 0 : index\n    %j = linalg.index 1 : index\n    %c = arith.constant 10 : index\n"
        "    %m = arith.muli %i, %c : index\n    %s = arith.addi %m, %j : index\n    %v = arith.index_cast %s : index to i32\n"
        "    linalg.yield %v : i32"
    )
    src = generic([], ((3, 4), "i32"), [["d0", "d1"]], ["parallel", "parallel"], body, 2).replace("ins( : ) ", "")
    src = src.replace("^bb0(, %o: i32)", "^bb0(%o: i32)").replace("@f(, %init", "@f(%init")
    got = compile_text(src).call("f", np.zeros((3, 4), np.int32))
    assert got.tolist() == [[10 * i + j for j in range(4)] for i in range(3)]


def test_index_body_with_reduction():
    # out[i] = sum_j (i * j): index grids also feed reductions
    src = """func.func @f(%y: tensor<3x5xf32>, %init: tensor<3xf32>) -> tensor<3xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%y : tensor<3x5xf32>) outs(%init : tensor<3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %p = arith.muli %i, %j : index
    %q = arith.index_cast %p : index to i64
    %f = arith.sitofp %q : i64 to f32
    %g = arith.addf %f, %a : f32
    %s = arith.addf %o, %g : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  return %r : tensor<3xf32>
}"""
    Y = np.ones((3, 5), np.float32)
    got = compile_text(src).call("f", Y, np.zeros(3, np.float32))
    assert got.tolist() == [sum(i * j + 1 for j in range(5)) for i in range(3)]


def test_general_fallback_warns_and_is_exact(rng):
    # out = out * 0.5 + x: not an associative combiner form
    X = rng.standard_normal((3, 6))
    body = "    %h = arith.constant 0.5 : f64\n    %m = arith.mulf %o, %h : f64\n    %s = arith.addf %m, %x0 : f64\n    linalg.yield %s : f64"
    src = generic([((3, 6), "f64")], ((3,), "f64"), [["d0", "d1"], ["d0"]], ["parallel", "reduction"], body, 2)
    with pytest.warns(RuntimeWarning, match="linalg.generic.*general vectorized path"):
        cm = compile_text(src)
    init = rng.standard_normal(3)
    exp = init.copy()
    for j in range(6):
        exp = exp * 0.5 + X[:, j]
    np.testing.assert_allclose(cm.call("f", X, init), exp)


def test_named_ops(rng):
    A = rng.standard_normal((3, 4)).astype(np.float32)
    B = rng.standard_normal((3, 4)).astype(np.float32)
    src = """func.func @f(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %e = tensor.empty() : tensor<3x4xf32>
  %0 = linalg.add ins(%a, %b : tensor<3x4xf32>, tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %1 = linalg.mul ins(%a, %b : tensor<3x4xf32>, tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %2 = linalg.exp ins(%a : tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %et = tensor.empty() : tensor<4x3xf32>
  %3 = linalg.transpose ins(%a : tensor<3x4xf32>) outs(%et : tensor<4x3xf32>) permutation = [1, 0]
  %z = arith.constant 0.0 : f32
  %er = tensor.empty() : tensor<3xf32>
  %fr = linalg.fill ins(%z : f32) outs(%er : tensor<3xf32>) -> tensor<3xf32>
  %4 = linalg.reduce ins(%a : tensor<3x4xf32>) outs(%fr : tensor<3xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %eb = tensor.empty() : tensor<2x3x4xf32>
  %5 = linalg.broadcast ins(%a : tensor<3x4xf32>) outs(%eb : tensor<2x3x4xf32>) dimensions = [0]
  %6 = linalg.copy ins(%a : tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %7 = linalg.sub ins(%a, %b : tensor<3x4xf32>, tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}"""
    r = compile_text(src).call("f", A, B)
    exp = [A + B, A * B, np.exp(A), A.T, A.sum(1), np.broadcast_to(A, (2, 3, 4)), A, A - B]
    for g, e in zip(r, exp):
        assert g.shape == e.shape and g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_generic_on_memrefs_writes_in_place(rng):
    src = """func.func @f(%x: memref<2x3xf32>, %y: memref<2x3xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<2x3xf32>) outs(%y : memref<2x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  }
  return
}"""
    X = np.ones((2, 3), np.float32)
    Y = np.full((2, 3), 2.0, np.float32)
    base = np.zeros((4, 6), np.float32)
    view = base[::2, ::2]
    view[...] = Y
    compile_text(src).call("f", X, view)
    assert (base[::2, ::2] == 3).all() and (base[1::2] == 0).all()


def test_body_capturing_outer_value_and_freeing_dead_values(rng):
    # %s is used only inside the body: it must stay alive until the body runs
    src = """func.func @f(%x: tensor<4xf32>, %y: f32) -> tensor<4xf32> {
  %s = arith.mulf %y, %y : f32
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %s : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}"""
    cm = compile_text(src)
    assert "del " in cm.source
    X = rng.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(cm.call("f", X, 3.0), X * 9)
