"""A compiled module's callables and their calling convention, apart from the compiler.

`shardc.runtime.codegen.compile` generates the code; this module holds what runs it: the
`CompiledModule` that calls it, its argument conversion, the stub of an external
function, the allocator settings. It imports no xDSL (only the types it is handed), so a
compile-cache hit (`shardc.runtime.codegen.cache`), which builds its callables from an entry's
source, loads no compiler: `compile.py` re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from shardc.ir.escape import display
from shardc.runtime.execute.helpers import scalar_converter

if TYPE_CHECKING:
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ModuleOp


class RuntimeExecutionError(Exception):
    """An error raised while running compiled code (e.g. calling an external function)."""


def external_stub(name: str) -> Callable[..., object]:
    def stub(*args: object) -> object:
        raise RuntimeExecutionError(
            f"runtime: call to external function @{display(name)}: it is declared without a body and the runtime cannot execute it"
        )

    return stub


@dataclass
class CompiledModule:
    """The functions of a module, compiled. Call `fn = cm["name"]`, or `cm.call("name", ...)`."""

    module: ModuleOp
    source: str
    functions: dict[str, Callable[..., object]] = field(default_factory=dict)
    signatures: dict[str, func.FuncOp] = field(default_factory=dict)
    _arg_specs: dict[str, list[ArgSpec]] = field(default_factory=dict, repr=False)
    bindings: dict[str, object] = field(default_factory=dict, repr=False)
    """The globals the source was generated against (what `shardc.runtime.codegen.cache` stores)."""
    pynames: dict[str, str] = field(default_factory=dict, repr=False)
    """Symbol -> the generated function's Python name."""

    def __getitem__(self, name: str) -> Callable[..., object]:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"runtime: no function @{display(name)} in module") from None

    def call(self, name: str, *args: object) -> object:
        """Call with argument conversion (lists/scalars to the declared types) and numpy
        floating-point warnings silenced (IEEE results, as MLIR)."""
        fn = self[name]
        specs = self._call_specs(name)
        if len(args) != len(specs):
            raise RuntimeExecutionError(f"runtime: @{display(name)} takes {len(specs)} arguments, got {len(args)}")
        # An array of the declared dtype and static shape passes as is (what `_convert_arg`
        # returns for it): the step's 320 arguments skip the call and its shape loop.
        conv = [a if type(a) is np.ndarray and a.shape == spec[1] and a.dtype == spec[0] else _convert_arg(a, spec, name, k) for k, (a, spec) in enumerate(zip(args, specs))]
        donated = self.donated(name)
        if donated:
            _guard_donated(conv, donated)
        with np.errstate(all="ignore"):
            return fn(*conv)

    def arg_specs(self, name: str) -> list[ArgSpec]:
        """Per argument of `@name`: (dtype, shape), or (None, the type) for a scalar."""
        specs = self._arg_specs.get(name)
        if specs is None:
            specs = self._arg_specs[name] = [_arg_spec(t) for t in self.signatures[name].function_type.inputs.data]
        return specs

    def _call_specs(self, name: str) -> list[ArgSpec]:
        """The specs `call` converts arguments by (a cache hit's name scalar types by text)."""
        return self.arg_specs(name)

    def python_source(self) -> str:
        return self.source

    def donated(self, name: str) -> dict[int, int]:
        """Argument -> result that `@name` writes in place (`shardc.runtime.codegen.donation`):
        the donation pairs asked for at compile time that could be honoured."""
        return dict(getattr(self[name], "shardc_donated", ()))

    def refused(self, name: str) -> dict[int, str]:
        """Donated arguments of `@name` that are not written, with why."""
        return dict(getattr(self[name], "shardc_refused", ()))


