"""Every shard op's lowering, executed: a small shard-level program runs (a) on the
runtime's shard kernels and (b) after `convert-shard-to-mpi --canonicalize` on its mpi
kernels, on simulated ranks; both must agree wherever MLIR defines the result (the
root alone for gather and reduce, processes with a source for shift without rotate).
(c) the same with the DLTI rank specialisation: each rank compiles the module lowered
for its own rank.

The case table (`cases(grid)`) is shared with tests/mpi/test_lowered_mpi.py, which runs
it under `mpiexec -n 2` and `-n 4`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.passes import all_passes
from shardc.runtime import compile_module

LOWERING = ("convert-shard-to-mpi", "canonicalize")

# =========================================================================================
# Cases
# =========================================================================================


@dataclass
class Case:
    """A shard-level program `@f` on `grid`, its per-rank inputs, and which results
    are defined on which rank."""

    id: str
    grid: tuple[int, ...]
    body: str
    """Everything after the `shard.grid @g` line."""
    inputs: Callable[[int], tuple[Any, ...]] = lambda r: ()
    """rank -> the arguments of @f on that rank (fresh arrays each call)."""
    defined: Callable[[int, int], bool] = lambda rank, i: True
    """(rank, result index) -> whether MLIR defines that result there."""
    tags: set[str] = field(default_factory=set[str])

    @property
    def n(self) -> int:
        return int(np.prod(self.grid))

    def text(self, rank: int | None = None) -> str:
        grid = f"shard.grid @g(shape = {'x'.join(map(str, self.grid))})\n{self.body}"
        if rank is None:
            return grid
        attr = f'{{mpi.dlti = #dlti.map<"MPI:comm_world_rank" = {rank}>}}'
        return f"module attributes {attr} {{\n{grid}\n}}"


def coords(r: int, grid: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(c) for c in np.unravel_index(r, tuple(grid)))


def group_index(r: int, grid: Sequence[int], axes: Sequence[int]) -> int:
    c = coords(r, grid)
    return int(np.ravel_multi_index([c[a] for a in axes], [grid[a] for a in axes])) if axes else 0


def _ty(kind: str, shape: Sequence[int], elem: str) -> str:
    return f"{kind}<{'x'.join(map(str, shape))}x{elem}>"


def _np(elem: str) -> Any:
    return {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}[elem]


def _data(shape: Sequence[int], elem: str, seed: int) -> Callable[[int], tuple[Any, ...]]:
    def make(r: int) -> tuple[Any, ...]:
        rng = np.random.default_rng(1000 * seed + r)
        if elem.startswith("i"):
            return (rng.integers(1, 7, tuple(shape)).astype(_np(elem)),)
        return (rng.standard_normal(tuple(shape)).astype(_np(elem)),)

    return make


def _ga(axes: Sequence[int]) -> str:
    return f" grid_axes = [{', '.join(map(str, axes))}]" if axes else ""


def _unary(name: str, op: str, in_t: str, out_t: str, paren: bool = False) -> str:
    sig = f"({in_t}) -> {out_t}" if paren else f"{in_t} -> {out_t}"
    return f"""func.func @f(%x: {in_t}) -> {out_t} {{
  %r = {op} : {sig}
  return %r : {out_t}
}}"""


def axes_choices(grid: Sequence[int]) -> list[list[int]]:
    """The grid_axes variants: none (a group of one), the whole grid in order, and on
    2-D grids each axis alone and both reversed."""
    out: list[list[int]] = [[], list(range(len(grid)))]
    if len(grid) > 1:
        out += [[a] for a in range(len(grid))] + [list(reversed(range(len(grid))))]
    return out


def _size(grid: Sequence[int], axes: Sequence[int]) -> int:
    return int(np.prod([grid[a] for a in axes]))


def _tag(axes: Sequence[int]) -> str:
    return "".join(map(str, axes)) or "none"


def collective_cases(grid: tuple[int, ...]) -> list[Case]:
    g = "x".join(map(str, grid))
    out: list[Case] = []
    for axes in axes_choices(grid):
        k = _size(grid, axes)
        ax = _tag(axes)
        full_axes = axes
        for kind, elem in (
            ("sum", "f32"), ("max", "f64"), ("min", "i32"), ("product", "i64"), ("average", "f64"),
            ("bitwise_and", "i32"), ("bitwise_or", "i64"), ("bitwise_xor", "i32"),
        ):
            t = _ty("tensor", (2, 3), elem)
            out.append(Case(f"all_reduce-{kind}-{g}-{ax}", grid, _unary("f", f"shard.all_reduce %x on @g{_ga(axes)} reduction = {kind}", t, t), _data((2, 3), elem, 1)))
        m = _ty("memref", (2, 3), "f32")
        out.append(Case(f"all_reduce-memref-{g}-{ax}", grid, _unary("f", f"shard.all_reduce %x on @g{_ga(axes)}", m, m), _data((2, 3), "f32", 2)))
        out.append(Case(f"all_reduce-widen-{g}-{ax}", grid, _unary("f", f"shard.all_reduce %x on @g{_ga(axes)} reduction = max", _ty("tensor", (3,), "f32"), _ty("tensor", (3,), "f64")), _data((3,), "f32", 3)))
        for axis in (0, 1):
            out_shape = (2 * k, 3) if axis == 0 else (2, 3 * k)
            out.append(Case(f"all_gather-{axis}-{g}-{ax}", grid, _unary("f", f"shard.all_gather %x on @g{_ga(axes)} gather_axis = {axis}", _ty("tensor", (2, 3), "f64"), _ty("tensor", out_shape, "f64")), _data((2, 3), "f64", 4)))
            out.append(Case(f"all_slice-{axis}-{g}-{ax}", grid, _unary("f", f"shard.all_slice %x on @g{_ga(axes)} slice_axis = {axis}", _ty("tensor", out_shape, "f64"), _ty("tensor", (2, 3), "f64")), _data(out_shape, "f64", 5)))
            for kind in ("sum", "max"):
                out.append(Case(f"reduce_scatter-{kind}-{axis}-{g}-{ax}", grid, _unary("f", f"shard.reduce_scatter %x on @g{_ga(axes)} reduction = {kind} scatter_axis = {axis}", _ty("tensor", out_shape, "f64"), _ty("tensor", (2, 3), "f64")), _data(out_shape, "f64", 6)))
            # trunk's memref forms: a fresh result buffer (the input may be a function argument)
            out.append(Case(f"all_gather-memref-{axis}-{g}-{ax}", grid, _unary("f", f"shard.all_gather %x on @g{_ga(axes)} gather_axis = {axis}", _ty("memref", (2, 3), "f32"), _ty("memref", out_shape, "f32")), _data((2, 3), "f32", 19)))
            out.append(Case(f"reduce_scatter-memref-{axis}-{g}-{ax}", grid, _unary("f", f"shard.reduce_scatter %x on @g{_ga(axes)} reduction = max scatter_dim = {axis}", _ty("memref", out_shape, "i32"), _ty("memref", (2, 3), "i32")), _data(out_shape, "i32", 20)))
        for split, concat in ((0, 1), (1, 0), (0, 0)):
            in_shape = [2, 3]
            in_shape[split] *= k
            res = list(in_shape)
            res[split] //= k
            res[concat] *= k
            out.append(Case(f"all_to_all-{split}{concat}-{g}-{ax}", grid, _unary("f", f"shard.all_to_all %x on @g{_ga(axes)} split_axis = {split} concat_axis = {concat}", _ty("tensor", in_shape, "f64"), _ty("tensor", res, "f64")), _data(in_shape, "f64", 7)))
        # a 3-D buffer whose parts are strided on both sides (staged sends, receives
        # gathered then moved to the concat axis)
        in3, res3 = (2, 3 * k, 2), (2, 3, 2 * k)
        out.append(Case(f"all_to_all-3d-{g}-{ax}", grid, _unary("f", f"shard.all_to_all %x on @g{_ga(axes)} split_axis = 1 concat_axis = 2", _ty("tensor", in3, "i32"), _ty("tensor", res3, "i32")), _data(in3, "i32", 15)))
        if not axes:
            continue  # rooted ops and shift need a group axis
        root = [grid[a] - 1 for a in full_axes]
        root_s = f"[{', '.join(map(str, root))}]"
        root_lin = int(np.ravel_multi_index(root, [grid[a] for a in full_axes]))

        def at_root(r: int, i: int, axes: Sequence[int] = full_axes, root_lin: int = root_lin) -> bool:
            return group_index(r, grid, axes) == root_lin

        t = _ty("tensor", (2, 3), "f64")
        out.append(Case(f"broadcast-{g}-{ax}", grid, _unary("f", f"shard.broadcast %x on @g{_ga(axes)} root = {root_s}", t, t, paren=True), _data((2, 3), "f64", 8)))
        out.append(Case(f"gather-{g}-{ax}", grid, _unary("f", f"shard.gather %x on @g{_ga(axes)} gather_axis = 1 root = {root_s}", t, _ty("tensor", (2, 3 * k), "f64"), paren=True), _data((2, 3), "f64", 9), defined=at_root))
        out.append(Case(f"reduce-{g}-{ax}", grid, _unary("f", f"shard.reduce %x on @g{_ga(axes)} reduction = min root = {root_s}", _ty("tensor", (2, 3), "f32"), _ty("tensor", (2, 3), "f64"), paren=True), _data((2, 3), "f32", 10), defined=at_root))
        out.append(Case(f"scatter-{g}-{ax}", grid, _unary("f", f"shard.scatter %x on @g{_ga(axes)} scatter_axis = 0 root = {root_s}", _ty("tensor", (2 * k, 3), "f64"), t, paren=True), _data((2 * k, 3), "f64", 11)))
        m = _ty("memref", (2, 3), "i64")
        out.append(Case(f"broadcast-memref-{g}-{ax}", grid, _unary("f", f"shard.broadcast %x on @g{_ga(axes)} root = {root_s}", m, m, paren=True), _data((2, 3), "i64", 16)))
        out.append(Case(f"scatter-axis1-{g}-{ax}", grid, _unary("f", f"shard.scatter %x on @g{_ga(axes)} scatter_axis = 1 root = {root_s}", _ty("tensor", (2, 3 * k), "i64"), _ty("tensor", (2, 3), "i64"), paren=True), _data((2, 3 * k), "i64", 17)))
        first = [0] * len(full_axes)
        out.append(Case(f"scatter-root0-{g}-{ax}", grid, _unary("f", f"shard.scatter %x on @g{_ga(axes)} scatter_axis = 0 root = {first}", _ty("tensor", (2 * k, 3), "f64"), t, paren=True), _data((2 * k, 3), "f64", 18)))
        for s, off, rot in itertools.product(full_axes, (1, -1, 2), (True, False)):

            def has_source(r: int, i: int, s: int = s, off: int = off, rot: bool = rot) -> bool:
                return rot or 0 <= coords(r, grid)[s] - off < grid[s]

            out.append(Case(f"shift-{s}{off:+d}{'-rotate' if rot else ''}-{g}-{ax}", grid, _unary("f", f"shard.shift %x on @g{_ga(axes)} shift_axis = {s} offset = {off}{' rotate' if rot else ''}", t, t), _data((2, 3), "f64", 12), defined=has_source))
    return out


def p2p_cases(grid: tuple[int, ...]) -> list[Case]:
    g = "x".join(map(str, grid))
    out: list[Case] = []
    for axis in range(len(grid)):
        n = grid[axis]
        body = f"""func.func @f(%x: tensor<3xf64>) -> tensor<3xf64> {{
  %c1 = arith.constant 1 : index
  %cn = arith.constant {n} : index
  %i = shard.process_multi_index on @g axes = [{axis}] : index
  %i1 = arith.addi %i, %c1 : index
  %next = arith.remsi %i1, %cn : index
  %ip = arith.addi %i, %cn : index
  %ip1 = arith.subi %ip, %c1 : index
  %prev = arith.remsi %ip1, %cn : index
  %s = shard.send %x on @g grid_axes = [{axis}] destination = [%next] : (tensor<3xf64>, index) -> tensor<3xf64>
  %r = shard.recv %x on @g grid_axes = [{axis}] source = [%prev] : (tensor<3xf64>, index) -> tensor<3xf64>
  return %r : tensor<3xf64>
}}"""
        out.append(Case(f"send_recv-ring-{axis}-{g}", grid, body, _data((3,), "f64", 13), tags={"p2p"}))
    # Static peers: even processes send to the odd one above, which receives.
    if grid[-1] % 2 == 0:
        axis = len(grid) - 1
        body = """func.func @f(%x: tensor<4xi32>) -> tensor<4xi32> {
  %i = shard.process_multi_index on @g axes = [AXIS] : index
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %p = arith.remsi %i, %c2 : index
  %even = arith.cmpi eq, %p, %c0 : index
  %r = scf.if %even -> (tensor<4xi32>) {
    %d = arith.addi %i, %c1 : index
    %s = shard.send %x on @g grid_axes = [AXIS] destination = [%d] : (tensor<4xi32>, index) -> tensor<4xi32>
    scf.yield %x : tensor<4xi32>
  } else {
    %sr = arith.subi %i, %c1 : index
    %v = shard.recv %x on @g grid_axes = [AXIS] source = [%sr] : (tensor<4xi32>, index) -> tensor<4xi32>
    scf.yield %v : tensor<4xi32>
  }
  return %r : tensor<4xi32>
}""".replace("AXIS", str(axis)).replace("%c2 = arith.constant 2 : index", "%c2 = arith.constant 2 : index\n  %c1 = arith.constant 1 : index")
        out.append(Case(f"send_recv-pairs-{g}", grid, body, _data((4,), "i32", 14), tags={"p2p"}))
    return out


def index_cases(grid: tuple[int, ...]) -> list[Case]:
    g = "x".join(map(str, grid))
    rank = len(grid)
    idx = ", ".join(["index"] * rank)
    m = ", ".join(f"%m#{i}" for i in range(rank))
    p = ", ".join(f"%p#{i}" for i in range(rank))
    s = ", ".join(f"%s#{i}" for i in range(rank))
    rev = ", ".join(map(str, reversed(range(rank))))
    neighbours = "\n".join(
        f"  %d{a}, %u{a} = shard.neighbors_linear_indices on @g[{m}] split_axes = [{a}] : index, index"
        for a in range(rank)
    )
    nres = ", ".join(f"%d{a}, %u{a}" for a in range(rank))
    ntys = ", ".join(["index, index"] * rank)
    body = f"""func.func @f() -> ({idx}, {idx}, {idx}, index, {ntys}) {{
  %m:{rank} = shard.process_multi_index on @g : {idx}
  %p:{rank} = shard.process_multi_index on @g axes = [{rev}] : {idx}
  %s:{rank} = shard.grid_shape @g : {idx}
  %l = shard.process_linear_index on @g : index
{neighbours}
  return {m}, {p}, {s}, %l, {nres} : {idx}, {idx}, {idx}, index, {ntys}
}}"""
    out = [Case(f"process_indices-{g}", grid, body)]
    if rank == 2:
        # neighbours along both axes at once: a split over two grid axes
        out.append(Case(f"neighbors-2axes-{g}", grid, f"""func.func @f() -> (index, index) {{
  %m:2 = shard.process_multi_index on @g : index, index
  %d, %u = shard.neighbors_linear_indices on @g[%m#0, %m#1] split_axes = [1, 0] : index, index
  return %d, %u : index, index
}}"""))
    return out


def sharding_cases(grid: tuple[int, ...]) -> list[Case]:
    """shard_shape of static, uneven and haloed shardings; shardings as values."""
    g = "x".join(map(str, grid))
    n = grid[0]
    offs = [0] + list(itertools.accumulate(2 + (i % 3) for i in range(n)))
    total = offs[-1]
    body = f"""func.func @f(%h: i64) -> (index, index, index, index, index, index) {{
  %i = shard.process_multi_index on @g axes = [0] : index
  %s = shard.sharding @g split_axes = [[], [0]] sharded_dims_offsets = [{', '.join(map(str, offs))}] : !shard.sharding
  %z:2 = shard.shard_shape dims = [4, {total}] sharding = %s device = [%i] : index, index
  %hs = shard.sharding @g split_axes = [[0]] halo_sizes = [1, %h] : !shard.sharding
  %e:2 = shard.shard_shape dims = [{4 * n}, 3] sharding = %hs device = [%i] : index, index
  %es = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %q:2 = shard.shard_shape dims = [{4 * n + 1}, 5] sharding = %es device = [%i] : index, index
  return %z#0, %z#1, %e#0, %e#1, %q#0, %q#1 : index, index, index, index, index, index
}}"""
    return [Case(f"shard_shape-{g}", grid, body, lambda r: (np.int64(2),))]


def halo_cases(grid: tuple[int, ...], big: bool = False) -> list[Case]:
    """update_halo on 1-D and 2-D splits, tensors and memrefs; `big`: halos of
    megabytes, which only buffered (or non-blocking) sends get through."""
    g = "x".join(map(str, grid))
    out: list[Case] = []
    specs: list[tuple[str, str, tuple[int, ...], tuple[int, ...]]] = []
    if big:
        specs.append(("big", "[[0]]", (300, 300), (4 * 600 + 300, 600)))  # halos of 1.4 MB
    else:
        specs.append(("dim0", "[[0]]", (1, 2), (7, 3)))
        specs.append(("dim1", "[[], [0]]", (2, 1), (3, 6)))
        if len(grid) == 2:
            specs.append(("2d", "[[0], [1]]", (1, 1, 2, 1), (6, 7)))
            specs.append(("2d-rev", "[[1], [0]]", (0, 2, 1, 0), (5, 6)))
            specs.append(("2axes", "[[0, 1]]", (1, 1), (4, 2)))
    for name, sa, halos, local in specs:
        for kind in ("tensor", "memref") if not big else ("memref",):
            t = _ty(kind, local, "f64")
            body = f"""func.func @f(%x: {t}) -> {t} {{
  %r = shard.update_halo %x on @g split_axes = {sa} halo_sizes = [{', '.join(map(str, halos))}] : {t}
  return %r : {t}
}}"""

            def make(r: int, local: tuple[int, ...] = local) -> tuple[Any, ...]:
                return (np.arange(np.prod(local), dtype=np.float64).reshape(local) + 1000.0 * r,)

            out.append(Case(f"update_halo-{name}-{kind}-{g}", grid, body, make, tags={"halo"} | ({"big"} if big else set())))
    return out


def cases(grid: tuple[int, ...]) -> list[Case]:
    return [*collective_cases(grid), *p2p_cases(grid), *index_cases(grid), *sharding_cases(grid), *halo_cases(grid)]


# =========================================================================================
# Running and comparing
# =========================================================================================


def parse(text: str) -> ModuleOp:
    return LocatingParser(make_context(), text, "case.mlir").parse_module()


def lower(text: str, passes: Sequence[str] = LOWERING) -> ModuleOp:
    ctx = make_context()
    module = LocatingParser(ctx, text, "case.mlir").parse_module()
    table = all_passes()
    for name in passes:
        table[name]()().apply(ctx, module)
    module.verify()
    return module


def as_tuple(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def assert_same(case: Case, rank: int, want: Any, got: Any, what: str) -> None:
    want, got = as_tuple(want), as_tuple(got)
    assert len(want) == len(got), f"{case.id} rank {rank} {what}: {len(want)} vs {len(got)} results"
    for i, (w, y) in enumerate(zip(want, got)):
        if not case.defined(rank, i):
            continue
        w, y = np.asarray(w), np.asarray(y)
        assert w.shape == y.shape, f"{case.id} rank {rank} result {i} {what}: shape {w.shape} vs {y.shape}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(y, w, rtol=1e-6, atol=1e-6, err_msg=f"{case.id} rank {rank} result {i} {what}")
        else:
            np.testing.assert_array_equal(y, w, err_msg=f"{case.id} rank {rank} result {i} {what}")


class Runner:
    """Compiles a case three ways: shard level, lowered, lowered per rank (DLTI)."""

    def __init__(self, case: Case, world_rank: int | None = None):
        self.case = case
        self.shard = compile_module(parse(case.text()), "shard.mlir")
        self.lowered = compile_module(lower(case.text()), "lowered.mlir")
        ranks = range(case.n) if world_rank is None else [world_rank]
        self.per_rank = {r: compile_module(lower(case.text(r)), f"lowered.rank{r}.mlir") for r in ranks}

    def call(self, how: str, rank: int) -> Any:
        cm = {"shard": self.shard, "lowered": self.lowered}.get(how) or self.per_rank[rank]
        with np.errstate(all="ignore"):
            return cm.call("f", *self.case.inputs(rank))


def run_simulated_case(case: Case) -> None:
    from shardc.runtime.execute.comm import run_simulated

    runner = Runner(case)
    results = {
        how: run_simulated(case.n, lambda r, how=how: runner.call(how, r), per_rank_args=[(r,) for r in range(case.n)])
        for how in ("shard", "lowered", "dlti")
    }
    for r in range(case.n):
        assert_same(case, r, results["shard"][r], results["lowered"][r], "lowered")
        assert_same(case, r, results["shard"][r], results["dlti"][r], "lowered for its rank")


# =========================================================================================
# Tests (simulated ranks)
# =========================================================================================

GRIDS = [(4,), (2, 2), (2, 3)]
ALL = [c for grid in GRIDS for c in cases(grid)]


QUICK_EVERY = 12
"""The quick tier runs every 12th case (spread over the ops and grids); the others are slow."""


@pytest.mark.parametrize(
    "case", [c if i % QUICK_EVERY == 0 else pytest.param(c, marks=pytest.mark.slow) for i, c in enumerate(ALL)], ids=[c.id for c in ALL]
)
def test_lowered_equals_shard_level(case: Case) -> None:
    run_simulated_case(case)


@pytest.mark.slow
@pytest.mark.parametrize("grid", [(2,), (2, 2)])
def test_big_halos_do_not_deadlock(grid: tuple[int, ...]) -> None:
    for case in halo_cases(grid, big=True):
        run_simulated_case(case)


@pytest.mark.slow
def test_every_shard_op_is_executed() -> None:
    """The table covers every shard op that convert-shard-to-mpi lowers."""
    names = {op.name for c in ALL for op in parse(c.text()).walk()}
    wanted = {
        "shard.all_reduce", "shard.all_gather", "shard.reduce_scatter", "shard.all_slice",
        "shard.all_to_all", "shard.broadcast", "shard.gather", "shard.scatter", "shard.reduce",
        "shard.send", "shard.recv", "shard.shift", "shard.update_halo",
        "shard.process_multi_index", "shard.process_linear_index", "shard.grid_shape",
        "shard.neighbors_linear_indices", "shard.shard_shape", "shard.sharding",
    }
    assert wanted <= names, wanted - names
