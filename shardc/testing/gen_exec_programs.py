"""Random fully annotated programs for execution-based tests of shard-partition.

Unlike `gen_programs` (random annotations, for the propagation oracle), these programs
are meant to partition and run: every op is annotated as trunk's partition requires
(tensor operands from `shard.shard ... annotate_for_users`, each result used by one
`shard.shard` for its producer, returned values annotated for users), and the shardings
of an op agree with each other. Each op draws a sharding of its loops (grid axes assigned
to loop dimensions, sometimes taken from its first operand's layout) and its operand and
result shardings follow from its indexing maps; so a reduction loop on a split axis means
a partial result and an all_reduce, and an operand laid out differently from what the
op wants means a resharding (the planner's collectives).

What they hold: elementwise chains (linalg.generic and tosa, same shape or with a size-one
broadcast dimension), broadcasts (linalg.broadcast, generic broadcasting maps), matmuls,
batched matmuls and generic contractions, reductions of every combiner partition knows
(sum, product, max, min; for integers also and/or/xor) by linalg.generic and linalg.reduce,
with a real init (an argument or a linalg.fill) so that the lead-process init matters,
transposes, explicit reshardings to random target shardings, halos, results returned
in a random sharding. Grids are 1-D to 3-D of 2 to 8 devices; every dimension is a
multiple of each product of grid axes sizes, so every split divides evenly. Element
types: f32, sometimes i32 (exact comparison). Deterministic in the seed.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

GRIDS: tuple[tuple[int, ...], ...] = (
    (2,), (3,), (4,), (8,),
    (2, 2), (2, 3), (2, 4), (4, 2), (3, 2),
    (2, 2, 2),
)  # fmt: skip
GRIDS_1D: tuple[tuple[int, ...], ...] = tuple(g for g in GRIDS if len(g) == 1)
"""Grids mlir-opt 22.1.8's resharding handles (it asserts on more than one axis)."""

Split = tuple[tuple[int, ...], ...]

_FLOAT_COMBINERS = ("arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf")
_INT_COMBINERS = ("arith.addi", "arith.muli", "arith.maxsi", "arith.minsi", "arith.andi", "arith.ori", "arith.xori")
_FLOAT_BINARY = ("arith.addf", "arith.mulf", "arith.subf", "arith.maximumf", "arith.minimumf")
_INT_BINARY = ("arith.addi", "arith.muli", "arith.subi", "arith.maxsi", "arith.minsi", "arith.xori")


def affine_map_text(num_dims: int, exprs: Iterable[int | str]) -> str:
    """`affine_map<(d0, ..) -> (..)>`: an int is that loop (`d<i>`), a string is written
    as it is (`0`)."""
    dims = ", ".join(f"d{i}" for i in range(num_dims))
    out = ", ".join(f"d{e}" if isinstance(e, int) else e for e in exprs)
    return f"affine_map<({dims}) -> ({out})>"


def iterator_types_text(kinds: Iterable[str]) -> str:
    return ", ".join(f'"{k}"' for k in kinds)


@dataclass
class ExecValue:
    """A tensor value as the program's ops see it (the producer's annotation)."""

    name: str
    shape: tuple[int, ...]
    split: Split
    halo: tuple[int, ...] = ()
    uses: int = 0


