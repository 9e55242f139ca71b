"""Compile `func.func` ops to Python callables over numpy.

Each function becomes generated Python source: one statement per op, SSA values as local
variables, kernels and constants bound as globals of the generated module. The source is
compiled and `exec`uted once per module and kept for dumping (`CompiledModule.source`).

Op semantics live in `shardc.runtime.codegen.kernels.<dialect>`: each module registers an
*emitter* per op class with `@register(OpClass)`; the registry is looked up along the
op class's MRO, then by op name (`@register_name("d.op")`, for ops whose class lives in a
module the runtime does not import). An emitter receives the op and the `FunctionBuilder`
(`builder.py`, what emitters import) and appends Python statements.
"""

from __future__ import annotations

import itertools
import linecache
import re
import warnings
from collections.abc import Mapping

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from shardc.ir.escape import display
from shardc.runtime.codegen.codegen_safe import py_hint, py_literal
from shardc.runtime.execute.code_check import UnsafeCodeError, check_code, generated_namespace
from shardc.runtime.execute.compiled import (  # noqa: F401  (re-exported)
    CompiledModule,
    RuntimeExecutionError,
    external_stub,
    prepare_process,
    tune_allocator,
)
from shardc.runtime.codegen.builder import CompileError, FunctionBuilder, ModuleCodegen, docstring, free_dead_values, single_block, too_deep


# ---------------------------------------------------------------------------------
# Module compilation
# ---------------------------------------------------------------------------------


# CompiledModule, its calling convention and the allocator settings live in
# `shardc.runtime.execute.compiled` (no xDSL: what a compile-cache hit loads); re-exported here.


def compile_module(
    module: ModuleOp,
    name: str = "module",
    fuse: bool = True,
    donate: Mapping[str, Mapping[int, int]] | None = None,
    copy: bool = True,
    scope: str = "",
) -> CompiledModule:
    """Compile every `func.func` of `module` (nested modules included) to Python. With
    `fuse`, chains of elementwise linalg ops run fused (`shardc.runtime.codegen.fusion`, on a
    copy: `module` is left as it is; `copy=False` rewrites `module` itself, for a caller
    that gives it up: cloning the GPT step took 1.2 s of its 16 s cold compile). `donate` names, per function, arguments whose
    buffers the caller gives up and the result to write into each
    (`shardc.runtime.codegen.donation`: honoured where safe, `CompiledModule.donated`/`refused`
    say which). `scope`: see `ModuleCodegen`."""
    from shardc.runtime.codegen import kernels
    from shardc.runtime.codegen.fusion import fuse_elementwise
    from shardc.passes.uncollapse_batch_matmuls import uncollapse_batch_matmuls
    from shardc.passes.forward_send_copies import forward_send_copies
    from shardc.runtime.codegen.remake_casts import remake_argument_casts

    kernels.load_all()
    prepare_process()
    if (fuse or donate) and copy:
        module = module.clone()
    if fuse:
        uncollapse_batch_matmuls(module)  # torch-mlir's bmm over collapsed heads: no copies
        forward_send_copies(module)  # convert-shard-to-mpi's staged send buffers: no copies
        remake_argument_casts(module)  # a parameter's bf16 copy per product: not alive across the step
        fuse_elementwise(module)
    donations = _donate(module, donate or {})
    if fuse:  # `x + c` with c a contraction from zeros: the contraction accumulates into x
        from shardc.runtime.codegen.fusion import fuse_accumulations

        fuse_accumulations(module)
        from shardc.runtime.codegen.row_fusion import fuse_rows

        fuse_rows(module)  # softmax, layernorm, ...: one row kernel each (kernels/rows.py)
    cg = ModuleCodegen(module, scope)
    funcs = [op for op in module.walk() if isinstance(op, func.FuncOp)]
    if fuse:  # the same-bodied elementwise generics of a function: one kernel call
        from shardc.runtime.codegen.horizontal import plan_groups

        for f in funcs:
            if len(f.body.blocks) == 1:
                cg.hgroups.update(plan_groups(f.body.blocks.first))  # type: ignore[arg-type]
    chunks: list[str] = []
    pynames: dict[str, str] = {}
    for f in funcs:
        sym = f.sym_name.data
        pyname = cg.func_pyname(sym)
        pynames[sym] = pyname
        if not f.body.blocks:
            cg.globals[pyname] = external_stub(sym)
            continue
        chunks.append(_compile_function(cg, f, pyname))
        if sym in donations:  # on the function object, so a cached module has it too
            d = donations[sym]
            chunks.append(f"{pyname}.shardc_donated = {tuple(sorted(d.donated.items()))!r}")
            refused = "".join(f"({k}, {py_literal(v)}), " for k, v in sorted(d.refused.items()))
            chunks.append(f"{pyname}.shardc_refused = ({refused})")
    source = "\n".join(cg.prelude + chunks) + "\n"
    filename = f"<shardc-runtime:{py_hint(name, 'module')}:{next(_module_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        code = compile(source, filename, "exec")
    except (SyntaxError, RecursionError) as e:
        raise too_deep(e) from None
    _check_code(code)
    namespace = {**cg.globals, **generated_namespace()}
    exec(code, namespace)
    cm = CompiledModule(module=module, source=source, bindings=cg.globals, pynames=pynames)
    for f in funcs:
        sym = f.sym_name.data
        cm.functions[sym] = namespace[pynames[sym]]  # type: ignore[assignment]
        cm.signatures[sym] = f
    return cm


