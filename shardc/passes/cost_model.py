"""The cost model the auto-sharding pass minimizes, shared with the trainer and benches.

Three parts, each measured rather than assumed:

* **compute**: an op's time from its FLOPs and the bytes it touches, at the rates of this
  machine: contractions at the GFLOP/s of the BLAS the runtime calls (`calibrate` times
  `shardc.runtime.execute.kernels.blas.matmul` on a few shapes), products of bf16 operands
  (`--precision bf16`) at the rate of the runtime's bf16 GEMM on the same shapes
  (`kernels.bf16_gemm.matmul`: the bf16 units where the CPU has them, else float32
  products of widened operands, so the rate says what this machine's emulation costs),
  everything else at the measured elementwise bandwidth, plus a fixed cost per op (the
  generated code's call);
* **collectives**: per kind (all_reduce, all_gather, reduce_scatter, all_to_all, halo;
  all_slice is a local copy) `alpha * latency_factor(p) + beta * bytes_factor(p, n)`,
  alpha and beta fitted by least squares to timings of mpi4py's collectives under the
  launcher in use (`mpiexec` beside this Python first: the `mpich` wheel's, which is the
  library mpi4py loads);
* **memory**: per-rank bytes live at each point of a function (`live_ranges`, `peak_memory`)
  over any sizing of its values: local types of a partitioned program, or global types
  divided by a chosen sharding;
* **ranks sharing cores**: the rates are one core's. Where a host runs more ranks than it
  has cores (`CostModel.on_host`), each rank gets `cores / ranks` of one, so its compute
  and its collectives' copies take `ranks / cores` times as long, and every collective
  adds a wait: a rank that reaches it spins until its peers, descheduled, have run their
  own compute slices. That wait is measured (`measure_oversubscription`: twice as many
  ranks as cores, compute slices between all_reduces) and cached with the other rates.

Calibration is slow (seconds) and never implicit: `load_rates()` reads the rates cached
per machine and MPI in the shardc cache directory and falls back to `DEFAULT_RATES`
(`Rates.source` says which); `load_rates(recalibrate=True)` measures and caches. Tests
build a `CostModel` from `Rates` they choose.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, Operation, SSAValue

from shardc import cache_dir
from shardc.dialects.shard import Sharding
from shardc.passes.resharding import AllGather, AllSlice, AllToAll, DropHalo, Step, UpdateHalo, plan_resharding

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "halo")
"""The collective kinds the model prices (all_slice is a local copy, priced as memory traffic)."""


@dataclass(frozen=True)
class AlphaBeta:
    """`alpha` seconds per latency step, `beta` seconds per byte (see `collective_time`)."""

    alpha: float
    beta: float


@dataclass(frozen=True)
class Rates:
    """What one rank of this machine does per second; `source` says where it came from."""

    gemm_flops: float = 20e9
    """Contraction FLOP/s (2 per multiply-add) through the runtime's BLAS, one thread."""
    bandwidth: float = 4e9
    """Elementwise bytes/s (read + written), numpy on whole arrays."""
    op_overhead: float = 5e-6
    """Seconds per op call in generated code, whatever its size."""
    collectives: Mapping[str, AlphaBeta] = field(
        default_factory=lambda: {
            "all_reduce": AlphaBeta(20e-6, 1 / 2e9),
            "all_gather": AlphaBeta(20e-6, 1 / 2e9),
            "reduce_scatter": AlphaBeta(20e-6, 1 / 2e9),
            "all_to_all": AlphaBeta(20e-6, 1 / 2e9),
            "halo": AlphaBeta(10e-6, 1 / 2e9),
        }
    )
    oversubscribed_wait: float = 1e-3
    """Seconds a collective waits for its peers per extra rank sharing a core (a collective
    of ranks `r` times as many as the cores waits `(r - 1) * oversubscribed_wait`)."""
    bf16_gemm_flops: float = 20e9
    """FLOP/s of contractions with bf16 operands, float32 accumulation, through the
    runtime's bf16 GEMM, one thread. The default is `gemm_flops`' (no bf16 units assumed);
    rates cached before it was measured read back their own `gemm_flops`."""
    source: str = "default"

    def to_json(self) -> dict:
        data = asdict(self)
        data["collectives"] = {k: [v.alpha, v.beta] for k, v in self.collectives.items()}
        return data

    @staticmethod
    def from_json(data: Mapping) -> Rates:
        coll = {k: AlphaBeta(float(a), float(b)) for k, (a, b) in data["collectives"].items()}
        missing = set(COLLECTIVES) - set(coll)
        if missing:
            raise ValueError(f"rates lack collectives {sorted(missing)}")
        return Rates(
            gemm_flops=float(data["gemm_flops"]),
            bandwidth=float(data["bandwidth"]),
            op_overhead=float(data["op_overhead"]),
            collectives=coll,
            oversubscribed_wait=float(data.get("oversubscribed_wait", DEFAULT_OVERSUBSCRIBED_WAIT)),
            bf16_gemm_flops=float(data.get("bf16_gemm_flops", data["gemm_flops"])),
            source=str(data.get("source", "cache")),
        )


