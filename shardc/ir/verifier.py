"""The IR verifier shardc-opt runs after parsing and after each pass.

xDSL's `Operation.verify()` raises on the first failure without saying which op failed;
this verifier walks the IR in MLIR's order (OperationVerifier) and calls each op's own
checks, so every error is reported at the failing op's location:

- an op's invariants are checked before its regions (MLIR's "on entrance");
- inside one isolated-from-above op the walk stops at the first error; sibling
  isolated ops (functions in a module) are all verified, as mlir-opt does;
- block structure (terminators, successors) and same-block dominance use MLIR's texts.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Block, Operation
from xdsl.traits import IsTerminator, NoTerminator
from xdsl.utils.exceptions import DiagnosticException

from shardc.ir import diagnostics
from shardc.ir.traits import has_trait, is_unregistered
from shardc.ir.diagnostics import DiagnosticError, Severity, current_engine
from shardc.ir.fast_verify import verify_op
from shardc.ir.isolation import is_isolated


def verify(op: Operation) -> bool:
    """Verify `op` and everything nested; emit diagnostics; True when valid."""
    try:
        if not _verify_tree(op):
            return False
        return _verify_dominance(op)
    except RecursionError as exc:  # the walk itself, on a program nested past the limit
        report_crash(op, "the verifier", exc)
        return False


def _report(op: Operation, exc: Exception) -> None:
    if isinstance(exc, DiagnosticError):
        current_engine().emit(exc.diagnostic)
    elif isinstance(exc, DiagnosticException):
        diagnostics.emit(op, Severity.ERROR, str(exc))
    else:
        report_crash(op, f"the verifier of '{op.name}'", exc)


def report_crash(target: Operation | Attribute | None, where: str, exc: BaseException) -> None:
    """Turn a Python exception raised by dialect or pass code into a located error: what
    is wrong with the input when bad input caused it (`shardc.ir.input_problems.input_problem`:
    nesting past the recursion limit, memory), else an internal error to report."""
    from shardc.ir.input_problems import input_problem

    if (problem := input_problem(exc)) is not None:
        diagnostics.emit(target, Severity.ERROR, f"{problem} (in {where})")
        return
    text, target = crash_text(exc, where, target)
    current_engine().crashes.append(f"{where}: {text}")
    diagnostics.emit(target, Severity.ERROR, f"internal error in {where}: {text}")


def crash_text(
    exc: BaseException, where: str, target: Operation | Attribute | None
) -> tuple[str, Operation | Attribute | None]:
    """The text of an internal error (the exception, where in shardc it was raised,
    the op being processed if known) and where to locate it: the op the failing code
    was working on, when `target` is only the whole module."""
    op = crash_op(exc)
    if op is not None and (target is None or isinstance(target, ModuleOp)):
        target = op
    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    site = _raise_site(exc)
    on = f"on '{op.name}', " if op is not None else ""
    return f"{text} ({on}{site}; please report)" if site else f"{text} ({on}please report)", target


def crash_op(exc: BaseException) -> Operation | None:
    """The innermost op the frames of `exc`'s traceback were processing (a local `op`
    or `operation`, or the op whose method raised); None if none (a module is not one)."""
    found: Operation | None = None
    tb = exc.__traceback__
    while tb is not None:
        local = tb.tb_frame.f_locals
        for key in ("op", "operation", "self"):
            value = local.get(key)
            if isinstance(value, Operation) and not isinstance(value, ModuleOp):
                found = value
                break
        tb = tb.tb_next
    return found


def _raise_site(exc: BaseException) -> str:
    """`at module.py:line` of the frame that raised (for the bug report)."""
    import os

    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"


# -- structure ---------------------------------------------------------------------------


def _may_lack_terminator(block: Block) -> bool:
    region = block.parent
    if region is None:
        return True
    if len(region.blocks) != 1:
        return False
    parent = region.parent
    return parent is None or is_unregistered(parent) or has_trait(parent, NoTerminator)


def _verify_tree(op: Operation) -> bool:
    if not _on_entrance(op):
        return False
    for region in op.regions:
        for block in region.blocks:
            if not _block_on_entrance(block):
                return False
            for child in block.ops:
                if not is_isolated(child) and not _verify_tree(child):
                    return False
            if not _block_on_exit(block):
                return False
    # Isolated children are verified independently: report the errors of each.
    results = [
        _verify_tree(child) and _verify_dominance(child)
        for region in op.regions
        for block in region.blocks
        for child in block.ops
        if is_isolated(child)
    ]
    return all(results)


def _on_entrance(op: Operation) -> bool:
    if any(type(operand).__name__ == "ErasedSSAValue" for operand in op._operands):  # pyright: ignore[reportPrivateUsage]
        diagnostics.emit(op, Severity.ERROR, "null operand found")
        return False
    if is_unregistered(op):
        return True
    try:
        verify_op(op)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a diagnostic
        _report(op, exc)
        return False
    return True


def _block_on_entrance(block: Block) -> bool:
    if block.first_op is None:
        if _may_lack_terminator(block):
            return True
        parent = block.parent.parent if block.parent is not None else None
        diagnostics.emit(
            parent.location if parent is not None else None,
            Severity.ERROR,
            "empty block: expect at least a terminator",
        )
        return False
    last = block.last_op
    for op in block.ops:
        if op.successors and op is not last:
            diagnostics.emit(
                op, Severity.ERROR, "operation with block successors must terminate its parent block"
            )
            return False
    return True


def _block_on_exit(block: Block) -> bool:
    last = block.last_op
    if last is None:
        return True
    for successor in last.successors:
        if successor.parent is not block.parent:
            diagnostics.emit(
                last, Severity.ERROR, f"'{last.name}' op branching to block of a different region"
            )
            return False
    if _may_lack_terminator(block):
        return True
    if is_unregistered(last) or has_trait(last, IsTerminator):
        return True
    diagnostics.emit(last, Severity.ERROR, f"block with no terminator, has {_short(last)}")
    return False


def _short(op: Operation) -> str:
    text = diagnostics.op_text(op, generic=False)
    return text.splitlines()[0] if text else f"'{op.name}'"


# -- dominance (within a block) ------------------------------------------------------------


def _verify_dominance(op: Operation) -> bool:
    """Uses of a value defined later in the same block (the common dominance error)."""
    if isinstance(op, ModuleOp) and not op.regions:
        return True
    worklist = [op]
    while worklist:
        current = worklist.pop()
        for region in current.regions:
            for block in region.blocks:
                graph = isinstance(current, ModuleOp)
                # keyed by id: an op's hash is a Python call; every op here is alive
                position = {id(o): i for i, o in enumerate(block.ops)} if not graph else {}
                for index, inner in enumerate(block.ops):
                    if not graph:
                        for number, operand in enumerate(inner._operands):  # pyright: ignore[reportPrivateUsage]
                            owner = getattr(operand, "op", None)
                            if owner is not None and position.get(id(owner), -1) >= index:
                                diag = diagnostics.make(
                                    inner, Severity.ERROR, f"operand #{number} does not dominate this use"
                                )
                                diag.attach_note(
                                    "operand defined here (op in the same block)", owner.location
                                )
                                current_engine().emit(diag)
                                return False
                    if inner.regions and not is_isolated(inner):
                        worklist.append(inner)
    return True
