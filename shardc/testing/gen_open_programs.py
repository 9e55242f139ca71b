"""Random programs outside upstream's preconditions, for proof by execution of the whole
pipeline (sharding-propagation, shard-partition, the MPI lowering).

Upstream partitions only what is fully annotated and propagates only through values with
one user. These programs are written the way people write them: values used several
times (arguments and intermediates, returned twice or next to their users), arguments
without a sharding, annotations that disagree (users of one value asking for different
shardings, the operands of one op split differently), reshapes, transposes, gathers
(an embedding lookup: a linalg.generic reading a captured table with `tensor.extract` at
indices from an integer operand), multi-result generics (max and argmax), matmuls,
batched matmuls and reductions, 0-d tensors and scalars. Grids are 1-D to 3-D of 2 to 8
devices and every dimension divides by each product of grid axis sizes (or is 1).

Each kind of construct is a feature that can be switched off (`FEATURES`), so a test can
run what already works end to end and name what does not. Deterministic in the seed.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from shardc.testing.gen_exec_programs import affine_map_text, iterator_types_text

FEATURES: frozenset[str] = frozenset(
    {
        "multi_use",  # values with several users; the same value returned twice
        "repeat_operand",  # one value as two operands of one op (matmul(x, x))
        "unannotated_args",  # arguments with no shard.shard at all
        "conflicts",  # annotations for users that disagree; annotated intermediates
        "broadcast",  # lower-rank and size-one operands of elementwise generics
        "matmul",  # linalg.matmul, linalg.batch_matmul (filled inits)
        "reduction",  # linalg.generic / linalg.reduce over one dimension
        "transpose",  # linalg.transpose and generics with permuted input maps
        "reshape",  # tensor.collapse_shape / tensor.expand_shape (also keepdim 1s)
        "gather",  # embedding lookup: tensor.extract from a captured table
        "multi_result",  # %r:2 = linalg.generic computing max and argmax
        "scalars",  # f32 scalar arguments captured in bodies, 0-d reductions
    }
)

NOT_YET_WORKING: frozenset[str] = frozenset()
"""Features some stage still refuses (tests/unit/test_open_world_fuzz.py keeps a minimal
program for each); the tests run `FEATURES - NOT_YET_WORKING`."""

GRIDS: tuple[tuple[int, ...], ...] = (
    (2,), (4,), (8,), (3,),
    (2, 2), (2, 4), (4, 2), (2, 3),
    (2, 2, 2),
)  # fmt: skip

Split = tuple[tuple[int, ...], ...]

_BINARY = ("arith.addf", "arith.subf", "arith.mulf", "arith.maximumf", "arith.minimumf")
_TOSA_BINARY = ("add", "sub", "maximum", "minimum")




@dataclass
class OpenValue:
    name: str
    shape: tuple[int, ...]
    elem: str = "f32"
    uses: int = 0


@dataclass
class OpenProgramBuilder:
    rng: random.Random
    grid_shape: tuple[int, ...]
    features: frozenset[str] = FEATURES
    max_factor: int = 2
    lines: list[str] = field(default_factory=list[str])
    values: list[OpenValue] = field(default_factory=list[OpenValue])
    args: list[OpenValue] = field(default_factory=list[OpenValue])
    scalars: list[str] = field(default_factory=list[str])
    shardings: dict[Split, str] = field(default_factory=dict[Split, str])
    counter: int = 0
    current: list[OpenValue] = field(default_factory=list[OpenValue])
    """The values the op being built reads so far."""

    # ---- basics ---------------------------------------------------------------------

    def on(self, feature: str) -> bool:
        return feature in self.features

    @property
    def unit(self) -> int:
        """Every dimension (but size-one ones) is a multiple of this, the lcm of the
        sizes of all groups of grid axes: any split divides."""
        products = {
            math.prod(c) for r in range(1, len(self.grid_shape) + 1) for c in itertools.combinations(self.grid_shape, r)
        }
        return math.lcm(*products)

    def dim(self) -> int:
        return self.unit * self.rng.randint(1, self.max_factor)

    def shape(self, rank: int) -> tuple[int, ...]:
        return tuple(self.dim() for _ in range(rank))

    @staticmethod
    def type(shape: tuple[int, ...], elem: str = "f32") -> str:
        return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"%{prefix}{self.counter}"

    def emit(self, *lines: str) -> None:
        self.lines.extend(lines)

    # ---- annotations ----------------------------------------------------------------

    def sharding(self, split: Split) -> str:
        if split not in self.shardings:
            name = self.fresh("s")
            axes = ", ".join("[" + ", ".join(map(str, a)) + "]" for a in split) or "[]"
            self.emit(f"{name} = shard.sharding @grid split_axes = [{axes}] : !shard.sharding")
            self.shardings[split] = name
        return self.shardings[split]

    def random_split(self, shape: tuple[int, ...]) -> Split:
        """Grid axes, in random order, each to a random dimension that still divides."""
        split: list[list[int]] = [[] for _ in shape]
        axes = list(range(len(self.grid_shape)))
        self.rng.shuffle(axes)
        for axis in axes:
            if self.rng.random() < 0.55:
                dims = [d for d, s in enumerate(shape) if s % (math.prod(self.grid_shape[a] for a in split[d]) * self.grid_shape[axis]) == 0]
                if dims:
                    split[self.rng.choice(dims)].append(axis)
        while split and not split[-1]:
            split.pop()
        return tuple(tuple(a) for a in split)

    def annotate(self, value: OpenValue, for_users: bool = False) -> str:
        name = self.fresh("u" if for_users else "a")
        suffix = " annotate_for_users" if for_users else ""
        self.emit(f"{name} = shard.shard {value.name} to {self.sharding(self.random_split(value.shape))}{suffix} : {self.type(value.shape, value.elem)}")
        return name

    # ---- values ---------------------------------------------------------------------

    def new_arg(self, shape: tuple[int, ...], elem: str = "f32", pool: bool = True) -> OpenValue:
        """An argument, annotated for its producer unless unannotated arguments are on
        (then half the time it is left bare)."""
        raw = OpenValue(f"%arg{len(self.args)}", shape, elem)
        self.args.append(raw)
        value = raw
        if not (self.on("unannotated_args") and self.rng.random() < 0.5):
            value = OpenValue(self.annotate(raw), shape, elem)
        if pool:
            self.values.append(value)
        return value

    def annotated_arg(self, shape: tuple[int, ...], split: Split) -> OpenValue:
        """An argument annotated for its producer with `split` (not pooled)."""
        raw = OpenValue(f"%arg{len(self.args)}", shape)
        self.args.append(raw)
        name = self.fresh("a")
        self.emit(f"{name} = shard.shard {raw.name} to {self.sharding(split)} : {self.type(shape)}")
        return OpenValue(name, shape)

    def produced(self, raw: str, shape: tuple[int, ...], elem: str = "f32") -> OpenValue:
        """An op's result; with conflicts on, sometimes annotated for its producer."""
        value = OpenValue(raw, shape, elem)
        if self.on("conflicts") and self.rng.random() < 0.3:
            value = OpenValue(self.annotate(value), shape, elem)
        self.values.append(value)
        return value

    def pick(self, rank: int | None = None, shape: tuple[int, ...] | None = None, elem: str = "f32", min_rank: int = 1) -> OpenValue:
        """A value of the wanted rank or shape: mostly a recent one (already used ones
        only with multi_use), else a new argument."""
        cands = [
            v
            for v in self.values
            if v.elem == elem
            and (shape is None or v.shape == shape)
            and (rank is None or len(v.shape) == rank)
            and len(v.shape) >= min_rank
            and (v.uses == 0 or self.on("multi_use"))
            and (self.on("repeat_operand") or all(v is not c for c in self.current))
        ]
        if cands and self.rng.random() < 0.85:
            return self.rng.choice(cands[-3:] if self.rng.random() < 0.7 else cands)
        if shape is None:
            shape = self.shape(rank if rank is not None else self.rng.randint(max(min_rank, 1), 3))
        return self.new_arg(shape, elem)

    def second(self, x: OpenValue) -> OpenValue:
        """The second operand of a binary op on `x`: with repeat_operand on, sometimes
        `x` itself."""
        if self.on("repeat_operand") and self.rng.random() < 0.3:
            return x
        return self.pick(shape=x.shape)

    def use(self, value: OpenValue) -> str:
        """The name an op reads `value` by: with conflicts on, sometimes through an
        annotation for users of its own (which may disagree with the value's and with
        the other users')."""
        value.uses += 1
        self.current.append(value)
        if self.on("conflicts") and self.rng.random() < 0.25:
            return self.annotate(value, for_users=True)
        return value.name

    def empty(self, shape: tuple[int, ...], elem: str = "f32") -> str:
        raw = self.fresh("e")
        self.emit(f"{raw} = tensor.empty() : {self.type(shape, elem)}")
        return raw

    def filled(self, shape: tuple[int, ...], literal: str, elem: str = "f32") -> str:
        e = self.empty(shape, elem)
        c, raw = self.fresh("c"), self.fresh("fill")
        t = self.type(shape, elem)
        self.emit(f"{c} = arith.constant {literal} : {elem}", f"{raw} = linalg.fill ins({c} : {elem}) outs({e} : {t}) -> {t}")
        return raw

    def scalar(self) -> str:
        """A scalar f32 for a generic body to capture: an argument, or read out of a
        0-d tensor (a full sum, as in a norm)."""
        if self.rng.random() < 0.35:
            zero_d = self.zero_d()
            zero_d.uses += 1
            name = self.fresh("x")
            self.emit(f"{name} = tensor.extract {zero_d.name}[] : tensor<f32>")
            return name
        if self.scalars and self.rng.random() < 0.5:
            return self.rng.choice(self.scalars)
        name = f"%arg{len(self.args)}"
        self.args.append(OpenValue(name, (), "f32"))
        self.scalars.append(name)
        return name

    def generic(
        self,
        ins: list[tuple[str, tuple[int, ...], str, str]],
        outs: list[tuple[str, tuple[int, ...], str, str]],
        kinds: list[str],
        body: list[str],
        yields: list[str],
    ) -> str:
        """A linalg.generic; `ins`/`outs` are (name, shape, elem, map), the body's block
        arguments are %in0.., %out0..; returns the result name (`%r` or `%r#i`)."""
        raw = self.fresh("g")
        maps = ", ".join(m for *_, m in [*ins, *outs])
        ins_text = f" ins({', '.join(n for n, *_ in ins)} : {', '.join(self.type(s, e) for _, s, e, _ in ins)})" if ins else ""
        outs_text = f" outs({', '.join(n for n, *_ in outs)} : {', '.join(self.type(s, e) for _, s, e, _ in outs)})"
        args = [f"%in{i}: {e}" for i, (_, _, e, _) in enumerate(ins)] + [f"%out{i}: {e}" for i, (_, _, e, _) in enumerate(outs)]
        results = [self.type(s, e) for _, s, e, _ in outs]
        result_text = results[0] if len(results) == 1 else "(" + ", ".join(results) + ")"
        lhs = raw if len(outs) == 1 else f"{raw}:{len(outs)}"
        self.emit(
            f"{lhs} = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iterator_types_text(kinds)}]}}{ins_text}{outs_text} {{",
            f"^bb0({', '.join(args)}):",
            *(f"  {line}" for line in body),
            f"  linalg.yield {', '.join(yields)} : {', '.join(e for _, _, e, _ in outs)}",
            f"}} -> {result_text}",
        )
        return raw

    # ---- ops ------------------------------------------------------------------------

    def op_elementwise(self) -> None:
        """A binary generic or tosa op on two values of one shape, or a unary generic
        (with scalars on, sometimes scaling by a captured scalar argument)."""
        x = self.pick()
        n = len(x.shape)
        ident = affine_map_text(n, range(n))
        t = self.type(x.shape)
        kind = self.rng.random()
        if kind < 0.25:
            a = self.use(x)
            b = self.use(self.second(x))
            raw = self.fresh("t")
            self.emit(f"{raw} = tosa.{self.rng.choice(_TOSA_BINARY)} {a}, {b} : ({t}, {t}) -> {t}")
        elif kind < 0.4 or (kind < 0.55 and not self.on("scalars")):
            a = self.use(x)
            body = ["%r = arith.mulf %in0, %in0 : f32", "%q = arith.subf %r, %in0 : f32"]
            raw = self.generic([(a, x.shape, "f32", ident)], [(self.empty(x.shape), x.shape, "f32", ident)], ["parallel"] * n, body, ["%q"])
        elif kind < 0.55:
            a, s = self.use(x), self.scalar()
            body = [f"%r = arith.mulf %in0, {s} : f32"]
            raw = self.generic([(a, x.shape, "f32", ident)], [(self.empty(x.shape), x.shape, "f32", ident)], ["parallel"] * n, body, ["%r"])
        else:
            a = self.use(x)
            b = self.use(self.second(x))
            body = [f"%r = {self.rng.choice(_BINARY)} %in0, %in1 : f32"]
            raw = self.generic(
                [(a, x.shape, "f32", ident), (b, x.shape, "f32", ident)],
                [(self.empty(x.shape), x.shape, "f32", ident)],
                ["parallel"] * n,
                body,
                ["%r"],
            )
        self.produced(raw, x.shape)

    def op_broadcast(self) -> None:
        """x + y where y has fewer dimensions (a bias) or size-one dimensions read at
        index 0 (torch's keepdim broadcasts), or with scalars on a 0-d tensor."""
        x = self.pick(min_rank=2) if self.rng.random() < 0.8 else self.pick()
        n = len(x.shape)
        ident = affine_map_text(n, range(n))
        choice = self.rng.random()
        if choice < 0.2 and self.on("scalars"):
            y_shape: tuple[int, ...] = ()
            y_map = affine_map_text(n, [])
        elif choice < 0.6 or n == 1:
            kept = sorted(self.rng.sample(range(n), self.rng.randint(1, n))) if n > 1 else [0]
            if n > 1 and len(kept) == n:
                kept = kept[1:]
            y_shape = tuple(x.shape[d] for d in kept)
            y_map = affine_map_text(n, kept)
        else:
            ones = set(self.rng.sample(range(n), self.rng.randint(1, n - 1)))
            y_shape = tuple(1 if d in ones else s for d, s in enumerate(x.shape))
            y_map = affine_map_text(n, ["0" if d in ones else d for d in range(n)])
        a = self.use(x)
        b = self.use(self.pick(shape=y_shape, min_rank=0) if y_shape else self.zero_d())
        body = [f"%r = {self.rng.choice(_BINARY)} %in0, %in1 : f32"]
        raw = self.generic(
            [(a, x.shape, "f32", ident), (b, y_shape, "f32", y_map)],
            [(self.empty(x.shape), x.shape, "f32", ident)],
            ["parallel"] * n,
            body,
            ["%r"],
        )
        self.produced(raw, x.shape)

    def zero_d(self) -> OpenValue:
        """A 0-d tensor: one computed by a full reduction, or an argument."""
        cands = [v for v in self.values if v.shape == () and (v.uses == 0 or self.on("multi_use"))]
        if cands and self.rng.random() < 0.7:
            return self.rng.choice(cands)
        if self.on("reduction") and self.rng.random() < 0.6:
            return self.full_reduction()
        return self.new_arg(())

    def full_reduction(self) -> OpenValue:
        x = self.pick()
        n = len(x.shape)
        a = self.use(x)
        init = self.filled((), "0.000000e+00")
        body = ["%r = arith.addf %in0, %out0 : f32"]
        raw = self.generic([(a, x.shape, "f32", affine_map_text(n, range(n)))], [(init, (), "f32", affine_map_text(n, []))], ["reduction"] * n, body, ["%r"])
        return self.produced(raw, ())

    def op_matmul(self) -> None:
        batched = self.rng.random() < 0.35
        if batched:
            x = self.pick(rank=3)
            bsz, m, k = x.shape
            nn = self.dim()
            a = self.use(x)
            y = self.pick(shape=(bsz, k, nn))
            out: tuple[int, ...] = (bsz, m, nn)
            name = "linalg.batch_matmul"
        else:
            x = self.pick(rank=2)
            m, k = x.shape
            nn = self.dim()
            a = self.use(x)
            y = self.pick(shape=(k, nn))
            out = (m, nn)
            name = "linalg.matmul"
        b = self.use(y)
        init = self.filled(out, "0.000000e+00")
        raw = self.fresh("mm")
        self.emit(f"{raw} = {name} ins({a}, {b} : {self.type(x.shape)}, {self.type(y.shape)}) outs({init} : {self.type(out)}) -> {self.type(out)}")
        self.produced(raw, out)

    def op_reduction(self) -> None:
        """A sum, max or min over one dimension by linalg.generic or linalg.reduce;
        with scalars on, sometimes over all of them (a 0-d result)."""
        if self.on("scalars") and self.rng.random() < 0.15:
            self.full_reduction()
            return
        x = self.pick(min_rank=2)
        n = len(x.shape)
        dim = self.rng.randrange(n)
        kept = [d for d in range(n) if d != dim]
        out = tuple(x.shape[d] for d in kept)
        combiner, neutral = self.rng.choice(
            (("arith.addf", "0.000000e+00"), ("arith.maximumf", "0xFF800000"), ("arith.minimumf", "0x7F800000"), ("arith.addf", "1.500000e+00"))
        )
        a = self.use(x)
        init = self.filled(out, neutral)
        if self.rng.random() < 0.35:
            raw = self.fresh("red")
            self.emit(
                f"{raw} = linalg.reduce ins({a} : {self.type(x.shape)}) outs({init} : {self.type(out)}) dimensions = [{dim}]",
                "  (%in: f32, %init: f32) {",
                f"    %r = {combiner} %in, %init : f32",
                "    linalg.yield %r : f32",
                "  }",
            )
        else:
            kinds = ["reduction" if d == dim else "parallel" for d in range(n)]
            raw = self.generic([(a, x.shape, "f32", affine_map_text(n, range(n)))], [(init, out, "f32", affine_map_text(n, kept))], kinds, [f"%r = {combiner} %in0, %out0 : f32"], ["%r"])
        self.produced(raw, out)

    def op_transpose(self) -> None:
        x = self.pick(rank=self.rng.randint(2, 3))
        n = len(x.shape)
        perm = list(range(n))
        while perm == sorted(perm):
            self.rng.shuffle(perm)
        out = tuple(x.shape[p] for p in perm)
        a = self.use(x)
        if self.rng.random() < 0.5:
            raw = self.fresh("tr")
            e = self.empty(out)
            self.emit(f"{raw} = linalg.transpose ins({a} : {self.type(x.shape)}) outs({e} : {self.type(out)}) permutation = [{', '.join(map(str, perm))}]")
        else:
            # Loops are the output's dimensions; input dimension d is loop perm.index(d).
            in_map = affine_map_text(n, [perm.index(d) for d in range(n)])
            body = ["%r = arith.addf %in0, %in0 : f32"]
            raw = self.generic([(a, x.shape, "f32", in_map)], [(self.empty(out), out, "f32", affine_map_text(n, range(n)))], ["parallel"] * n, body, ["%r"])
        self.produced(raw, out)

    def op_reshape(self) -> None:
        """Collapse two adjacent dimensions, split one (into multiples of the unit), or
        add a trailing size-one dimension (torch's keepdim)."""
        choice = self.rng.random()
        if choice < 0.4:
            x = self.pick(rank=self.rng.randint(2, 3))
            n = len(x.shape)
            i = self.rng.randrange(n - 1)
            groups = [[d] for d in range(i)] + [[i, i + 1]] + [[d] for d in range(i + 2, n)]
            out = tuple(math.prod(x.shape[d] for d in g) for g in groups)
            raw = self.fresh("col")
            self.emit(f"{raw} = tensor.collapse_shape {self.use(x)} {_groups(groups)} : {self.type(x.shape)} into {self.type(out)}")
        else:
            square = [
                v for v in self.values
                if v.elem == "f32" and 0 < len(v.shape) < 3 and any(s % (self.unit * self.unit) == 0 for s in v.shape)
                and (v.uses == 0 or self.on("multi_use"))
            ]  # fmt: skip
            keepdim = choice > 0.75
            if keepdim:
                x = self.pick(rank=self.rng.randint(1, 2))
            elif square and self.rng.random() < 0.8:
                x = self.rng.choice(square)
            else:
                x = self.new_arg((self.unit * self.unit * self.rng.randint(1, self.max_factor),) + self.shape(self.rng.randint(0, 1)))
            n = len(x.shape)
            if keepdim:
                groups = [[d] for d in range(n - 1)] + [[n - 1, n]]
                out = x.shape + (1,)
            else:
                i = self.rng.choice([d for d, s in enumerate(x.shape) if s % (self.unit * self.unit) == 0])
                major = self.unit * self.rng.choice([f for f in range(1, x.shape[i] // self.unit + 1) if x.shape[i] % (self.unit * f) == 0 and (x.shape[i] // (self.unit * f)) % self.unit == 0])
                groups = [[d] for d in range(i)] + [[i, i + 1]] + [[d + 1] for d in range(i + 1, n)]
                out = x.shape[:i] + (major, x.shape[i] // major) + x.shape[i + 1 :]
            raw = self.fresh("exp")
            shape_text = ", ".join(map(str, out))
            self.emit(f"{raw} = tensor.expand_shape {self.use(x)} {_groups(groups)} output_shape [{shape_text}] : {self.type(x.shape)} into {self.type(out)}")
        self.produced(raw, out)

    def op_gather(self) -> None:
        """An embedding lookup as torch-mlir writes it: out[b, s, e] = table[ids[b, s], e],
        the table captured by the body; indices are brought into range first.

        Its column is read at `linalg.index 2`, so partition may keep a column split
        of the table. Some lookups (chosen by their own generator, so that the programs
        whose lookups stay plain are as before) stress that: the table annotated with
        its columns split, the column index through index casts, the global column
        index used beside the lookup (a bounds check, added to the value), a position
        table read at (`linalg.index 1`, `linalg.index 2`) added as GPT's wpe is."""
        ids_cands = [v for v in self.values if v.elem == "i64" and len(v.shape) == 2 and (v.uses == 0 or self.on("multi_use"))]
        ids = self.rng.choice(ids_cands) if ids_cands and self.rng.random() < 0.7 else self.new_arg(self.shape(2), "i64")
        rows = self.rng.randint(3, 12)
        # A str seed is hashed with sha512: deterministic in the program so far.
        extra = random.Random("gather\n" + "\n".join(self.lines))
        stress = extra.random() < 0.6
        emb = self.dim()
        if stress and extra.random() < 0.6:
            axes = extra.sample(range(len(self.grid_shape)), extra.randint(1, min(2, len(self.grid_shape))))
            table = self.annotated_arg((rows, emb), ((), tuple(axes)))
        else:
            table = self.new_arg((rows, emb), pool=False)
        table.uses += 1
        out = ids.shape + (emb,)
        c = self.fresh("rows")
        self.emit(f"{c} = arith.constant {rows} : index")
        column = "%j"
        body = [
            "%i = arith.index_cast %in0 : i64 to index",
            f"%m = arith.remsi %i, {c} : index",
            f"%p = arith.addi %m, {c} : index",
            f"%q = arith.remsi %p, {c} : index",
            "%j = linalg.index 2 : index",
        ]
        if stress and extra.random() < 0.4:
            body += ["%j64 = arith.index_cast %j : index to i64", "%jc = arith.index_cast %j64 : i64 to index"]
            column = "%jc"
        body.append(f"%x = tensor.extract {table.name}[%q, {column}] : {self.type(table.shape)}")
        result = "%x"
        if stress and extra.random() < 0.5:
            width = self.fresh("emb")
            self.emit(f"{width} = arith.constant {emb} : index")
            body += [
                f"%inside = arith.cmpi ult, %j, {width} : index",
                'cf.assert %inside, "column in range"',
                "%jf64 = arith.index_cast %j : index to i64",
                "%jf = arith.sitofp %jf64 : i64 to f32",
                f"%xj = arith.addf {result}, %jf : f32",
            ]
            result = "%xj"
        if stress and extra.random() < 0.4:
            positions = self.new_arg((ids.shape[1], emb), pool=False)
            positions.uses += 1
            body += [
                "%s = linalg.index 1 : index",
                f"%w = tensor.extract {positions.name}[%s, %j] : {self.type(positions.shape)}",
                f"%xw = arith.addf {result}, %w : f32",
            ]
            result = "%xw"
        raw = self.generic([(self.use(ids), ids.shape, "i64", affine_map_text(3, [0, 1]))], [(self.empty(out), out, "f32", affine_map_text(3, range(3)))], ["parallel"] * 3, body, [result])
        self.produced(raw, out)

    def op_multi_result(self) -> None:
        """Max and argmax over the last dimension in one generic (torch's max(dim))."""
        x = self.pick(rank=self.rng.randint(2, 3))
        n = len(x.shape)
        out = x.shape[:-1]
        vals = self.filled(out, "0xFF800000")
        idx = self.filled(out, "0", "i64")
        body = [
            f"%k = linalg.index {n - 1} : index",
            "%ki = arith.index_cast %k : index to i64",
            "%mx = arith.maximumf %in0, %out0 : f32",
            "%gt = arith.cmpf ogt, %in0, %out0 : f32",
            "%am = arith.select %gt, %ki, %out1 : i64",
        ]
        kinds = ["parallel"] * (n - 1) + ["reduction"]
        raw = self.generic(
            [(self.use(x), x.shape, "f32", affine_map_text(n, range(n)))],
            [(vals, out, "f32", affine_map_text(n, range(n - 1))), (idx, out, "i64", affine_map_text(n, range(n - 1)))],
            kinds,
            body,
            ["%mx", "%am"],
        )
        self.produced(f"{raw}#0", out)
        self.produced(f"{raw}#1", out, "i64")

    OPS: tuple[tuple[str, str | None, int], ...] = (
        ("op_elementwise", None, 4),
        ("op_broadcast", "broadcast", 2),
        ("op_matmul", "matmul", 3),
        ("op_reduction", "reduction", 3),
        ("op_transpose", "transpose", 2),
        ("op_reshape", "reshape", 2),
        ("op_gather", "gather", 2),
        ("op_multi_result", "multi_result", 2),
    )

    def step(self) -> None:
        ops = [(name, weight) for name, feature, weight in self.OPS if feature is None or self.on(feature)]
        names, weights = zip(*ops)
        self.current = []
        getattr(self, self.rng.choices(names, weights)[0])()

    def returned(self) -> list[OpenValue]:
        """Mostly the values nobody used; with multi_use on, sometimes a used one, one
        returned twice or an argument as it came in."""
        unused = [v for v in self.values if v.uses == 0] or self.values
        results = self.rng.sample(unused, min(len(unused), self.rng.randint(1, 2)))
        if self.on("multi_use"):
            extra = self.rng.random()
            if extra < 0.15:
                results.append(results[0])
            elif extra < 0.3:
                results.append(self.rng.choice(self.values))
            elif extra < 0.4 and self.args and self.args[0].shape:
                results.append(self.args[0])
        return results

    def function(self, name: str, num_ops: int) -> str:
        for _ in range(num_ops):
            self.step()
        results = self.returned()
        names = [self.use(v) if self.on("conflicts") and self.rng.random() < 0.3 else v.name for v in results]
        types = ", ".join(self.type(v.shape, v.elem) for v in results)
        arg_list = ", ".join(f"{a.name}: {'f32' if a.name in self.scalars else self.type(a.shape, a.elem)}" for a in self.args)
        body = "\n    ".join(self.lines)
        return f"  func.func @{name}({arg_list}) -> ({types}) {{\n    {body}\n    return {', '.join(names)} : {types}\n  }}"


def _groups(groups: list[list[int]]) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"


def generate_open_program(
    seed: int,
    features: Iterable[str] = FEATURES,
    num_ops: int | None = None,
    grids: tuple[tuple[int, ...], ...] = GRIDS,
) -> str:
    """One random module with a function @f using `features` (a subset of FEATURES);
    deterministic in `seed` and `features`."""
    chosen = frozenset(features)
    unknown = chosen - FEATURES
    if unknown:
        raise ValueError(f"unknown features: {', '.join(sorted(unknown))}")
    rng = random.Random(seed)
    grid = rng.choice(grids)
    builder = OpenProgramBuilder(rng, grid, chosen, max_factor=2 if math.prod(grid) <= 4 else 1)
    if num_ops is None:  # mostly small programs, one in ten longer
        num_ops = rng.randint(5, 10) if rng.random() < 0.1 else rng.randint(1, 4)
    body = builder.function("f", num_ops)
    return f"module {{\n  shard.grid @grid(shape = {'x'.join(map(str, grid))})\n{body}\n}}\n"