DEFAULT_RATES = Rates()
"""Order-of-magnitude rates of one core of a recent x86 server; used until calibrated."""
DEFAULT_OVERSUBSCRIBED_WAIT = DEFAULT_RATES.oversubscribed_wait
"""The wait of rates cached before it was measured."""


# =========================================================================================
# Collective factors: latency steps and bytes on the wire per rank, for a group of p
# ranks whose local input is n bytes
# =========================================================================================


def latency_factor(kind: str, p: int) -> float:
    if p <= 1:
        return 0.0
    if kind == "all_to_all":
        return float(p - 1)
    if kind == "halo":
        return 2.0
    return float(math.ceil(math.log2(p)))


def bytes_factor(kind: str, p: int, n: float) -> float:
    if p <= 1:
        return 0.0
    if kind == "all_reduce":
        return 2.0 * (p - 1) / p * n
    if kind == "all_gather":
        return (p - 1) * n
    if kind in ("reduce_scatter", "all_to_all"):
        return (p - 1) / p * n
    if kind == "halo":
        return n
    raise ValueError(f"unknown collective kind {kind!r}")


# =========================================================================================
# The model
# =========================================================================================


@dataclass(frozen=True)
class CostModel:
    """Predicted seconds and bytes; one instance per set of rates and share of a core."""

    rates: Rates = DEFAULT_RATES
    ranks_per_core: float = 1.0
    """Ranks sharing each core of the host, at least 1 (`on_host`): 1 on a cluster that
    runs a rank per core, which is what `--plan-only --world N` assumes."""

    def on_host(self, ranks_per_host: int | None, cores: int) -> CostModel:
        """This model for ranks that run `ranks_per_host` to a host of `cores` cores (None:
        a core each). Fewer ranks than cores change nothing: the rates are one core's."""
        if ranks_per_host is None:
            return self
        return replace(self, ranks_per_core=max(1.0, ranks_per_host / max(cores, 1)))

    def on_shared_core(self, seconds: float) -> float:
        """`seconds` of one core's work, on a rank that gets `1 / ranks_per_core` of one."""
        return seconds * self.ranks_per_core

    def contraction_time(self, flops: float, precision: str = "f32") -> float:
        """`flops` of matrix products; `precision` "bf16": of bf16 operands (the
        mixed-precision pass's products) at the bf16 GEMM's rate."""
        rate = self.rates.bf16_gemm_flops if precision == "bf16" else self.rates.gemm_flops
        return self.on_shared_core(flops / rate)

    def elementwise_time(self, nbytes: float) -> float:
        return self.on_shared_core(nbytes / self.rates.bandwidth)

    def op_time(self, flops: float, nbytes: float, contraction: bool) -> float:
        """One op on a rank: the call's overhead plus its FLOPs at the BLAS rate
        (contractions) or its bytes at the elementwise bandwidth (everything else)."""
        work = self.contraction_time(flops) if contraction else self.elementwise_time(nbytes)
        return self.on_shared_core(self.rates.op_overhead) + work

    def collective_time(self, kind: str, nbytes: float, group: int) -> float:
        """A collective of `kind` over `group` ranks, each holding `nbytes` of input; where
        ranks share cores, its copies on a share of a core plus the wait for its peers."""
        if group <= 1:
            return 0.0
        ab = self.rates.collectives[kind]
        own = ab.alpha * latency_factor(kind, group) + ab.beta * bytes_factor(kind, group, nbytes)
        return self.on_shared_core(own) + (self.ranks_per_core - 1.0) * self.rates.oversubscribed_wait

    def step_time(self, step: Step, grid_shape: Sequence[int], element_bytes: float) -> float:
        """One step of a resharding plan (`shardc.passes.resharding`)."""
        n_in = math.prod(max(d, 1) for d in step.in_shape) * element_bytes
        if isinstance(step, AllGather):
            return self.collective_time("all_gather", n_in, math.prod(grid_shape[a] for a in step.grid_axes))
        if isinstance(step, AllToAll):
            return self.collective_time("all_to_all", n_in, math.prod(grid_shape[a] for a in step.grid_axes))
        if isinstance(step, UpdateHalo):
            core = math.prod(max(d, 1) for d in step.core_shape) * element_bytes
            out = math.prod(max(d, 1) for d in step.out_shape) * element_bytes
            return self.collective_time("halo", max(out - core, 0.0), 2) + self.elementwise_time(out)
        if isinstance(step, (AllSlice, DropHalo)):
            out = math.prod(max(d, 1) for d in step.out_shape) * element_bytes
            return self.on_shared_core(self.rates.op_overhead) + self.elementwise_time(2 * out)
        return self.on_shared_core(self.rates.op_overhead)

    def reshard_time(
        self,
        source: Sharding,
        target: Sharding,
        global_shape: Sequence[int],
        grid_shape: Sequence[int],
        element_bytes: float,
    ) -> float:
        """Moving a tensor from `source` to `target` by the resharding planner's plan
        (raises `ReshardingError` where none exists)."""
        plan = plan_resharding(source, target, global_shape, grid_shape)
        return sum(self.step_time(s, grid_shape, element_bytes) for s in plan)


