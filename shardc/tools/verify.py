"""`shardc-verify`: check by execution that partitioning (and lowering) a program keeps
its meaning.

    shardc-verify prog.mlir [--entry f] [--pipeline "..."] [--simulate N] [--stage partitioned|lowered|all]
                  [--seed S] [--rtol R] [--atol A]
    mpiexec -n 4 shardc-verify prog.mlir ...     # one process per rank

The program runs unsharded on one device and transformed on N ranks (default: the size
of its grid) on the same random inputs; every result is gathered to a global array and
compared. Prints `OK: N results match` (exit 0) or the first mismatch: the result's index
and name, its source location, max abs/rel error, and whether it is at rounding level
(exit 1). The default tolerance scales with rounding: an element matches when
|got - want| <= atol + rtol * |want|, rtol = 1e-4 and atol = max(1e-5, 8 * eps * sqrt(n) *
max|want|), n the longest reduction of the program (`shardc.tools.verification`'s docstring says why). A program or pipeline that
fails prints its MLIR diagnostic (exit 1); a command-line problem one line (exit 1).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from shardc.tools.cli import ArgParser, Reported, UserError, run_tool, under_mpi
from shardc.tools.run import read_program

TOOL = "shardc-verify"


def _arg_parser() -> argparse.ArgumentParser:
    from shardc.tools.verification import DEFAULT_RTOL, MIN_ATOL, ROUNDING_FACTOR

    p = ArgParser(prog=TOOL, description="Check by execution that a sharding pipeline keeps a program's meaning.")
    p.add_argument("program", help="the annotated .mlir file")
    p.add_argument("--entry", help="function to call (default: the only public function, or @main)")
    p.add_argument("--pipeline", help="passes that partition the program, in mlir-opt pass-pipeline syntax (default: sharding-propagation,shard-partition,shard-simplify,canonicalize,cse)")
    p.add_argument("--simulate", type=int, metavar="N", help="run N ranks as threads of this process (default outside mpiexec: the size of the grid)")
    p.add_argument("--stage", choices=("partitioned", "lowered", "all"), default="partitioned", help="compare the partitioned program, the MPI-lowered one (+convert-shard-to-mpi,canonicalize), or both")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--inputs", metavar="FILE.npz", help="the arguments from a .npz file (keyed by argument name, argN or index) instead of random ones: for programs whose inputs must be valid, e.g. token ids")
    p.add_argument("--rtol", type=float, default=DEFAULT_RTOL, help="relative tolerance for floating-point results (default: %(default)s)")
    p.add_argument(
        "--atol", type=float, default=None,
        help=f"absolute tolerance for floating-point results (default: scaled to rounding, max({MIN_ATOL:g}, "
        f"{ROUNDING_FACTOR} * eps * sqrt(n) * max|want|), n the program's longest reduction, max|want| the result's largest magnitude)",
    )
    return p


def _report(report) -> int:  # noqa: ANN001
    from shardc.ir.escape import display

    if report.status == "ok":
        print(report.summary())
        return 0
    if report.status == "mismatch":
        print(display(report.summary()))  # result names come from the IR
        return 1
    message = display(report.message.rstrip("\n"), keep_newlines=True)
    sys.stderr.write(message + "\n")
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    return run_tool(TOOL, lambda: _main(list(sys.argv[1:] if argv is None else argv)))


def _main(argv: list[str]) -> int:
    from shardc.tools.verification import verify, verify_mpi

    args = _arg_parser().parse_args(argv)
    if args.simulate is not None and args.simulate < 1:
        raise UserError("--simulate needs at least 1 rank")
    atol = 0.0 if args.atol is None else args.atol
    if not (args.rtol >= 0 and atol >= 0 and math.isfinite(args.rtol + atol)):
        raise UserError("--rtol and --atol must be finite and not negative")
    if args.seed < 0:
        raise UserError(f"--seed must not be negative, got {args.seed}")
    mpi = args.simulate is None and under_mpi()
    try:
        text = read_program(args.program)
        options = dict(entry=args.entry, pipeline=args.pipeline, stage=args.stage, seed=args.seed, rtol=args.rtol, atol=args.atol, name=args.program)
        if args.inputs is not None:
            from shardc.tools.run import load_npz

            options["inputs"] = load_npz(args.inputs)
    except UserError:
        if mpi and _rank() != 0:  # every rank has it: rank 0 says it
            raise Reported() from None
        raise
    if mpi:
        from mpi4py import MPI

        report = verify_mpi(text, **options)
        if MPI.COMM_WORLD.Get_rank() != 0:
            return 0 if report.ok else 1
        if report.status == "rejected" and report.message.startswith("error: "):
            raise UserError(report.message.removeprefix("error: "))
        return _report(report)
    return _report(verify(text, ranks=args.simulate, **options))


def _rank() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


if __name__ == "__main__":
    sys.exit(main())
