"""Random annotated programs for the sharding-propagation oracle test and benchmark.

Each program is one module: a `shard.grid` (1-D to 3-D) and a function whose body is a
chain or DAG of linalg.generic (elementwise, reductions, transposes), linalg named ops,
tosa elementwise ops (with size-one broadcast dimensions), tensor.empty/splat and
arith.constant, with random `shard.shard` annotations for producers and for users. The
text is what mlir-opt 22.1.8 and shardc both parse.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

_DIMS = (4, 8)
_TRAVERSALS = ("forward", "backward", "forward-backward", "backward-forward")


def _type(shape: tuple[int, ...]) -> str:
    return "tensor<" + "x".join(map(str, shape)) + "xf32>"


def _parallel(n: int) -> str:
    return ", ".join(['"parallel"'] * n)


def _map(num_dims: int, dims: list[int] | tuple[int, ...]) -> str:
    args = ", ".join(f"d{i}" for i in range(num_dims))
    return f"affine_map<({args}) -> ({', '.join(f'd{d}' for d in dims)})>"


@dataclass
class _Value:
    name: str
    shape: tuple[int, ...]


@dataclass
class ProgramBuilder:
    rng: random.Random
    annotate_p: float = 0.3
    grid_shape: tuple[int, ...] = (2,)
    lines: list[str] = field(default_factory=list[str])
    values: list[_Value] = field(default_factory=list[_Value])
    args: list[_Value] = field(default_factory=list[_Value])
    counter: int = 0

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"%{prefix}{self.counter}"

    # ---- annotations ----------------------------------------------------------------

    def random_split_axes(self, rank: int) -> list[list[int]]:
        axes = list(range(len(self.grid_shape)))
        self.rng.shuffle(axes)
        split: list[list[int]] = [[] for _ in range(rank)]
        for axis in axes:
            if self.rng.random() < 0.6:
                split[self.rng.randrange(rank)].append(axis)
        while len(split) > 1 and not split[-1] and self.rng.random() < 0.7:
            split.pop()
        return split

    def sharding(self, rank: int) -> str:
        split = self.random_split_axes(rank)
        text = ", ".join("[" + ", ".join(map(str, s)) + "]" for s in split)
        extra = ""
        split_dims = sum(1 for s in split if s)
        if split_dims and self.rng.random() < 0.1:
            halos = ", ".join(str(self.rng.randrange(3)) for _ in range(2 * split_dims))
            extra = f" halo_sizes = [{halos}]"
        name = self.fresh("s")
        self.lines.append(f"{name} = shard.sharding @grid split_axes = [{text}]{extra} : !shard.sharding")
        return name

    def annotate(self, value: _Value, for_users: bool) -> _Value:
        sharding = self.sharding(len(value.shape))
        name = self.fresh("a")
        attr = " annotate_for_users" if for_users else ""
        self.lines.append(f"{name} = shard.shard {value.name} to {sharding}{attr} : {_type(value.shape)}")
        return _Value(name, value.shape)

    def produced(self, value: _Value) -> _Value:
        """Maybe annotate a new value for its producer; make it available."""
        if self.rng.random() < self.annotate_p:
            value = self.annotate(value, for_users=False)
        self.values.append(value)
        return value

    def use(self, value: _Value) -> _Value:
        """Maybe annotate an operand for its user."""
        if self.rng.random() < self.annotate_p * 0.6:
            return self.annotate(value, for_users=True)
        return value

    # ---- values ---------------------------------------------------------------------

    def pick(self, shape: tuple[int, ...] | None = None, rank: int | None = None) -> _Value:
        candidates = [
            v
            for v in self.values
            if (shape is None or v.shape == shape) and (rank is None or len(v.shape) == rank)
        ]
        recent = candidates[-4:]
        if candidates and self.rng.random() < 0.85:
            return self.rng.choice(recent if self.rng.random() < 0.7 else candidates)
        if shape is None:
            shape = tuple(self.rng.choice(_DIMS) for _ in range(rank or self.rng.randint(1, 3)))
        return self.new_leaf(shape)

    def new_leaf(self, shape: tuple[int, ...]) -> _Value:
        kind = self.rng.random()
        if kind < 0.15:
            name = self.fresh("c")
            self.lines.append(f"{name} = arith.constant dense<1.000000e+00> : {_type(shape)}")
            return self.produced(_Value(name, shape))
        if kind < 0.22:
            scalar = self.scalar()
            name = self.fresh("sp")
            self.lines.append(f"{name} = tensor.splat {scalar} : {_type(shape)}")
            return self.produced(_Value(name, shape))
        arg = _Value(f"%arg{len(self.args)}", shape)
        self.args.append(arg)
        return self.produced(arg)

    def scalar(self) -> str:
        name = self.fresh("f")
        self.lines.append(f"{name} = arith.constant 2.000000e+00 : f32")
        return name

    def empty(self, shape: tuple[int, ...]) -> _Value:
        name = self.fresh("e")
        self.lines.append(f"{name} = tensor.empty() : {_type(shape)}")
        value = _Value(name, shape)
        if self.rng.random() < self.annotate_p * 0.5:
            value = self.annotate(value, for_users=False)
        return value

    # ---- ops ------------------------------------------------------------------------

    def op_tosa_unary(self) -> None:
        x = self.use(self.pick())
        op = self.rng.choice(("abs", "exp", "tanh", "floor", "sigmoid", "ceil", "log"))
        name = self.fresh()
        t = _type(x.shape)
        self.lines.append(f"{name} = tosa.{op} {x.name} : ({t}) -> {t}")
        self.produced(_Value(name, x.shape))

    def op_tosa_binary(self) -> None:
        x = self.use(self.pick())
        if self.rng.random() < 0.25:
            # Broadcast: the second operand has size one in some dimension.
            dim = self.rng.randrange(len(x.shape))
            shape = tuple(1 if i == dim else s for i, s in enumerate(x.shape))
            y = self.use(self.new_leaf(shape))
        else:
            y = self.use(self.pick(shape=x.shape))
        if self.rng.random() < 0.5:
            x, y = y, x
        out = tuple(max(a, b) for a, b in zip(x.shape, y.shape))
        op = self.rng.choice(("add", "sub", "maximum", "minimum"))
        name = self.fresh()
        self.lines.append(
            f"{name} = tosa.{op} {x.name}, {y.name} : ({_type(x.shape)}, {_type(y.shape)}) "
            f"-> {_type(out)}"
        )
        self.produced(_Value(name, out))

    def op_generic_elementwise(self) -> None:
        x = self.use(self.pick())
        y = self.use(self.pick(shape=x.shape))
        e = self.use(self.empty(x.shape))
        n = len(x.shape)
        ident = _map(n, range(n))
        t = _type(x.shape)
        a, b, o, r, name = self.fresh("in"), self.fresh("in"), self.fresh("out"), self.fresh("x"), self.fresh()
        combiner = self.rng.choice(("arith.addf", "arith.mulf", "arith.subf"))
        self.lines += [
            f"{name} = linalg.generic {{indexing_maps = [{ident}, {ident}, {ident}], "
            f"iterator_types = [{_parallel(n)}]}} "
            f"ins({x.name}, {y.name} : {t}, {t}) outs({e.name} : {t}) {{",
            f"^bb0({a}: f32, {b}: f32, {o}: f32):",
            f"  {r} = {combiner} {a}, {b} : f32",
            f"  linalg.yield {r} : f32",
            f"}} -> {t}",
        ]
        self.produced(_Value(name, x.shape))

    def op_generic_reduction(self) -> None:
        x = self.use(self.pick(rank=self.rng.randint(2, 3)))
        n = len(x.shape)
        dim = self.rng.randrange(n)
        kept = [d for d in range(n) if d != dim]
        out = tuple(x.shape[d] for d in kept)
        e = self.use(self.empty(out))
        a, o, r, name = self.fresh("in"), self.fresh("out"), self.fresh("x"), self.fresh()
        iters = ", ".join('"reduction"' if d == dim else '"parallel"' for d in range(n))
        combiner = self.rng.choice(("arith.addf", "arith.maximumf", "arith.mulf"))
        self.lines += [
            f"{name} = linalg.generic {{indexing_maps = [{_map(n, range(n))}, {_map(n, kept)}], "
            f"iterator_types = [{iters}]}} "
            f"ins({x.name} : {_type(x.shape)}) outs({e.name} : {_type(out)}) {{",
            f"^bb0({a}: f32, {o}: f32):",
            f"  {r} = {combiner} {a}, {o} : f32",
            f"  linalg.yield {r} : f32",
            f"}} -> {_type(out)}",
        ]
        self.produced(_Value(name, out))

    def op_generic_transpose(self) -> None:
        x = self.use(self.pick(rank=self.rng.randint(2, 3)))
        n = len(x.shape)
        perm = list(range(n))
        self.rng.shuffle(perm)
        out = tuple(x.shape[p] for p in perm)
        e = self.use(self.empty(out))
        inverse = [perm.index(d) for d in range(n)]
        a, o, name = self.fresh("in"), self.fresh("out"), self.fresh()
        self.lines += [
            f"{name} = linalg.generic {{indexing_maps = [{_map(n, inverse)}, {_map(n, range(n))}], "
            f"iterator_types = [{_parallel(n)}]}} "
            f"ins({x.name} : {_type(x.shape)}) outs({e.name} : {_type(out)}) {{",
            f"^bb0({a}: f32, {o}: f32):",
            f"  linalg.yield {a} : f32",
            f"}} -> {_type(out)}",
        ]
        self.produced(_Value(name, out))

    def op_matmul(self) -> None:
        a = self.use(self.pick(rank=2))
        k = a.shape[1]
        n = self.rng.choice(_DIMS)
        b = self.use(self.pick(shape=(k, n)))
        e = self.use(self.empty((a.shape[0], n)))
        name = self.fresh()
        t = _type((a.shape[0], n))
        self.lines.append(
            f"{name} = linalg.matmul ins({a.name}, {b.name} : {_type(a.shape)}, {_type(b.shape)}) "
            f"outs({e.name} : {t}) -> {t}"
        )
        self.produced(_Value(name, (a.shape[0], n)))

    def op_named_elementwise(self) -> None:
        x = self.use(self.pick())
        y = self.use(self.pick(shape=x.shape))
        e = self.use(self.empty(x.shape))
        op = self.rng.choice(("add", "mul", "sub", "max"))
        name = self.fresh()
        t = _type(x.shape)
        self.lines.append(
            f"{name} = linalg.{op} ins({x.name}, {y.name} : {t}, {t}) outs({e.name} : {t}) -> {t}"
        )
        self.produced(_Value(name, x.shape))

    def op_transpose(self) -> None:
        x = self.use(self.pick(rank=self.rng.randint(2, 3)))
        perm = list(range(len(x.shape)))
        self.rng.shuffle(perm)
        out = tuple(x.shape[p] for p in perm)
        e = self.use(self.empty(out))
        name = self.fresh()
        self.lines.append(
            f"{name} = linalg.transpose ins({x.name} : {_type(x.shape)}) "
            f"outs({e.name} : {_type(out)}) permutation = [{', '.join(map(str, perm))}]"
        )
        self.produced(_Value(name, out))

    def op_fill(self) -> None:
        shape = tuple(self.rng.choice(_DIMS) for _ in range(self.rng.randint(1, 3)))
        scalar = self.scalar()
        e = self.use(self.empty(shape))
        name = self.fresh()
        self.lines.append(
            f"{name} = linalg.fill ins({scalar} : f32) outs({e.name} : {_type(shape)}) -> {_type(shape)}"
        )
        self.produced(_Value(name, shape))

    OPS = (
        ("op_tosa_unary", 3),
        ("op_tosa_binary", 3),
        ("op_generic_elementwise", 3),
        ("op_generic_reduction", 2),
        ("op_generic_transpose", 1),
        ("op_matmul", 2),
        ("op_named_elementwise", 2),
        ("op_transpose", 1),
        ("op_fill", 1),
    )

    def step(self) -> None:
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        getattr(self, self.rng.choices(names, weights)[0])()

    def function(self, name: str, num_ops: int) -> str:
        for _ in range(num_ops):
            self.step()
        results = self.values[-self.rng.randint(1, 2) :] if self.values else []
        arg_list = ", ".join(f"{a.name}: {_type(a.shape)}" for a in self.args)
        result_types = ", ".join(_type(v.shape) for v in results)
        body = "\n    ".join(self.lines)
        ret = (
            f"return {', '.join(v.name for v in results)} : {result_types}"
            if results
            else "return"
        )
        return (
            f"  func.func @{name}({arg_list}) -> ({result_types}) {{\n    {body}\n    {ret}\n  }}"
        )


def generate_program(seed: int, num_ops: int | None = None) -> str:
    """One random annotated module; deterministic in `seed`."""
    rng = random.Random(seed)
    grid_rank = rng.randint(1, 3)
    grid_shape = tuple(rng.choice((2, 3, 4)) for _ in range(grid_rank))
    builder = ProgramBuilder(rng, annotate_p=rng.choice((0.15, 0.3, 0.5)), grid_shape=grid_shape)
    body = builder.function("f", num_ops if num_ops is not None else rng.randint(2, 8))
    grid = "x".join(map(str, grid_shape))
    return f"module {{\n  shard.grid @grid(shape = {grid})\n{body}\n}}\n"


def traversal_for(seed: int) -> str:
    return _TRAVERSALS[seed % len(_TRAVERSALS)]


def generate_chain(num_ops: int, seed: int = 0) -> str:
    """A long chain of linalg ops on one 2-D value, annotated once at the start (for the
    benchmark)."""
    rng = random.Random(seed)
    lines = [
        "%s0 = shard.sharding @grid split_axes = [[0], [1]] : !shard.sharding",
        "%v0 = shard.shard %arg0 to %s0 : tensor<8x8xf32>",
    ]
    ident = _map(2, (0, 1))
    prev = "%v0"
    for i in range(1, num_ops + 1):
        e, v = f"%e{i}", f"%v{i}"
        lines.append(f"{e} = tensor.empty() : tensor<8x8xf32>")
        if rng.random() < 0.5:
            lines.append(
                f"{v} = linalg.add ins({prev}, {prev} : tensor<8x8xf32>, tensor<8x8xf32>) "
                f"outs({e} : tensor<8x8xf32>) -> tensor<8x8xf32>"
            )
        else:
            lines += [
                f"{v} = linalg.generic {{indexing_maps = [{ident}, {ident}], "
                f'iterator_types = ["parallel", "parallel"]}} '
                f"ins({prev} : tensor<8x8xf32>) outs({e} : tensor<8x8xf32>) {{",
                f"^bb0(%in{i}: f32, %out{i}: f32):",
                f"  %x{i} = arith.mulf %in{i}, %in{i} : f32",
                f"  linalg.yield %x{i} : f32",
                "} -> tensor<8x8xf32>",
            ]
        prev = v
    body = "\n    ".join(lines)
    return (
        "module {\n  shard.grid @grid(shape = 2x2)\n"
        f"  func.func @chain(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {{\n    {body}\n"
        f"    return {prev} : tensor<8x8xf32>\n  }}\n}}\n"
    )