# =========================================================================================
# Memory: liveness over a block
# =========================================================================================


def tensor_bytes(value: SSAValue) -> int:
    """The bytes of a value's (static) tensor type; 0 for anything else."""
    t = value.type
    if not isinstance(t, TensorType):
        return 0
    bits = getattr(t.element_type, "bitwidth", 32)
    return math.prod(max(d, 1) for d in t.get_shape()) * max(int(bits), 8) // 8


def _top_level(op: Operation, block: Block) -> Operation | None:
    while op.parent_block() is not block:
        parent = op.parent_op()
        if parent is None:
            return None
        op = parent
    return op


def live_ranges(block: Block) -> tuple[list[tuple[SSAValue, int, int]], int]:
    """(value, first point, last point) for the block's arguments and its top-level ops'
    results, points being the ops' positions (uses inside nested regions count at their
    top-level op); arguments are live throughout (the caller holds them). Also returns
    the number of points."""
    ops = list(block.ops)
    index = {op: i for i, op in enumerate(ops)}
    n = max(len(ops), 1)
    ranges: list[tuple[SSAValue, int, int]] = [(arg, 0, n - 1) for arg in block.args]
    for i, op in enumerate(ops):
        for result in op.results:
            last = i
            for use in result.uses:
                top = _top_level(use.operation, block)
                if top is not None and top in index:
                    last = max(last, index[top])
            ranges.append((result, i, last))
    return ranges, n


def peak_memory(block: Block, size: Callable[[SSAValue], float] = tensor_bytes) -> tuple[float, int]:
    """The most bytes live at once in `block` (per rank when `size` gives local bytes:
    the default reads the types, which a partitioned program has made local) and the
    point where it is reached."""
    ranges, n = live_ranges(block)
    live = [0.0] * n
    for value, start, end in ranges:
        nbytes = size(value)
        for p in range(start, end + 1):
            live[p] += nbytes
    point = max(range(n), key=live.__getitem__)
    return live[point], point


# =========================================================================================
# Calibration
# =========================================================================================

_MATMUL_SHAPES = ((256, 256, 256), (512, 512, 512), (1024, 256, 768))
_MPI_SIZES = (8, 4096, 65536, 1 << 20)