def _guard_donated(conv: list[object], donated: dict[int, int]) -> None:
    """Copy each donated argument that the function must not write: read-only, not
    C-contiguous, or sharing memory with another argument (its caller's memory then
    stays as it was; the result lives in the copy). Arrays can share memory only
    through a common owner (numpy points every view at the array owning the memory), so
    byte ranges are compared only within an owner's group, or among all arguments when
    one's memory belongs to some other object (a buffer, a mapped file)."""
    from numpy.lib.array_utils import byte_bounds

    groups: dict[int, list[int]] = {}
    foreign: list[int] = []
    for k, a in enumerate(conv):
        if isinstance(a, np.ndarray) and a.nbytes:
            owner = a if a.base is None else a.base
            if isinstance(owner, np.ndarray) and owner.base is None:
                groups.setdefault(id(owner), []).append(k)
            else:
                foreign.append(k)
    clash: set[int] = set()
    # memory owned elsewhere may be any array's: then every range is compared
    for ks in [[k for ks in groups.values() for k in ks] + foreign] if foreign else groups.values():
        if len(ks) < 2 or not any(k in donated for k in ks):
            continue
        spans = sorted((*byte_bounds(conv[k]), k) for k in ks)  # type: ignore[arg-type]
        active: list[tuple[int, int]] = []  # (end, argument) of spans that may still overlap
        for lo, hi, k in spans:
            active = [(e, j) for e, j in active if e > lo]
            clash.update(x for _, j in active for x in (j, k) if x in donated)
            active.append((hi, k))
    for k in donated:
        a = conv[k]
        if k in clash or not isinstance(a, np.ndarray) or not (a.flags.writeable and a.flags.c_contiguous):
            conv[k] = np.array(a, copy=True, order="C")


ArgSpec = tuple[np.dtype, tuple[int, ...]] | tuple[None, object]
"""(dtype, shape) of a shaped argument type, or (None, the scalar type)."""


def _arg_spec(t: object) -> ArgSpec:
    from xdsl.dialects.builtin import MemRefType, TensorType

    from shardc.runtime.execute.dtypes import np_dtype

    if isinstance(t, TensorType | MemRefType):
        return np_dtype(t.get_element_type()), tuple(t.get_shape())
    return None, t


def _convert_arg(value: object, spec: ArgSpec, fname: str, k: int) -> object:
    dt, shape = spec
    if dt is None:
        if type(shape) is str:  # a cache hit's scalar type, by its text (`scalar_spec`)
            return scalar_converter(shape)(value)  # type: ignore[misc]
        from shardc.runtime.execute.dtypes import to_scalar

        return to_scalar(value, shape)  # type: ignore[arg-type]
    arr = value if isinstance(value, np.ndarray) and value.dtype == dt else np.asarray(value, dtype=dt)
    if len(shape) != arr.ndim or any(s >= 0 and s != a for s, a in zip(shape, arr.shape)):  # type: ignore[arg-type]
        raise RuntimeExecutionError(f"runtime: @{display(fname)} argument #{k}: expected shape {shape} (-1 = dynamic), got {arr.shape}")
    return arr


_ALLOCATOR_TUNED = False


def tune_allocator() -> bool:
    """Keep freed large arrays in the process heap (glibc only; once per process).

    A compiled function allocates and frees the same large intermediates on every call.
    With glibc's defaults, arrays past the (adaptive) mmap threshold get fresh pages from
    the kernel each time, and freed heap tops are trimmed back to it, so every call pays
    for page faults and zeroing (about a tenth of a training step). A fixed 32 MiB
    threshold and a high trim threshold make the next call reuse the same memory; the
    process keeps its peak heap. numpy's transparent-huge-page advice is turned off
    (unless NUMPY_MADVISE_HUGEPAGE chooses): under THP's default `defrag=madvise` each
    first touch of an advised array waits for the kernel to compact memory into 2 MiB
    pages: a warm GPT job (n_layer 12, `mpiexec -n 2`) made its state 5x and its first
    step 1.9x slower with it, later steps no faster (bench/compile_startup.py). Set
    SHARDC_MALLOPT=0 to leave the allocator alone. Returns whether the settings were
    applied."""
    global _ALLOCATOR_TUNED
    if _ALLOCATOR_TUNED:
        return True
    import ctypes
    import os
    import sys

    if os.environ.get("SHARDC_MALLOPT", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    if "NUMPY_MADVISE_HUGEPAGE" not in os.environ:
        set_hugepage = getattr(getattr(getattr(np, "_core", None), "multiarray", None), "_set_madvise_hugepage", None)
        if set_hugepage is not None:
            set_hugepage(False)
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    ok = mallopt(m_mmap_threshold, 32 << 20) == 1 and mallopt(m_trim_threshold, 1 << 30) == 1
    _ALLOCATOR_TUNED = ok
    return ok


def prepare_process() -> None:
    """What running compiled code asks of the process, before a module is compiled or
    loaded: the allocator's settings (`tune_allocator`) and numpy's OpenBLAS at the
    runtime's thread count (`blas.hold_threads`)."""
    from shardc.runtime.execute.kernels import blas

    tune_allocator()
    blas.hold_threads()


def scalar_spec(text: str) -> ArgSpec | None:
    """The ArgSpec of a scalar type given by its text, if `scalar_converter` converts it."""
    return (None, text) if scalar_converter(text) is not None else None
