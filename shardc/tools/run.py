"""`shardc-run`: execute an MLIR program on N devices.

    mpiexec -n 4 shardc-run prog.mlir --entry f --input x=x.npy --input y=random:seed=0 --output out/
    shardc-run prog.mlir --simulate 4 ...          # N ranks as threads of one process

A program whose entry arguments or results carry shardings (`shard.shard` on block
arguments / returned values of the unpartitioned program) is partitioned first
(`--pipeline`, default: the passes of sharding-propagation, shard-partition,
canonicalize, cse that shardc-opt has); global inputs are then cut into each rank's
shard by those shardings (halos and uneven offsets included) and results put back
together, so the user deals in global arrays only. A program already lowered by
`shardc-opt --shard-to-mpi-pipeline` (or run here with `--pipeline shard-to-mpi-pipeline`)
keeps its global signature in `shardc.global_type` / `shardc.sharding` argument and
result attributes, which are used the same way:

    shardc-opt examples/mlp.mlir --shard-to-mpi-pipeline -o mlp.mpi.mlir
    shardc-run mlp.mpi.mlir --simulate 4 --input arg0=x.npy --input arg1=w1.npy --input arg2=w2.npy

(the printed lowered program names its arguments %arg0, %arg1, ...). A program without
shardings runs as it is: each input is replicated, or given per rank with `{rank}` in
its file name, and results are written per rank.

Output: one line per result written (`wrote out/result0.npy: 16x32 f32`), or without
`--output` a short summary of each result (shape, element type, values or min/max/mean),
from rank 0; `--quiet` prints nothing but errors.

Compiling (parse, pipeline, code generation) goes through the compile cache
(`shardc.runtime.codegen.cache`), keyed by the file's text and name, `--entry`, `--pipeline`, the
number of ranks and the compiler's identity: a second run of the same job loads the
compiled program and runs no pass (`--timing` says so; the warnings and remarks the
compile wrote are written again). Under mpiexec rank 0 compiles or loads it and the
other ranks take it from rank 0. `SHARDC_CACHE=0` turns the disk cache off.

Errors: IR problems are MLIR-style diagnostics; command-line and input problems one
line; a rank that raises ends the whole job (exit 1) with its message on stderr. A
program that fails to compile is never stored, so its errors are the same every run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType
from xdsl.ir import Attribute, BlockArgument, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from shardc.ir.escape import display
from shardc.tools.cli import ArgParser, Reported, UserError, apply_passes, parse_module, pipeline_passes, run_tool, under_mpi

TOOL = "shardc-run"
DEFAULT_PIPELINE = ("sharding-propagation", "shard-partition", "canonicalize", "cse")


def _arg_parser() -> argparse.ArgumentParser:
    p = ArgParser(
        prog=TOOL,
        description="Run an MLIR program on N devices (mpiexec, or simulated ranks). Global inputs are "
        "scattered by the entry's shardings: shard.shard annotations, or the shardc.sharding attributes "
        "that shard-to-mpi-pipeline records on a lowered program.",
    )
    p.add_argument("program", help="the .mlir file")
    p.add_argument("--entry", help="function to call (default: the only public function, or @main)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=SPEC", help="argument NAME (or its index) from SPEC: a .npy file ({rank} in the path: one file per rank), random[:seed=S,low=L,high=H], zeros, ones, or a number")
    p.add_argument("--inputs", metavar="FILE.npz", help="arguments from the arrays of a .npz file, keyed by argument name, argN or index (--input entries take precedence)")
    p.add_argument("--output", metavar="DIR", help="write results as DIR/result<i>.npy (per rank: result<i>.rank<r>.npy)")
    p.add_argument("--simulate", type=int, metavar="N", help="run N ranks as threads of this process instead of under MPI")
    p.add_argument("--pipeline", help="passes to run first, in mlir-opt pass-pipeline syntax ('' for none; 'shard-to-mpi-pipeline' lowers to the mpi dialect)")
    p.add_argument("--timing", action="store_true", help="print per-rank times")
    p.add_argument("-q", "--quiet", action="store_true", help="print no result lines or summaries on success")
    p.add_argument("--emit-python", metavar="FILE", help="write the generated Python source to FILE")
    return p


# ---------------------------------------------------------------------------------------
# The program: parsed, boundary shardings read, partitioned, compiled
# ---------------------------------------------------------------------------------------


@dataclass
class Boundary:
    """An entry argument or result as the user sees it: its global type and sharding."""

    label: str
    type: Attribute
    sharding: Any = None  # RuntimeSharding | None


@dataclass
class Program:
    ir: ModuleOp | Callable[[], ModuleOp]
    """The transformed module, or (loaded from the compile cache) how to parse it."""
    entry: str
    args: list[Boundary]
    results: list[Boundary]
    sharded: bool
    """Whether arguments and results are global arrays (the program has shardings)."""
    compiled: Any = None
    timings: dict[str, float] = field(default_factory=dict)
    cached: str = "compiled"
    """Where the program came from: "compiled", "cache" (this rank's disk) or
    "broadcast" (rank 0's compile or cache entry, over MPI)."""

    @property
    def module(self) -> ModuleOp:
        """The transformed module (parsed from the cache entry on first use after a hit)."""
        if not isinstance(self.ir, ModuleOp):
            self.ir = self.ir()
        return self.ir


def read_program(path: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8")  # as shardc-opt reads it: no newline translation
    except OSError as e:
        raise UserError(f"cannot read '{path}': {e.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"cannot read '{path}': not a text file") from None


def _functions(module: ModuleOp) -> list[func.FuncOp]:
    return [op for op in module.walk() if isinstance(op, func.FuncOp) and op.body.blocks]


def entry_function(module: ModuleOp, name: str | None) -> func.FuncOp:
    funcs = _functions(module)
    names = [f.sym_name.data for f in funcs]
    if name is not None:
        for f in funcs:
            if f.sym_name.data == name.lstrip("@"):
                return f
        raise UserError(f"no function @{name.lstrip('@')} in the program (functions: {', '.join('@' + n for n in names) or 'none'})")
    public = [f for f in funcs if f.sym_visibility is None or f.sym_visibility.data == "public"]
    if len(public) == 1:
        return public[0]
    for f in funcs:
        if f.sym_name.data == "main":
            return f
    raise UserError(f"--entry is needed: the program has functions {', '.join('@' + n for n in names) or '(none)'}")


def _static_sharding(value: SSAValue, what: str) -> Any:
    from shardc.dialects.shard import ShardingOp, lookup_grid
    from shardc.runtime.execute.sharding import RuntimeSharding

    op = value.owner
    if not isinstance(op, ShardingOp):
        raise UserError(f"{what}: its sharding is not defined by a shard.sharding op")
    if op.dynamic_halo_sizes or op.dynamic_sharded_dims_offsets:
        raise UserError(f"{what}: dynamic halo sizes or offsets on the function boundary are not supported")
    grid = lookup_grid(op, op.grid)
    if grid is None:
        raise UserError(f"{what}: no shard.grid named {op.grid}")
    return RuntimeSharding(
        op.grid.string_value(),
        grid.shape_tuple,
        op.split_axes_tuple,
        tuple(op.static_halo_sizes.get_values()),
        tuple(op.static_sharded_dims_offsets.get_values()),
    )


def _arg_sharding(arg: BlockArgument, label: str) -> Any:
    from shardc.dialects.shard import ShardOp

    annots = [u.operation for u in arg.uses if isinstance(u.operation, ShardOp) and u.operation.src is arg]
    annots.sort(key=lambda s: s.for_users)  # the value's own sharding first
    return _static_sharding(annots[0].sharding, label) if annots else None


def _result_sharding(value: SSAValue, label: str) -> Any:
    from shardc.dialects.shard import ShardOp

    owner = value.owner
    return _static_sharding(owner.sharding, label) if isinstance(owner, ShardOp) else None


def _label(arg: BlockArgument) -> str:
    return f"%{display(arg.name_hint)}" if arg.name_hint else f"argument #{arg.index}"


def boundaries(module: ModuleOp, f: func.FuncOp) -> tuple[list[Boundary], list[Boundary], bool]:
    """The entry's arguments and results as global values, and whether their shardings
    were recorded by shard-to-mpi-pipeline (the program is lowered already) rather than
    read from shard.shard annotations."""
    block = f.body.blocks.first
    assert block is not None
    args = [Boundary(_label(a), a.type, _arg_sharding(a, f"input {_label(a)}")) for a in block.args]
    ret = block.last_op
    results: list[Boundary] = []
    if isinstance(ret, func.ReturnOp):
        results = [Boundary(f"result{i}", v.type, _result_sharding(v, f"result #{i}")) for i, v in enumerate(ret.arguments)]
    if any(b.sharding is not None for b in [*args, *results]):
        return args, results, False
    recorded = _recorded_boundaries(module, f)
    if recorded is None:
        return args, results, False
    in_r, out_r = recorded
    from shardc.passes.pipelines import recorded_arg_names

    names = recorded_arg_names(f)
    args = [
        Boundary(f"%{display(n)}" if n else b.label, t, sh)
        for b, (t, sh), n in zip(args, in_r, names)
    ]
    results = [Boundary(b.label, t, sh) for b, (t, sh) in zip(results, out_r)]
    return args, results, True


def _recorded_boundaries(module: ModuleOp, f: func.FuncOp) -> Any:
    from shardc.passes.pipelines import boundary_shardings
    from shardc.runtime.execute.sharding import RuntimeSharding

    try:
        return boundary_shardings(module, f, RuntimeSharding)
    except (ValueError, KeyError, AttributeError) as e:
        raise UserError(f"@{display(f.sym_name.data)}: bad shardc.sharding attribute ({e})") from None


def _pipeline_passes(text: str | None, sharded: bool) -> list[Any]:
    """The passes of --pipeline; without it, the default partitioning of a sharded program."""
    from shardc.passes import all_passes

    if text is not None:
        return pipeline_passes(text)
    if not sharded:
        return []
    table = all_passes()
    if "shard-partition" not in table:
        raise UserError("the program has sharding annotations but shardc-opt has no 'shard-partition' pass to partition it (give --pipeline)")
    return pipeline_passes(",".join(p for p in DEFAULT_PIPELINE if p in table))


def transform(
    module: ModuleOp, entry: str, passes: Sequence[Any], boundary: tuple[list[Boundary], list[Boundary], bool]
) -> tuple[list[Boundary], list[Boundary], bool]:
    """Run `passes` on `module` and return the entry's global boundary as the transformed
    program sees it: read just before shard-partition (propagation has then settled the
    shardings of every argument and result), or recorded by a pass that lowered the
    program (shard-to-mpi-pipeline); else `boundary`, as read before the passes."""

    def before(p: Any) -> None:
        nonlocal boundary
        if p.name == "shard-partition":
            boundary = boundaries(module, entry_function(module, entry))

    apply_passes(module, passes, before)
    if not boundary[2]:
        after = boundaries(module, entry_function(module, entry))
        if after[2]:
            return after
    return boundary


def prepare(args: argparse.Namespace, text: str | None = None) -> Program:
    """Parse (the file `args.program`, or `text` under that name), transform by
    `args.pipeline` and compile, all through the compile cache: the key is the input's
    text and file name (its locations are what diagnostics and runtime errors quote),
    the entry, the pipeline, the number of ranks and the compiler's identity, so a hit
    skips parsing and the pipeline too. Under MPI (`args.world`) the job compiles once:
    rank 0 compiles or hits, the other ranks take its entry. Only a program that
    compiled is stored, so every error is reported as it was without the cache."""
    from shardc.runtime.codegen.cache import PeerFailed, compile_cached, make_key

    t0 = time.perf_counter()
    source = read_program(args.program) if text is None else text
    world = getattr(args, "world", None)
    ranks = world.Get_size() if world is not None else (getattr(args, "simulate", None) or 1)
    name = Path(args.program).name
    key = make_key(
        "shardc-run", text=source, path=args.program, entry=args.entry, pipeline=args.pipeline,
        default_pipeline=list(DEFAULT_PIPELINE), ranks=ranks, name=name, fuse=True, foreign_passes=_foreign_passes(),
    )
    try:
        got = compile_cached(key, lambda: _build(source, args), name, world=world)
    except DiagnosticException as e:  # the runtime compiler's: to the engine (run_program keeps it)
        from shardc.ir import diagnostics

        diagnostics.current_engine().write(f"{TOOL}: error: {e}\n")
        raise Reported() from None
    except PeerFailed:  # rank 0 reports it
        raise Reported() from None
    meta = got.meta
    if got.source != "compiled" and meta.get("diagnostics"):
        from shardc.ir import diagnostics

        diagnostics.current_engine().write(meta["diagnostics"])  # the warnings and remarks of the compile
    types = _TypeReader()
    args_b, results_b = [_boundary_of(b, types) for b in meta["args"]], [_boundary_of(b, types) for b in meta["results"]]
    prog = Program(got.module, meta["entry"], args_b, results_b, meta["sharded"], got.compiled, cached=got.source)
    total = time.perf_counter() - t0
    if got.source == "compiled":
        parse, pipeline = meta["timings"]["parse"], meta["timings"]["pipeline"]
        prog.timings = {"parse": parse, "pipeline": pipeline, "compile": max(0.0, total - parse - pipeline)}
    else:
        prog.timings = {"parse": 0.0, "pipeline": 0.0, "compile": total}
    return prog


def _foreign_passes() -> list[list[str]]:
    """Passes registered from outside shardc and xDSL (the compiler's identity covers
    those two): name, where, and a hash of their module's source, so a change misses."""
    import hashlib
    import importlib.util

    from shardc.passes import PASSES, PIPELINES

    out = []
    for name, spec in sorted({**PASSES, **PIPELINES}.items()):
        mod = spec.partition(":")[0]
        if mod.split(".")[0] in ("shardc", "xdsl"):
            continue
        path = getattr(sys.modules.get(mod), "__file__", None)
        if path is None:
            with contextlib.suppress(ImportError, ValueError, AttributeError):
                path = importlib.util.find_spec(mod).origin  # type: ignore[union-attr]
        try:
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()  # type: ignore[arg-type]
        except (OSError, TypeError):
            digest = f"unknown:{os.urandom(8).hex()}"  # a source we cannot hash never hits
        out.append([name, spec, digest])
    return out


def _build(source: str, args: argparse.Namespace) -> tuple[ModuleOp, dict[str, Any]]:
    """The transformed module and what `prepare` reads off it, as plain data: the entry,
    its boundary (types as text, shardings as tuples), whether it is sharded, the stage
    times and the text of the diagnostics (warnings, remarks) the compile wrote."""
    from shardc.dialects.shard import ShardOp
    from shardc.ir import diagnostics

    engine = diagnostics.current_engine()
    record = _Tee(engine.stream)
    engine.stream = record  # type: ignore[assignment]
    try:
        t0 = time.perf_counter()
        module = parse_module(source, args.program)
        entry = entry_function(module, args.entry)
        in_b, out_b, lowered = boundaries(module, entry)
        sharded = any(b.sharding is not None for b in [*in_b, *out_b]) or any(isinstance(op, ShardOp) for op in entry.walk())
        t1 = time.perf_counter()
        passes = _pipeline_passes(args.pipeline, sharded and not lowered)
        in_b, out_b, lowered = transform(module, entry.sym_name.data, passes, (in_b, out_b, lowered))
        entry = entry_function(module, entry.sym_name.data)
        t2 = time.perf_counter()
    finally:
        engine.stream = record.inner
    meta = {
        "entry": entry.sym_name.data,
        "args": [_boundary_data(b) for b in in_b],
        "results": [_boundary_data(b) for b in out_b],
        "sharded": sharded or lowered,
        "timings": {"parse": t1 - t0, "pipeline": t2 - t1},
        "diagnostics": record.text.getvalue(),
    }
    return module, meta


class _Tee(io.TextIOBase):
    """A diagnostic engine's stream that also keeps what was written (replayed on a hit)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.text = io.StringIO()

    def write(self, s: str) -> int:  # type: ignore[override]
        self.text.write(s)
        return (self.inner if self.inner is not None else sys.stderr).write(s)

    def flush(self) -> None:
        (self.inner if self.inner is not None else sys.stderr).flush()


def _boundary_data(b: Boundary) -> list[Any]:
    sh = b.sharding
    data = None if sh is None else [sh.grid, list(sh.grid_shape), [list(a) for a in sh.split_axes], list(sh.halo_sizes), list(sh.sharded_dims_offsets)]
    return [b.label, str(b.type), data]


def _boundary_of(data: list[Any], types: _TypeReader) -> Boundary:
    from shardc.runtime.execute.sharding import RuntimeSharding

    label, type_text, sh = data
    sharding = None if sh is None else RuntimeSharding(sh[0], tuple(sh[1]), tuple(tuple(a) for a in sh[2]), tuple(sh[3]), tuple(sh[4]))
    return Boundary(label, types(type_text), sharding)


class _TypeReader:
    """Types from their text (one context, each text parsed once)."""

    def __init__(self) -> None:
        self.ctx: Any = None
        self.seen: dict[str, Attribute] = {}

    def __call__(self, text: str) -> Attribute:
        t = self.seen.get(text)
        if t is None:
            from shardc.context import make_context
            from shardc.ir.fast_parser import FastParser

            self.ctx = self.ctx or make_context()
            t = self.seen[text] = FastParser(self.ctx, text).parse_type()
        return t


# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------


def np_type(t: Attribute) -> tuple[np.dtype, tuple[int, ...] | None]:
    """(dtype, shape with -1 for dynamic dims) of a shaped type; shape None for a scalar."""
    from shardc.runtime.execute.dtypes import np_dtype

    if isinstance(t, TensorType | MemRefType):
        return np_dtype(t.get_element_type()), tuple(t.get_shape())
    return np_dtype(t), None


def _describe(dtype: np.dtype, shape: tuple[int, ...] | None) -> str:
    if shape is None:
        return f"a {dtype} scalar"
    return f"shape ({', '.join('?' if s < 0 else str(s) for s in shape)}{',' if len(shape) == 1 else ''}) of {dtype}"


@dataclass
class InputSpec:
    label: str
    make: Callable[[int], Any]
    """rank -> the value for that rank (global array for sharded arguments)."""
    per_rank: bool = False


def _parse_options(text: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in filter(None, text.split(",")):
        key, eq, value = part.partition("=")
        if not eq:
            raise UserError(f"{what}: expected key=value, got '{part}'")
        out[key.strip()] = value.strip()
    return out


def random_input(opts: dict[str, str], dtype: np.dtype, shape: tuple[int, ...] | None, what: str) -> Any:
    unknown = set(opts) - {"seed", "low", "high"}
    if unknown:
        raise UserError(f"{what}: unknown random option(s) {', '.join(sorted(unknown))} (seed, low, high)")
    try:
        seed = int(opts.get("seed", "0"))
        low = float(opts["low"]) if "low" in opts else None
        high = float(opts["high"]) if "high" in opts else None
    except ValueError:
        raise UserError(f"{what}: random options must be numbers") from None
    if seed < 0:
        raise UserError(f"{what}: the random seed must not be negative, got {seed}")
    if shape is not None and any(s < 0 for s in shape):
        raise UserError(f"{what}: cannot make random data for a dynamic shape; give a .npy file")
    rng = np.random.default_rng(seed)
    size = shape if shape is not None else ()
    if dtype == np.bool_:
        a = rng.random(size) < 0.5
    elif dtype.kind in "iu":
        a = rng.integers(*_int_bounds(low, high, dtype, what), size=size).astype(dtype)
    elif low is not None or high is not None:
        a = rng.uniform(*_bounds(low, high, 0.0, 1.0, what), size=size).astype(dtype)
    else:
        a = rng.standard_normal(size).astype(dtype)
    return a if shape is not None else a[()]


def _bounds(low: float | None, high: float | None, low0: float, high0: float, what: str) -> tuple[float, float]:
    """[low, high) of random values, each defaulting to its `*0`; finite with low < high."""
    lo, hi = low0 if low is None else low, high0 if high is None else high
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UserError(f"{what}: random bounds need finite low < high, got low={lo:g}, high={hi:g}")
    return lo, hi


def _int_bounds(low: float | None, high: float | None, dtype: np.dtype, what: str) -> tuple[int, int]:
    """[low, high) of random integers of `dtype` (default [-10, 10), unsigned [0, 10))."""
    lo, hi = _bounds(low, high, 0 if dtype.kind == "u" else -10, 10, what)
    ilo, ihi = math.ceil(lo), math.ceil(hi)
    info = np.iinfo(dtype)
    if ilo >= ihi or ilo < info.min or ihi - 1 > info.max:
        raise UserError(f"{what}: no {dtype} values in [{lo:g}, {hi:g})")
    return ilo, ihi


def check_input(value: Any, dtype: np.dtype, shape: tuple[int, ...] | None, what: str) -> Any:
    if shape is None:
        if dtype.kind in "iu" and isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
            info = np.iinfo(dtype)
            if not (math.isfinite(value) and info.min <= value <= info.max):
                raise UserError(f"{what}: {value} is out of range for {dtype} ([{info.min}, {info.max}])")
        try:
            arr = np.asarray(value)
        except OverflowError:
            raise UserError(f"{what}: {value} is out of range for {dtype}") from None
        if arr.ndim != 0:
            raise UserError(f"{what}: expected a scalar, got an array of shape {arr.shape}")
        return arr.astype(dtype)[()]
    arr = np.asarray(value)
    if arr.dtype != dtype:
        raise UserError(f"{what}: expected {_describe(dtype, shape)}, got elements of {arr.dtype}")
    if arr.ndim != len(shape) or any(s >= 0 and s != a for s, a in zip(shape, arr.shape)):
        raise UserError(f"{what}: expected {_describe(dtype, shape)}, got shape {tuple(arr.shape)}")
    return arr


_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def _magic(path: str, what: str) -> bytes:
    """The first bytes of `path` (UserError when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(6)
    except FileNotFoundError:
        raise UserError(f"{what}: no such file '{path}'") from None
    except IsADirectoryError:
        raise UserError(f"{what}: '{path}' is a directory") from None
    except OSError as e:
        raise UserError(f"{what}: cannot read '{path}': {e.strerror}") from None


def _load_npy(path: str, what: str) -> np.ndarray:
    """A .npy file's array; one line for anything else (never unpickled)."""
    if not _magic(path, what).startswith(_NPY_MAGIC):
        raise UserError(f"{what}: '{path}' is not a .npy file (numpy.save writes one)")
    try:
        value = np.load(path, allow_pickle=False)
    except MemoryError:
        raise UserError(f"{what}: '{path}' is too large to load into memory") from None
    except (OSError, ValueError, EOFError) as e:
        reason = "it holds Python objects, which are not loaded" if "allow_pickle" in str(e) else str(e)
        raise UserError(f"{what}: cannot read '{path}' as a .npy file ({reason})") from None
    if not isinstance(value, np.ndarray) or value.dtype.hasobject:
        raise UserError(f"{what}: '{path}' holds Python objects, which are not loaded")
    return value


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"


RANDOM_SCRATCH = 8
"""Bytes per element `random_input` needs besides the result: numpy draws in float64 or int64."""


def check_allocation(shape: Sequence[int] | None, dtype: np.dtype, what: str, scratch: int = 0) -> None:
    """UserError (one line with the size) for an array this machine cannot hold: more
    bytes than its physical memory (with `scratch` bytes per element of temporaries),
    or more elements than numpy can index. Checked before numpy is asked, whose
    MemoryError would say it with a traceback (or Linux's OOM killer, without a word)."""
    if shape is None or any(s < 0 for s in shape):
        return
    nbytes = math.prod(shape) * (dtype.itemsize + scratch)
    desc = "x".join(map(str, shape)) or "scalar"
    if math.prod(shape) > np.iinfo(np.intp).max or nbytes > np.iinfo(np.intp).max:
        raise UserError(f"{what}: {desc} {dtype} is beyond what numpy can allocate ({math.prod(shape)} elements)")
    total = physical_memory()
    if total is not None and nbytes > total:
        array = math.prod(shape) * dtype.itemsize
        making = f" ({_gib(nbytes)} while it is made)" if scratch else ""
        raise UserError(f"{what}: {desc} {dtype} is {_gib(array)}{making}, more than this machine's {_gib(total)} of memory")


def physical_memory() -> int | None:
    """Bytes of physical memory, if the system says."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def allocating(make: Callable[[], Any], shape: Sequence[int] | None, dtype: np.dtype, what: str, scratch: int = 0) -> Any:
    """`make()`, with the size checked first and numpy's own refusal as one line."""
    check_allocation(shape, dtype, what, scratch)
    try:
        return make()
    except MemoryError as e:
        size = re.search(r"allocate ([0-9.]+ [KMGTP]?i?B)", str(e))
        need = f" ({size.group(1)})" if size else ""
        raise UserError(f"{what}: out of memory making the input{need}") from None
    except ValueError as e:  # numpy's own limits: dimensions, sizes
        raise UserError(f"{what}: numpy cannot make an array of this shape ({e})") from None


def _input_spec(spec: str, b: Boundary, world: int) -> InputSpec:
    dtype, shape = np_type(b.type)
    what = f"input {b.label}"
    kind, _, rest = spec.partition(":")
    if kind == "random":
        opts = _parse_options(rest, what)
        value = allocating(lambda: random_input(opts, dtype, shape, what), shape, dtype, what, RANDOM_SCRATCH)
        return InputSpec(b.label, lambda r: value)
    if kind in ("zeros", "ones") and not rest:
        if shape is not None and any(s < 0 for s in shape):
            raise UserError(f"{what}: cannot make {kind} for a dynamic shape; give a .npy file")
        value = allocating(lambda: (np.zeros if kind == "zeros" else np.ones)(shape or (), dtype), shape, dtype, what)
        return InputSpec(b.label, lambda r: value if shape is not None else value[()])
    if spec.endswith(".npy") or "/" in spec or os.path.exists(spec):
        if "{rank}" in spec:
            if b.sharding is not None:
                raise UserError(f"{what}: is sharded: give one global array, not one file per rank")
            return InputSpec(b.label, lambda r: check_input(_load_npy(spec.replace("{rank}", str(r)), what), dtype, shape, what), per_rank=True)
        value = check_input(_load_npy(spec, what), dtype, shape, what)
        return InputSpec(b.label, lambda r: value)
    try:
        number = int(spec) if spec.lstrip("+-").isdigit() else float(spec)
    except ValueError:
        raise UserError(f"{what}: bad input spec '{spec}' (a .npy file, random[:seed=S], zeros, ones or a number)") from None
    if shape is not None:
        raise UserError(f"{what}: expected {_describe(dtype, shape)}, got the number {spec}")
    value = check_input(number, dtype, None, what)
    return InputSpec(b.label, lambda r: value)


def load_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of a .npz archive (`--inputs`); one line for a file that is not one,
    a truncated or corrupt archive, or arrays of Python objects (never unpickled)."""
    import zipfile
    import zlib

    what = "--inputs"
    if not _magic(path, what).startswith(_ZIP_MAGIC):
        raise UserError(f"{what}: '{path}' is not a .npz file (numpy.savez writes one)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            if not isinstance(archive, np.lib.npyio.NpzFile):
                raise UserError(f"{what}: '{path}' is not a .npz file (numpy.savez writes one)")
            return {k: archive[k] for k in archive.files}
    except (zipfile.BadZipFile, zlib.error, EOFError, zipfile.LargeZipFile, NotImplementedError) as e:
        raise UserError(f"{what}: '{path}' is a damaged or truncated .npz file ({e})") from None
    except MemoryError:
        raise UserError(f"{what}: '{path}' is too large to load into memory") from None
    except (OSError, ValueError) as e:
        reason = "an array holds Python objects, which are not loaded" if "allow_pickle" in str(e) else str(e)
        raise UserError(f"{what}: cannot read '{path}' as a .npz file ({reason})") from None


def positional_inputs(arrays: Mapping[str, Any], keys_of: list[list[str]], npz: str | None, tool: str = "shardc-run") -> list[str] | None:
    """The archive's array names in order, when none of them names an argument: an
    archive written by name from another tool (torch-mlir's functions take %arg0, ...,
    PyTorch's state_dict names its arrays by FQN) is read in order, argument k from
    array k. Arrays past the last argument are reported, not taken."""
    if not arrays or any(x in arrays for keys in keys_of for x in keys):
        return None
    names = list(arrays)
    if len(names) > len(keys_of):
        print(f"{tool}: note: --inputs{'' if npz is None else ' ' + npz}: its array names match no argument, so arrays are taken in order; "
              f"{len(names) - len(keys_of)} left over ({', '.join(names[len(keys_of):])})", file=sys.stderr)
    return names


def input_specs(prog: Program, given: Sequence[str], world: int, npz: str | None = None) -> list[InputSpec]:
    by_name: dict[str, str] = {}
    for item in given:
        name, eq, spec = item.partition("=")
        if not eq or not name or not spec:
            raise UserError(f"bad --input '{item}': expected NAME=SPEC")
        key = name.strip().lstrip("%")
        if key in by_name:
            raise UserError(f"--input {key} is given twice: give it once")
        by_name[key] = spec.strip()
    arrays = load_npz(npz) if npz is not None else {}
    keys_of = [[b.label.lstrip("%"), str(k), f"arg{k}"] for k, b in enumerate(prog.args)]
    positional = positional_inputs(arrays, keys_of, npz)
    specs: list[InputSpec] = []
    used: set[str] = set()
    used_arrays: set[str] = set()
    for k, b in enumerate(prog.args):
        keys = keys_of[k]
        given = [x for x in dict.fromkeys(keys) if x in by_name]
        if len(given) > 1:
            raise UserError(f"--input {given[0]} and --input {given[1]} both name {b.label} (argument #{k}): give one")
        key = given[0] if given else None
        if key is None:
            from_npz = positional[k] if positional is not None and k < len(positional) else next((x for x in keys if x in arrays), None)
            if from_npz is None:
                raise UserError(f"missing --input for {b.label} ({_describe(*np_type(b.type))})")
            used_arrays.add(from_npz)
            dtype, shape = np_type(b.type)
            value = check_input(arrays[from_npz], dtype, shape, f"input {b.label} (from {npz})")
            specs.append(InputSpec(b.label, lambda r, v=value: v))
            continue
        used.add(key)
        specs.append(_input_spec(by_name[key], b, world))
    extra = set(by_name) - used
    if extra:
        names = ", ".join(b.label for b in prog.args) or "none"
        raise UserError(f"--input {sorted(extra)[0]}: @{prog.entry} has no such argument (arguments: {names})")
    unknown = set(arrays) - used_arrays - {x for keys in keys_of for x in keys}
    if unknown and positional is None:
        names = ", ".join(b.label for b in prog.args) or "none"
        raise UserError(f"--inputs {npz}: array '{sorted(unknown)[0]}' names no argument of @{prog.entry} (arguments: {names})")
    return specs


def grid_of(sh: Any, world: int) -> tuple[int, ...]:
    from shardc.runtime.execute.sharding import resolve_grid

    return resolve_grid(sh.grid_shape, world)


def local_inputs(prog: Program, specs: Sequence[InputSpec], rank: int, world: int) -> list[Any]:
    from shardc.runtime.execute.comm import CommError, delinearize

    out: list[Any] = []
    for b, s in zip(prog.args, specs):
        value = s.make(rank)
        if b.sharding is not None:
            try:
                grid = grid_of(b.sharding, world)
                value = np.require(b.sharding.local_part(value, grid, delinearize(rank, grid)), requirements="C")  # 0-d stays 0-d
            except CommError as e:
                raise UserError(f"input {b.label}: {e}") from None
        out.append(value)
    return out


# ---------------------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------------------


def assemble(prog: Program, per_rank: Sequence[Sequence[Any]], world: int) -> list[tuple[str, Any, bool]]:
    """(name, value, is_global) per result: sharded results put together, replicated
    ones from rank 0; in a program without shardings every rank's value is kept. Names
    (and so --output's file names) come from the result's position, never from the IR."""
    out: list[tuple[str, Any, bool]] = []
    for i, b in enumerate(prog.results):
        if b.sharding is not None:
            grid = grid_of(b.sharding, world)
            out.append((f"result{i}", b.sharding.assemble([np.asarray(r[i]) for r in per_rank], grid), True))
        elif prog.sharded or world == 1:
            out.append((f"result{i}", _whole(b, per_rank[0][i]), True))
        else:
            for r, vals in enumerate(per_rank):
                out.append((f"result{i}.rank{r}", vals[i], False))
    return out


def _whole(b: Boundary, value: Any) -> Any:
    """A result without a sharding, checked to be the whole value (not one rank's piece)."""
    dtype, shape = np_type(b.type)
    got = np.shape(value)
    if shape is not None and (len(got) != len(shape) or any(0 <= s != g for s, g in zip(shape, got))):
        raise UserError(
            f"{b.label}: expected {_describe(dtype, shape)}, but rank 0 returned shape {got} "
            "and no sharding is recorded to put the pieces together"
        )
    return value


def type_text(value: Any) -> str:
    """MLIR-style shape and element type of a result: `16x32 f32`, `i64` for a scalar."""
    arr = np.asarray(value)
    bits = arr.dtype.itemsize * 8
    elem = {
        "b": "i1", "i": f"i{bits}", "u": f"ui{bits}", "f": f"f{bits}", "c": f"complex<f{bits // 2}>",
    }.get(arr.dtype.kind, arr.dtype.name)
    return " ".join(filter(None, ["x".join(map(str, arr.shape)), elem]))


def _number(x: Any) -> str:
    return f"{x:.6g}" if isinstance(x, float | np.floating) else str(x)


def summary(value: Any) -> str:
    """One line: the type, then every value (up to 8), or min/max/mean and the first few."""
    arr = np.asarray(value)
    head = type_text(arr)
    if arr.ndim == 0:
        return f"{head} {_number(arr[()].item())}"
    if arr.size <= 8:
        body = np.array2string(arr, separator=", ", max_line_width=10**6, formatter={"float_kind": lambda x: f"{x:.6g}"})
        return f"{head} {' '.join(body.split())}"
    flat = arr.reshape(-1)
    first = ", ".join(_number(x) for x in flat[:4].tolist())
    if arr.dtype.kind == "b":
        return f"{head}  true {int(flat.sum())} of {flat.size}  [{first}, ...]"
    if arr.dtype.kind == "c":
        return f"{head}  [{first}, ...]"
    stats = f"min {_number(flat.min().item())}  max {_number(flat.max().item())}  mean {_number(float(flat.mean(dtype=np.float64)))}"
    return f"{head}  {stats}  [{first}, ...]"


_RESULT_NAME = re.compile(r"result\d+(\.rank\d+)?")


def write_outputs(results: list[tuple[str, Any, bool]], out_dir: str | None, quiet: bool = False) -> None:
    """Save the results under `out_dir` (one line each), or print their summaries."""
    if out_dir is None:
        if not quiet:
            for name, value, _ in results:
                print(f"{name}: {summary(value)}")
        return
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        for name, value, _ in results:
            assert _RESULT_NAME.fullmatch(name), name  # a file name of our own making
            path = Path(out_dir) / f"{name}.npy"
            np.save(path, np.asarray(value), allow_pickle=False)
            if not quiet:
                print(f"wrote {path}: {type_text(value)}")
    except OSError as e:
        raise UserError(f"cannot write to '{out_dir}': {e.strerror}") from None


def as_results(value: Any, n: int) -> tuple[Any, ...]:
    if n == 1 and not isinstance(value, tuple):
        return (value,)
    if value is None:
        return ()
    return tuple(value) if isinstance(value, tuple) else (value,)


def _print_timing(prog: Program, runs: Sequence[float]) -> None:
    t = prog.timings
    if prog.cached == "compiled":
        print(f"{TOOL}: parse {t['parse'] * 1e3:.1f} ms, pipeline {t['pipeline'] * 1e3:.1f} ms, compile {t['compile'] * 1e3:.1f} ms")
    else:
        where = "the compile cache" if prog.cached == "cache" else "rank 0"
        print(f"{TOOL}: loaded the compiled program from {where} in {t['compile'] * 1e3:.1f} ms (no parse, no pipeline)")
    for r, s in enumerate(runs):
        print(f"{TOOL}: rank {r}: run {s * 1e3:.3f} ms")


# ---------------------------------------------------------------------------------------
# Drivers
# ---------------------------------------------------------------------------------------


def _call(prog: Program, local: Sequence[Any]) -> tuple[tuple[Any, ...], float]:
    t0 = time.perf_counter()
    value = prog.compiled.call(prog.entry, *local)
    return as_results(value, len(prog.results)), time.perf_counter() - t0


def run_simulated(args: argparse.Namespace) -> int:
    from shardc.runtime.execute.comm import RankFailed
    from shardc.runtime.execute.comm import run_simulated as simulate

    n = args.simulate
    if n < 1:
        raise UserError("--simulate needs at least 1 rank")
    prog = prepare(args)
    _emit_python(prog, args)
    specs = input_specs(prog, args.input, n, args.inputs)
    per_rank = [local_inputs(prog, specs, r, n) for r in range(n)]
    try:
        outs = simulate(n, lambda *a: _call(prog, a), per_rank_args=per_rank)
    except RankFailed as e:
        sys.stderr.write(f"{TOOL}: {e}\n")
        return 1
    results = assemble(prog, [o[0] for o in outs], n)
    if args.timing:
        _print_timing(prog, [o[1] for o in outs])
    write_outputs(results, args.output, args.quiet)
    return 0


def _emit_python(prog: Program, args: argparse.Namespace) -> None:
    if args.emit_python:
        try:
            Path(args.emit_python).write_text(prog.compiled.source)
        except OSError as e:
            raise UserError(f"cannot write '{args.emit_python}': {e.strerror}") from None


def run_mpi(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, abort_on_error, use_comm
    from shardc.runtime.execute.kernels import agreement

    world = MPI.COMM_WORLD
    rank, n = world.Get_rank(), world.Get_size()
    # Every rank prepares the same program; rank 0 alone reports what went wrong.
    error: str | None = None
    muted = io.StringIO()
    quiet = contextlib.redirect_stderr(muted) if rank else contextlib.nullcontext()
    prog = None
    local: list[Any] = []
    args.world = world
    with quiet:
        try:
            prog = prepare(args)
            if rank == 0:
                _emit_python(prog, args)
            local = local_inputs(prog, input_specs(prog, args.input, n, args.inputs), rank, n)
        except UserError as e:
            error = f"{TOOL}: error: {display(str(e))}"
        except Reported:
            error = ""
    # SHARDC_CACHE_DEBUG's lines are asked for on every rank (one compile per job shows there).
    sys.stderr.write("".join(ln for ln in muted.getvalue().splitlines(True) if ln.startswith("shardc: compile cache: ")))
    errors = world.allgather(error)
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        if rank == 0 and first:
            sys.stderr.write(first + "\n")
        return 1
    assert prog is not None
    comm = MPIComm(world)
    agreement.agree(world)
    with abort_on_error(world), use_comm(comm):
        world.Barrier()
        values, seconds = _call(prog, local)
    gathered = world.gather((values, seconds), root=0)
    if rank == 0:
        assert gathered is not None
        with abort_on_error(world):
            results = assemble(prog, [g[0] for g in gathered], n)
            if args.timing:
                _print_timing(prog, [g[1] for g in gathered])
            try:
                write_outputs(results, args.output, args.quiet)
            except UserError as e:
                sys.stderr.write(f"{TOOL}: error: {e}\n")
                world.Abort(1)
    world.Barrier()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_tool(TOOL, lambda: _main(list(sys.argv[1:] if argv is None else argv)))


def _main(argv: list[str]) -> int:
    args = _arg_parser().parse_args(argv)
    if args.simulate is None and under_mpi():
        return run_mpi(args)
    if args.simulate is None:
        args.simulate = 1
    return run_simulated(args)


if __name__ == "__main__":
    sys.exit(main())