_COMPUTE_SCRIPT = r"""
import json, sys, time
import numpy as np
from shardc.runtime.execute.kernels import blas

def best_time(fn, repeat=5):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter(); fn(); best = min(best, time.perf_counter() - t0)
    return best

flops = []
bf16_flops = []
try:
    from shardc.runtime.execute.kernels import bf16_gemm
    from shardc.runtime.execute.kernels.bf16_run import bfloat16
    bf = bfloat16()
except Exception:  # no bf16 dtype (ml_dtypes) or GEMM here: --precision bf16 cannot run either
    bf = None
for m, k, n in json.loads(sys.argv[1]):
    a = np.random.rand(m, k).astype(np.float32)
    b = np.random.rand(k, n).astype(np.float32)
    out = np.empty((m, n), np.float32)
    flops.append(2 * m * k * n / best_time(lambda: blas.matmul(a, b, out)))
    if bf is not None:
        a16, b16 = a.astype(bf), b.astype(bf)
        bf16_flops.append(2 * m * k * n / best_time(lambda: bf16_gemm.matmul(a16, b16, out)))
x = np.random.rand(1 << 22).astype(np.float32)
y = np.empty_like(x)
bandwidth = 3 * x.nbytes / best_time(lambda: np.add(x, x, out=y))
small = np.ones(4, np.float32)
overhead = best_time(lambda: [np.add(small, small) for _ in range(1000)]) / 1000
gemm = float(np.median(flops))
bf16 = float(np.median(bf16_flops)) if bf16_flops else gemm
print(json.dumps({"gemm_flops": gemm, "bf16_gemm_flops": bf16, "bandwidth": bandwidth, "op_overhead": overhead}))
"""


def measure_compute(timeout: float = 300.0) -> dict[str, float]:
    """Contraction FLOP/s through the runtime's BLAS (float32, the median of the shapes)
    and through its bf16 GEMM (bf16 operands, float32 result, the same shapes: the bf16
    units where the CPU has them, else widened float32 products, as the runtime runs
    them; the float32 rate where this Python has no bf16 dtype), elementwise bandwidth
    and the per-op overhead, on one thread. Measured in a
    fresh process running the runtime, as the collectives are: the compiler does not
    import the runtime it prices, and a fresh process has no warm state to flatter it."""
    done = subprocess.run(
        [sys.executable, "-c", _COMPUTE_SCRIPT, json.dumps(_MATMUL_SHAPES)],
        capture_output=True, text=True, timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"measuring the runtime's compute rates failed: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


_MPI_SCRIPT = r"""
import json, sys, time
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
p = comm.Get_size()
sizes = json.loads(sys.argv[1])
rows = []
def timed(fn, reps):
    fn(); comm.Barrier()
    best = float("inf")
    for _ in range(reps):
        comm.Barrier(); t0 = time.perf_counter(); fn(); t = time.perf_counter() - t0
        best = min(best, comm.allreduce(t, op=MPI.MAX))
    return best
for n in sizes:
    x = np.ones(max(n // 4, p), np.float32)
    big = np.empty(x.size * p, np.float32)
    part = np.empty(max(x.size // p, 1), np.float32)
    y = np.empty_like(x)
    reps = 20 if n < (1 << 18) else 5
    right, left = (comm.rank + 1) % p, (comm.rank - 1) % p
    x2 = x[: part.size * p]
    cases = {
        "all_reduce": lambda: comm.Allreduce(x, y),
        "all_gather": lambda: comm.Allgather(x, big),
        "reduce_scatter": lambda: comm.Reduce_scatter_block(x2, part),
        "all_to_all": lambda: comm.Alltoall(x2, y[: x2.size]),
        "halo": lambda: comm.Sendrecv(x, right, recvbuf=y, source=left),
    }
    for kind, fn in cases.items():
        rows.append([kind, p, x.nbytes, timed(fn, reps)])
if comm.rank == 0:
    print(json.dumps({"rows": rows, "library": MPI.Get_library_version().splitlines()[0]}))
"""


def default_mpiexec() -> str | None:
    """The `mpiexec` beside this Python (the `mpich` wheel's, matching the library mpi4py
    loads), else the one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside if os.access(beside, os.X_OK) else shutil.which("mpiexec")


def measure_collectives(
    ranks: int = 2, launcher: Sequence[str] | None = None, timeout: float = 300.0
) -> tuple[list[tuple[str, int, float, float]], str]:
    """Timings `(kind, group, bytes per rank, seconds)` of mpi4py's collectives on
    `ranks` ranks, started by `launcher` (the command before the program, e.g.
    `["mpiexec", "-n", "2"]`; default: `default_mpiexec() -n ranks`), and the MPI
    library's version line. Raises RuntimeError when the job fails."""
    if launcher is None:
        mpiexec = default_mpiexec()
        if mpiexec is None:
            raise RuntimeError("no mpiexec found")
        launcher = [mpiexec, "-n", str(ranks)]
    cmd = [*launcher, sys.executable, "-c", _MPI_SCRIPT, json.dumps(list(_MPI_SIZES))]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"collective calibration failed ({' '.join(launcher)}): {tail}")
    data = json.loads(lines[-1])
    return [(k, int(p), float(n), float(t)) for k, p, n, t in data["rows"]], str(data["library"])