_module_counter = itertools.count()


def _donate(module: ModuleOp, donate: Mapping[str, Mapping[int, int]]) -> dict[str, object]:
    """Apply the donation requests to the module's functions (CompileError naming a
    function that is not there)."""
    from shardc.runtime.codegen.donation import DonationError, apply_donation

    funcs = {op.sym_name.data: op for op in module.walk() if isinstance(op, func.FuncOp)}
    out: dict[str, object] = {}
    for sym, pairs in donate.items():
        if sym not in funcs:
            raise CompileError(f"runtime: cannot donate arguments of @{display(sym)}: no such function")
        try:
            out[sym] = apply_donation(funcs[sym], pairs)
        except DonationError as e:
            raise CompileError(f"runtime: {display(str(e))}") from None
    return out


def _compile_function(cg: ModuleCodegen, f: func.FuncOp, pyname: str) -> str:
    if len(f.body.blocks) != 1:
        from shardc.runtime.codegen.kernels.cf import compile_function

        return compile_function(cg, f, pyname)
    g = FunctionBuilder(cg)
    block = single_block(f.body)
    args = g.bind_block_args(block)
    g.depth = 1
    from shardc.runtime.codegen.overlap import emit_block

    emit_block(g, block)  # collectives split into start + wait, overlapped with compute
    return free_dead_values("\n".join([f"def {pyname}({', '.join(args)}):", docstring(f), *g.lines]) + "\n")


def _check_code(code: object) -> None:
    """The generated module's compiled code checked (`check_code`: the rules a cache hit
    applies to the stored source, the prelude included), before anything of it runs.
    Walking each function's syntax tree instead (`check_generated`) made `del`
    placement 0.28-0.31 s of the GPT step's cold compile at n_layer 12 (0.21-0.22 s
    without it); reading the code objects' tables takes milliseconds."""
    try:
        check_code(code)  # type: ignore[arg-type]
    except UnsafeCodeError as e:
        raise CompileError(f"runtime: internal error: {e}: an emitter let IR text into the generated code") from None


def compile_text(text: str, name: str = "module") -> CompiledModule:
    """Parse MLIR text with the shardc context and parser (which reads hex floats in
    dense literals and `dense_resource` blobs as mlir-opt does) and compile it."""
    from shardc.context import make_context
    from shardc.ir.fast_parser import FastParser

    module = FastParser(make_context(), text).parse_module()
    return compile_module(module, name)


def warn_once(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=2)
