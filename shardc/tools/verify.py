"""`shardc-verify`: check by execution that partitioning (and lowering) a program keeps
its meaning.

    shardc-verify prog.mlir [--entry f] [--pipeline "..."] [--simulate N] [--stage partitioned|lowered|all]
                  [--seed S] [--rtol R] [--atol A]
    mpiexec -n 4 shardc-verify prog.mlir ...     # one process per rank

The program runs unsharded on one device and transformed on N ranks (default: the size
of its grid) on the same random inputs; every result is gathered to a global array and
compared. Prints `OK: N results match` (exit 0) or the first mismatch: the result's index
and name, its source location, max abs/rel error (exit 1). A program or pipeline that
fails prints its MLIR diagnostic (exit 1); a command-line problem one line (exit 1).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

TOOL = "shardc-verify"


class _UsageError(Exception):
    pass


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise _UsageError(message)


def _arg_parser() -> argparse.ArgumentParser:
    p = _ArgParser(prog=TOOL, description="Check by execution that a sharding pipeline keeps a program's meaning.", allow_abbrev=False)
    p.add_argument("program", help="the annotated .mlir file")
    p.add_argument("--entry", help="function to call (default: the only public function, or @main)")
    p.add_argument("--pipeline", help="passes that partition the program, in mlir-opt pass-pipeline syntax (default: sharding-propagation,shard-partition,shard-simplify,canonicalize,cse)")
    p.add_argument("--simulate", type=int, metavar="N", help="run N ranks as threads of this process (default outside mpiexec: the size of the grid)")
    p.add_argument("--stage", choices=("partitioned", "lowered", "all"), default="partitioned", help="compare the partitioned program, the MPI-lowered one (+convert-shard-to-mpi,canonicalize), or both")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance for floating-point results")
    p.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance for floating-point results")
    return p


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise _UsageError(f"cannot read '{path}': {e.strerror}") from None
    except UnicodeDecodeError:
        raise _UsageError(f"cannot read '{path}': not a text file") from None


def _report(report) -> int:  # noqa: ANN001
    if report.status == "ok":
        print(report.summary())
        return 0
    if report.status == "mismatch":
        print(report.summary())
        return 1
    sys.stderr.write(report.message if report.message.endswith("\n") else report.message + "\n")
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    from shardc.verify import VerifyError, under_mpi, verify, verify_mpi

    try:
        args = _arg_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
        if args.simulate is not None and args.simulate < 1:
            raise _UsageError("--simulate needs at least 1 rank")
        if args.rtol < 0 or args.atol < 0:
            raise _UsageError("--rtol and --atol must not be negative")
        text = _read(args.program)
        options = dict(entry=args.entry, pipeline=args.pipeline, stage=args.stage, seed=args.seed, rtol=args.rtol, atol=args.atol, name=args.program)
        if args.simulate is None and under_mpi():
            from mpi4py import MPI

            report = verify_mpi(text, **options)
            if MPI.COMM_WORLD.Get_rank() != 0:
                return 0 if report.ok else 1
            if report.status == "rejected" and report.message.startswith("error: "):
                raise _UsageError(report.message.removeprefix("error: "))
            return _report(report)
        return _report(verify(text, ranks=args.simulate, **options))
    except (_UsageError, VerifyError) as e:
        sys.stderr.write(f"{TOOL}: error: {e}\n")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