_OVERSUBSCRIBED_SCRIPT = r"""
import json, sys, time
import numpy as np
from mpi4py import MPI
from shardc.runtime.execute.kernels import blas
comm = MPI.COMM_WORLD

def per_iteration(fn, reps):
    fn(); comm.Barrier()
    times = []
    for _ in range(3):
        comm.Barrier(); t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        times.append(comm.allreduce((time.perf_counter() - t0) / reps, op=MPI.MAX))
    return float(np.median(times))

rows = []
for m, nbytes in json.loads(sys.argv[1]):
    a = np.random.rand(m, m).astype(np.float32)
    out = np.empty_like(a)
    x = np.ones(nbytes // 4, np.float32)
    y = np.empty_like(x)
    reps = max(5, min(200, int(0.03 / (2 * m ** 3 / 1e11))))
    compute = per_iteration(lambda: blas.matmul(a, a, out), reps)
    mixed = per_iteration(lambda: (blas.matmul(a, a, out), comm.Allreduce(x, y)), reps)
    rows.append([m, nbytes, compute, mixed])
if comm.rank == 0:
    print(json.dumps({"rows": rows}))
"""
_OVERSUBSCRIBED_CASES = ((256, 4096), (256, 65536), (512, 4096), (512, 65536))


def measure_oversubscription(
    collectives: Mapping[str, AlphaBeta], cores: int = 2, timeout: float = 300.0
) -> list[float]:
    """The wait per all_reduce and per extra rank on a core, from a job of `2 * cores`
    ranks held to `cores` CPUs of this host (`cores` at most what it has): each rank
    alternates a matmul (the compute slice a step runs between collectives) with an
    all_reduce; the wait is what an iteration takes beyond the compute alone on its
    share of a core and the all_reduce's own alpha-beta time on that share. One value per
    case (slice and message size); RuntimeError when the job fails."""
    mpiexec = default_mpiexec()
    if mpiexec is None:
        raise RuntimeError("no mpiexec found")
    cpus = sorted(os.sched_getaffinity(0))[: max(cores, 1)]
    ranks = 2 * len(cpus)
    cmd = [mpiexec, "-n", str(ranks), sys.executable, "-c", _OVERSUBSCRIBED_SCRIPT, json.dumps(_OVERSUBSCRIBED_CASES)]
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=lambda: os.sched_setaffinity(0, cpus)
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"oversubscribed calibration failed: {tail}")
    model = CostModel(replace(DEFAULT_RATES, collectives=dict(collectives), oversubscribed_wait=0.0), ranks / len(cpus))
    return [
        (mixed - compute - model.collective_time("all_reduce", nbytes, ranks)) / (model.ranks_per_core - 1.0)
        for _, nbytes, compute, mixed in json.loads(lines[-1])["rows"]
    ]