@dataclass
class ExecProgramBuilder:
    rng: random.Random
    grid_shape: tuple[int, ...]
    elem: str = "f32"
    max_dim_factor: int = 2
    halos: bool = True
    lines: list[str] = field(default_factory=list[str])
    values: list[ExecValue] = field(default_factory=list[ExecValue])
    args: list[tuple[str, tuple[int, ...]]] = field(default_factory=list[tuple[str, tuple[int, ...]]])
    shardings: dict[tuple[Split, tuple[int, ...]], str] = field(default_factory=dict[tuple[Split, tuple[int, ...]], str])
    counter: int = 0

    # ---- basics ---------------------------------------------------------------------

    @property
    def is_float(self) -> bool:
        return self.elem.startswith("f")

    @property
    def unit(self) -> int:
        """Every dimension is a multiple of this: the lcm of the sizes of all groups of
        grid axes, so any split divides evenly."""
        products = {
            math.prod(c) for r in range(1, len(self.grid_shape) + 1) for c in itertools.combinations(self.grid_shape, r)
        }
        return math.lcm(*products)

    def dim(self) -> int:
        return self.unit * self.rng.randint(1, self.max_dim_factor)

    def type(self, shape: tuple[int, ...]) -> str:
        return "tensor<" + "".join(f"{d}x" for d in shape) + self.elem + ">"

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"%{prefix}{self.counter}"

    def emit(self, *lines: str) -> None:
        self.lines.extend(lines)

    # ---- shardings ------------------------------------------------------------------

    def sharding(self, split: Split, halo: tuple[int, ...] = ()) -> str:
        key = (split, halo)
        if key not in self.shardings:
            name = self.fresh("s")
            axes = ", ".join("[" + ", ".join(map(str, a)) + "]" for a in split)
            extra = f" halo_sizes = [{', '.join(map(str, halo))}]" if halo else ""
            self.emit(f"{name} = shard.sharding @grid split_axes = [{axes}]{extra} : !shard.sharding")
            self.shardings[key] = name
        return self.shardings[key]

    def loop_assignment(self, num_loops: int, eligible: list[int] | None = None, p: float = 0.55) -> list[tuple[int, ...]]:
        """Grid axes per loop dimension: each axis, in random order, to a random eligible
        loop with probability p."""
        assign: list[list[int]] = [[] for _ in range(num_loops)]
        loops = list(range(num_loops)) if eligible is None else eligible
        axes = list(range(len(self.grid_shape)))
        self.rng.shuffle(axes)
        for axis in axes:
            if loops and self.rng.random() < p:
                assign[self.rng.choice(loops)].append(axis)
        return [tuple(a) for a in assign]

    def natural_or_random(self, x: ExecValue, dims: list[int], num_loops: int, eligible: list[int] | None = None) -> list[tuple[int, ...]]:
        """Half the time the loops take operand `x`'s layout (x indexed by loops `dims`), so
        that no resharding is needed; else a random assignment."""
        allowed = set(range(num_loops) if eligible is None else eligible)
        if self.rng.random() < 0.5:
            assign: list[tuple[int, ...]] = [() for _ in range(num_loops)]
            for d, loop in enumerate(dims):
                if d < len(x.split) and loop in allowed:
                    assign[loop] = x.split[d]
            return assign
        return self.loop_assignment(num_loops, eligible)

    @staticmethod
    def split_of(assign: list[tuple[int, ...]], dims: list[int] | tuple[int, ...]) -> Split:
        return tuple(assign[d] for d in dims)

    def random_split(self, shape: tuple[int, ...]) -> Split:
        """A random layout that splits only dimensions that divide evenly (not the size-one
        dimensions of a broadcast operand)."""
        eligible = [d for d, s in enumerate(shape) if s % self.unit == 0]
        return tuple(self.loop_assignment(len(shape), eligible))

    def random_halo(self, split: Split) -> tuple[int, ...]:
        n = sum(1 for a in split if a)
        return tuple(self.rng.randint(0, 2) for _ in range(2 * n)) if n else ()

    # ---- values ---------------------------------------------------------------------

    def use(self, x: ExecValue, split: Split, halo: tuple[int, ...] = ()) -> str:
        """`x` annotated for its user with `split`: a resharding when it differs."""
        x.uses += 1
        name = self.fresh("u")
        self.emit(f"{name} = shard.shard {x.name} to {self.sharding(split, halo)} annotate_for_users : {self.type(x.shape)}")
        return name

    def produced(self, raw: str, shape: tuple[int, ...], split: Split, halo: tuple[int, ...] = ()) -> ExecValue:
        name = self.fresh("a")
        self.emit(f"{name} = shard.shard {raw} to {self.sharding(split, halo)} : {self.type(shape)}")
        value = ExecValue(name, shape, split, halo)
        self.values.append(value)
        return value

    def new_arg(self, shape: tuple[int, ...], split: Split | None = None, keep: bool = True) -> ExecValue:
        raw = f"%arg{len(self.args)}"
        self.args.append((raw, shape))
        split = self.random_split(shape) if split is None else split
        halo = self.random_halo(split) if self.halos and self.rng.random() < 0.08 else ()
        value = self.produced(raw, shape, split, halo)
        if not keep:
            self.values.remove(value)
        return value

    def new_constant(self, shape: tuple[int, ...]) -> ExecValue:
        raw = self.fresh("c")
        literal = "1.500000e+00" if self.is_float else "3"
        self.emit(f"{raw} = arith.constant dense<{literal}> : {self.type(shape)}")
        return self.produced(raw, shape, self.random_split(shape))

    def leaf(self, shape: tuple[int, ...]) -> ExecValue:
        return self.new_constant(shape) if self.rng.random() < 0.1 else self.new_arg(shape)

    def pick(self, rank: int | None = None, shape: tuple[int, ...] | None = None) -> ExecValue:
        """A value of the wanted rank or shape: mostly a recent one, else a new leaf."""
        cands = [v for v in self.values if (rank is None or len(v.shape) == rank) and (shape is None or v.shape == shape)]
        if cands and self.rng.random() < 0.8:
            recent = cands[-3:]
            return self.rng.choice(recent if self.rng.random() < 0.7 else cands)
        if shape is None:
            shape = tuple(self.dim() for _ in range(rank if rank is not None else self.rng.randint(1, 3)))
        return self.leaf(shape)

    def empty(self, shape: tuple[int, ...], split: Split, halo: tuple[int, ...] = ()) -> str:
        """An annotated tensor.empty for an op's outs, in the op's layout."""
        raw = self.fresh("e")
        self.emit(f"{raw} = tensor.empty() : {self.type(shape)}")
        value = self.produced(raw, shape, split, halo)
        self.values.remove(value)
        return self.use(value, split, halo)

    def init(self, shape: tuple[int, ...], split: Split) -> str:
        """A reduction's init: an argument (any values) or a linalg.fill of a constant."""
        if self.rng.random() < 0.5:
            arg = self.new_arg(shape, split if self.rng.random() < 0.6 else None, keep=False)
            return self.use(arg, split)
        e = self.empty(shape, split)
        c = self.fresh("k")
        literal = self.rng.choice(("0.000000e+00", "1.000000e+00", "-2.500000e+00")) if self.is_float else str(self.rng.choice((0, 1, -2)))
        self.emit(f"{c} = arith.constant {literal} : {self.elem}")
        raw = self.fresh("fill")
        t = self.type(shape)
        self.emit(f"{raw} = linalg.fill ins({c} : {self.elem}) outs({e} : {t}) -> {t}")
        value = self.produced(raw, shape, split)
        self.values.remove(value)
        return self.use(value, split)

    # ---- ops ------------------------------------------------------------------------

    def op_generic_elementwise(self) -> None:
        x = self.pick()
        n = len(x.shape)
        y = self.pick(shape=x.shape)
        assign = self.natural_or_random(x, list(range(n)), n)
        split = self.split_of(assign, range(n))
        a, b = self.use(x, split), self.use(y, split)
        e = self.empty(x.shape, split)
        combiner = self.rng.choice(_FLOAT_BINARY if self.is_float else _INT_BINARY)
        self.generic_binary(a, b, e, x.shape, split, combiner)

    def generic_binary(self, a: str, b: str, e: str, shape: tuple[int, ...], split: Split, combiner: str, halo: tuple[int, ...] = ()) -> ExecValue:
        n = len(shape)
        ident = affine_map_text(n, range(n))
        t = self.type(shape)
        p, q, o, r, raw = self.fresh("in"), self.fresh("in"), self.fresh("out"), self.fresh("x"), self.fresh("g")
        self.emit(
            f"{raw} = linalg.generic {{indexing_maps = [{ident}, {ident}, {ident}], iterator_types = [{iterator_types_text(['parallel'] * n)}]}} "
            f"ins({a}, {b} : {t}, {t}) outs({e} : {t}) {{",
            f"^bb0({p}: {self.elem}, {q}: {self.elem}, {o}: {self.elem}):",
            f"  {r} = {combiner} {p}, {q} : {self.elem}",
            f"  linalg.yield {r} : {self.elem}",
            f"}} -> {t}",
        )
        return self.produced(raw, shape, split, halo)

    def op_tosa_elementwise(self) -> None:
        x = self.pick()
        n = len(x.shape)
        t = self.type(x.shape)
        raw = self.fresh("t")
        if self.rng.random() < 0.4:
            unary = ("abs", "tanh", "sigmoid", "floor", "ceil") if self.is_float else ("abs",)
            split = self.split_of(self.natural_or_random(x, list(range(n)), n), range(n))
            a = self.use(x, split)
            self.emit(f"{raw} = tosa.{self.rng.choice(unary)} {a} : ({t}) -> {t}")
            self.produced(raw, x.shape, split)
            return
        op = self.rng.choice(("add", "sub", "maximum", "minimum"))
        if self.rng.random() < 0.3:
            # Broadcast: the second operand has size one in a dimension, never split.
            k = self.rng.randrange(n)
            eligible = [d for d in range(n) if d != k]
            split = self.split_of(self.natural_or_random(x, list(range(n)), n, eligible), range(n))
            small_shape = tuple(1 if d == k else s for d, s in enumerate(x.shape))
            y = self.new_arg(small_shape, keep=False)
            a, b = self.use(x, split), self.use(y, split)
            if self.rng.random() < 0.5:
                a, b, ta, tb = b, a, self.type(small_shape), t
            else:
                ta, tb = t, self.type(small_shape)
            self.emit(f"{raw} = tosa.{op} {a}, {b} : ({ta}, {tb}) -> {t}")
        else:
            y = self.pick(shape=x.shape)
            split = self.split_of(self.natural_or_random(x, list(range(n)), n), range(n))
            a, b = self.use(x, split), self.use(y, split)
            self.emit(f"{raw} = tosa.{op} {a}, {b} : ({t}, {t}) -> {t}")
        self.produced(raw, x.shape, split)

    def op_broadcast(self) -> None:
        """linalg.broadcast, or a generic adding a lower-rank operand along a new dim."""
        x = self.pick(rank=self.rng.randint(1, 2))
        n = len(x.shape) + 1
        new = self.rng.randrange(n)
        kept = [d for d in range(n) if d != new]
        out = list(x.shape)
        out.insert(new, self.dim())
        shape = tuple(out)
        assign = self.natural_or_random(x, kept, n)
        split = self.split_of(assign, range(n))
        a = self.use(x, self.split_of(assign, kept))
        raw = self.fresh("b")
        t = self.type(shape)
        if self.rng.random() < 0.5:
            e = self.empty(shape, split)
            self.emit(f"{raw} = linalg.broadcast ins({a} : {self.type(x.shape)}) outs({e} : {t}) dimensions = [{new}]")
            self.produced(raw, shape, split)
            return
        y = self.pick(shape=shape)
        b = self.use(y, split)
        e = self.empty(shape, split)
        p, q, o, r = self.fresh("in"), self.fresh("in"), self.fresh("out"), self.fresh("x")
        add = "arith.addf" if self.is_float else "arith.addi"
        self.emit(
            f"{raw} = linalg.generic {{indexing_maps = [{affine_map_text(n, kept)}, {affine_map_text(n, range(n))}, {affine_map_text(n, range(n))}], "
            f"iterator_types = [{iterator_types_text(['parallel'] * n)}]}} ins({a}, {b} : {self.type(x.shape)}, {t}) outs({e} : {t}) {{",
            f"^bb0({p}: {self.elem}, {q}: {self.elem}, {o}: {self.elem}):",
            f"  {r} = {add} {p}, {q} : {self.elem}",
            f"  linalg.yield {r} : {self.elem}",
            f"}} -> {t}",
        )
        self.produced(raw, shape, split)

    def op_matmul(self) -> None:
        """linalg.matmul (loops m, n, k) or linalg.batch_matmul (b, m, n, k)."""
        batched = self.rng.random() < 0.35
        if batched:
            a_val = self.pick(rank=3)
            bsz, m, k = a_val.shape
            n = self.dim()
            b_val = self.pick(shape=(bsz, k, n))
            a_dims, b_dims, c_dims, loops = [0, 1, 3], [0, 3, 2], [0, 1, 2], 4
            out = (bsz, m, n)
        else:
            a_val = self.pick(rank=2)
            m, k = a_val.shape
            n = self.dim()
            b_val = self.pick(shape=(k, n))
            a_dims, b_dims, c_dims, loops = [0, 2], [2, 1], [0, 1], 3
            out = (m, n)
        assign = self.natural_or_random(a_val, a_dims, loops)
        a = self.use(a_val, self.split_of(assign, a_dims))
        b = self.use(b_val, self.split_of(assign, b_dims))
        split = self.split_of(assign, c_dims)
        c = self.init(out, split)
        raw = self.fresh("mm")
        name = "linalg.batch_matmul" if batched else "linalg.matmul"
        self.emit(
            f"{raw} = {name} ins({a}, {b} : {self.type(a_val.shape)}, {self.type(b_val.shape)}) "
            f"outs({c} : {self.type(out)}) -> {self.type(out)}"
        )
        self.produced(raw, out, split)

    def op_contraction(self) -> None:
        """A generic contraction `mk,nk->mn` or `bkm,bkn->bmn` (maps that are not a matmul's)."""
        if self.rng.random() < 0.5:
            x = self.pick(rank=2)
            m, k = x.shape
            n = self.dim()
            y = self.pick(shape=(n, k))
            loops, xd, yd, od = 3, [0, 2], [1, 2], [0, 1]
            kinds = ["parallel", "parallel", "reduction"]
            out = (m, n)
        else:
            x = self.pick(rank=3)
            b, k, m = x.shape
            n = self.dim()
            y = self.pick(shape=(b, k, n))
            loops, xd, yd, od = 4, [0, 3, 1], [0, 3, 2], [0, 1, 2]
            kinds = ["parallel", "parallel", "parallel", "reduction"]
            out = (b, m, n)
        assign = self.natural_or_random(x, xd, loops)
        a = self.use(x, self.split_of(assign, xd))
        c = self.use(y, self.split_of(assign, yd))
        split = self.split_of(assign, od)
        init = self.init(out, split)
        mul, add = ("arith.mulf", "arith.addf") if self.is_float else ("arith.muli", "arith.addi")
        raw, p, q, o, r, s = (self.fresh(h) for h in ("ct", "in", "in", "out", "x", "x"))
        self.emit(
            f"{raw} = linalg.generic {{indexing_maps = [{affine_map_text(loops, xd)}, {affine_map_text(loops, yd)}, {affine_map_text(loops, od)}], "
            f"iterator_types = [{iterator_types_text(kinds)}]}} ins({a}, {c} : {self.type(x.shape)}, {self.type(y.shape)}) "
            f"outs({init} : {self.type(out)}) {{",
            f"^bb0({p}: {self.elem}, {q}: {self.elem}, {o}: {self.elem}):",
            f"  {r} = {mul} {p}, {q} : {self.elem}",
            f"  {s} = {add} {o}, {r} : {self.elem}",
            f"  linalg.yield {s} : {self.elem}",
            f"}} -> {self.type(out)}",
        )
        self.produced(raw, out, split)

    def op_reduction(self) -> None:
        """A reduction over one or two dimensions, by linalg.generic or linalg.reduce."""
        combiner = self.rng.choice(_FLOAT_COMBINERS if self.is_float else _INT_COMBINERS)
        rank = self.rng.randint(2, 3)
        if combiner in ("arith.mulf", "arith.muli"):
            # Products of fresh inputs only: products of computed values overflow.
            x = self.new_arg(tuple(self.dim() for _ in range(rank)), keep=False)
        else:
            x = self.pick(rank=rank)
        n = len(x.shape)
        reduced = sorted(self.rng.sample(range(n), self.rng.randint(1, n - 1)))
        kept = [d for d in range(n) if d not in reduced]
        out = tuple(x.shape[d] for d in kept)
        assign = self.natural_or_random(x, list(range(n)), n)
        a = self.use(x, self.split_of(assign, range(n)))
        split = self.split_of(assign, kept)
        init = self.init(out, split)
        raw, p, o, r = self.fresh("red"), self.fresh("in"), self.fresh("out"), self.fresh("x")
        body = [f"  {r} = {combiner} {p}, {o} : {self.elem}", f"  linalg.yield {r} : {self.elem}"]
        if self.rng.random() < 0.4:
            self.emit(
                f"{raw} = linalg.reduce ins({a} : {self.type(x.shape)}) outs({init} : {self.type(out)}) "
                f"dimensions = [{', '.join(map(str, reduced))}]",
                f"  ({p}: {self.elem}, {o}: {self.elem}) {{",
                *body,
                "  }",
            )
        else:
            kinds = ["reduction" if d in reduced else "parallel" for d in range(n)]
            self.emit(
                f"{raw} = linalg.generic {{indexing_maps = [{affine_map_text(n, range(n))}, {affine_map_text(n, kept)}], "
                f"iterator_types = [{iterator_types_text(kinds)}]}} ins({a} : {self.type(x.shape)}) outs({init} : {self.type(out)}) {{",
                f"^bb0({p}: {self.elem}, {o}: {self.elem}):",
                *body,
                f"}} -> {self.type(out)}",
            )
        self.produced(raw, out, split)

    def op_transpose(self) -> None:
        x = self.pick(rank=self.rng.randint(2, 3))
        n = len(x.shape)
        perm = list(range(n))
        while perm == sorted(perm):
            self.rng.shuffle(perm)
        out = tuple(x.shape[p] for p in perm)
        # Loops are the output's dims; input dim d is loop perm.index(d).
        in_dims = [perm.index(d) for d in range(n)]
        assign = self.natural_or_random(x, in_dims, n)
        a = self.use(x, self.split_of(assign, in_dims))
        split = self.split_of(assign, range(n))
        e = self.empty(out, split)
        raw = self.fresh("tr")
        self.emit(
            f"{raw} = linalg.transpose ins({a} : {self.type(x.shape)}) outs({e} : {self.type(out)}) "
            f"permutation = [{', '.join(map(str, perm))}]"
        )
        self.produced(raw, out, split)

    def op_reshard(self) -> None:
        """An explicit resharding to a random layout (halos sometimes), consumed by an
        elementwise op in that layout: the result keeps it."""
        x = self.pick()
        split = self.random_split(x.shape)
        halo = self.random_halo(split) if self.halos and self.rng.random() < 0.35 else ()
        a = self.use(x, split, halo)
        e = self.empty(x.shape, split, halo)
        combiner = "arith.addf" if self.is_float else "arith.addi"
        self.generic_binary(a, a, e, x.shape, split, combiner, halo)

    OPS: tuple[tuple[str, int], ...] = (
        ("op_generic_elementwise", 3),
        ("op_tosa_elementwise", 3),
        ("op_broadcast", 2),
        ("op_matmul", 3),
        ("op_contraction", 2),
        ("op_reduction", 4),
        ("op_transpose", 2),
        ("op_reshard", 3),
    )

    def step(self) -> None:
        names, weights = zip(*self.OPS)
        getattr(self, self.rng.choices(names, weights)[0])()

    def function(self, name: str, num_ops: int) -> str:
        for _ in range(num_ops):
            self.step()
        unused = [v for v in self.values if v.uses == 0]
        pool = unused if unused else self.values
        results = self.rng.sample(pool, min(len(pool), self.rng.randint(1, 3)))
        returned: list[tuple[str, tuple[int, ...]]] = []
        for v in results:
            split = v.split if self.rng.random() < 0.5 else self.random_split(v.shape)
            returned.append((self.use(v, split), v.shape))
        arg_list = ", ".join(f"{a}: {self.type(s)}" for a, s in self.args)
        types = ", ".join(self.type(s) for _, s in returned)
        body = "\n    ".join(self.lines)
        ret = f"return {', '.join(n for n, _ in returned)} : {types}"
        return f"  func.func @{name}({arg_list}) -> ({types}) {{\n    {body}\n    {ret}\n  }}"


def generate_exec_program(
    seed: int,
    num_ops: int | None = None,
    grids: tuple[tuple[int, ...], ...] = GRIDS,
    halos: bool = True,
) -> str:
    """One random fully annotated module with a function @f; deterministic in `seed`.
    `grids` are the grid shapes to draw from; `halos=False` leaves halos out."""
    rng = random.Random(seed)
    grid = rng.choice(grids)
    elem = "i32" if rng.random() < 0.2 else "f32"
    factor = 2 if math.prod(grid) <= 4 else 1
    builder = ExecProgramBuilder(rng, grid, elem, max_dim_factor=factor, halos=halos)
    body = builder.function("f", num_ops if num_ops is not None else rng.randint(2, 6))
    return f"module {{\n  shard.grid @grid(shape = {'x'.join(map(str, grid))})\n{body}\n}}\n"


def count_ops(text: str) -> int:
    """Ops of a generated module (one per `=` line, plus return, func and grid)."""
    return sum(1 for line in text.splitlines() if " = " in line and not line.lstrip().startswith("^")) + 3