def fit_alpha_beta(rows: Iterable[tuple[str, int, float, float]]) -> dict[str, AlphaBeta]:
    """Least-squares alpha and beta per kind (clamped at zero) from timings."""
    import numpy as np

    by_kind: dict[str, list[tuple[float, float, float]]] = {}
    for kind, p, n, t in rows:
        by_kind.setdefault(kind, []).append((latency_factor(kind, p), bytes_factor(kind, p, n), t))
    fitted: dict[str, AlphaBeta] = {}
    for kind, pts in by_kind.items():
        a = np.array([[lf, bf] for lf, bf, _ in pts])
        t = np.array([tt for _, _, tt in pts])
        (alpha, beta), *_ = np.linalg.lstsq(a, t, rcond=None)
        if alpha < 0 or beta < 0:  # refit the other one alone
            if alpha < 0:
                alpha, beta = 0.0, float(np.dot(a[:, 1], t) / max(np.dot(a[:, 1], a[:, 1]), 1e-30))
            else:
                alpha, beta = float(np.dot(a[:, 0], t) / max(np.dot(a[:, 0], a[:, 0]), 1e-30)), 0.0
        fitted[kind] = AlphaBeta(float(alpha), float(beta))
    return fitted


def calibrate(ranks: int = 2, launcher: Sequence[str] | None = None) -> Rates:
    """Measure this machine: compute in a fresh process running the runtime, collectives under MPI (the
    defaults stay for collectives when no MPI job can start; `source` says so), and, with
    this host's mpiexec (no `launcher`), the wait of ranks that share cores (the median of
    `measure_oversubscription`'s cases, at least 0)."""
    import statistics

    compute = measure_compute()
    compute.setdefault("bf16_gemm_flops", compute["gemm_flops"])
    wait = DEFAULT_RATES.oversubscribed_wait
    try:
        rows, library = measure_collectives(ranks, launcher)
        collectives = {**DEFAULT_RATES.collectives, **fit_alpha_beta(rows)}
        source = f"measured ({library}, {ranks} ranks)"
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        collectives = dict(DEFAULT_RATES.collectives)
        source = f"measured compute; default collectives ({e})"
    else:
        if launcher is None:
            try:
                wait = max(statistics.median(measure_oversubscription(collectives)), 0.0)
                source = source[:-1] + "; oversubscribed 2 ranks per core)"
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                source = source[:-1] + f"; default oversubscribed wait: {e})"
    return Rates(collectives=collectives, oversubscribed_wait=wait, source=source, **compute)


def machine_key(launcher: Sequence[str] | None = None) -> str:
    """What the rates depend on: the processor, the BLAS selection, numpy, the launcher."""
    import numpy as np

    try:
        with open("/proc/cpuinfo") as f:
            cpu = "".join(sorted({ln for ln in f if ln.startswith(("model name", "vendor_id"))}))
    except OSError:
        cpu = platform.processor() or platform.machine()
    mpiexec = list(launcher) if launcher is not None else [default_mpiexec() or "-"]
    parts = [cpu, platform.node(), np.__version__, os.environ.get("SHARDC_BLAS", "auto"), *mpiexec]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def cache_path(launcher: Sequence[str] | None) -> str | None:
    if not cache_dir.enabled():
        return None
    root = cache_dir.usable_dir(cache_dir.cache_root(), lambda m: cache_dir.warning("cost model", m))
    return None if root is None else os.path.join(root, f"cost-model-{machine_key(launcher)}.json")


def load_rates(
    recalibrate: bool = False, ranks: int = 2, launcher: Sequence[str] | None = None
) -> Rates:
    """The cached rates of this machine and MPI; measured and cached when `recalibrate`;
    `DEFAULT_RATES` when nothing is cached (never measures on its own)."""
    path = cache_path(launcher)
    if not recalibrate:
        if path is None or not os.path.isfile(path):
            return DEFAULT_RATES
        try:
            with open(path) as f:
                return Rates.from_json(json.load(f))
        except (OSError, ValueError, KeyError, TypeError) as e:
            cache_dir.warning("cost model", f"ignoring {path}: {e}")
            return DEFAULT_RATES
    rates = calibrate(ranks, launcher)
    if path is not None:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(rates.to_json(), f, indent=1)
        os.replace(tmp, path)
    return replace(rates)
