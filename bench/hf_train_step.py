"""A Llama-shaped transformers model's training step (`LlamaForCausalLM` from a config,
random init, as `shardc-train --torch-model hf:LlamaForCausalLM` builds it): shardc
through its public torch training API (`hf_task` for the model, derived axes, loss and
no-decay names; `TorchTraining.prepare` + `run`) against PyTorch eager training the same
model with `torch.optim.AdamW`, in the same run: tokens/s, peak memory and the ratios.

    python bench/hf_train_step.py            # hidden 512, 8 layers, 8 heads / 2 kv heads, ffn 1376, seq 256, batch 8, vocab 8192
    python bench/hf_train_step.py --small    # hidden 64, 2 layers, seq 32, batch 4, vocab 256: a smoke run
    python bench/hf_train_step.py --startup  # import + compile of the step: cold (empty compile cache), then from the cache

Rows: shardc on 1 rank (`mpiexec -n 1`) against PyTorch on 1 thread; shardc dp=2 (ZeRO,
`mpiexec -n 2`, one BLAS thread per rank) against PyTorch on 2 threads and
DistributedDataParallel on 2 gloo processes (1 thread each, half the batch each). Every
configuration runs in its own process(es), in `--rounds` rounds alternating the order;
each figure is its best round's median step after one untimed step. The `pair` row runs
shardc's 1-rank step (`TorchTraining`, one simulated rank) and PyTorch's 1-thread step
alternating in one process, the steadiest comparison on a shared machine. The model has
the class default's attention (sdpa; shardc imports its math form), float32, eval mode
(no dropout in Llama's config anyway); the batches are the same random tokens everywhere.

Peak memory is each process's resident-set high-water mark (VmHWM) reset after the first
step (bench/_paired.py): parameters, optimizer state, activations and the libraries'
pages, not the compiler's transient peak; the largest rank is shown. "held before" is
what the process held resident at that reset (libraries, the model, and for shardc what
the compile left behind), so peak - held is what the timed steps added.

`--startup`: two fresh single-rank processes over one fresh compile cache directory
(SHARDC_CACHE_DIR, set for those children only): the first compiles cold, the second
hits the cache; each reports the import (make_fx trace + torch-mlir), the compile (or
the cache load) and the first step. The import is not cached: it is what the cache key
is made of. The machine may be shared: figures are as measured, under that load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

# One BLAS / OpenMP thread per process unless a configuration asks for more; before numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from _paired import peak_rss, processor, reset_peak_rss, resident_rss  # noqa: E402  (bench/ is the script's folder)

FULL = {"hidden": 512, "layers": 8, "heads": 8, "kv_heads": 2, "ffn": 1376, "seq": 256, "batch": 8, "vocab": 8192}
SMALL = {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 172, "seq": 32, "batch": 4, "vocab": 256}
LR = 1e-3


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--small", action="store_true", help="the smoke size: " + ", ".join(f"{k} {v}" for k, v in SMALL.items()))
    for k, v in FULL.items():
        p.add_argument(f"--{k.replace('_', '-')}", type=int, default=None, help=f"default {v} ({SMALL[k]} with --small)")
    p.add_argument("--repeats", type=int, default=3, help="timed steps per configuration and round (the median counts)")
    p.add_argument("--rounds", type=int, default=1, help="rounds over all configurations, alternating the order")
    p.add_argument("--configs", default="1,dp2,torch1,torch2,ddp2,pair", help="which rows to run (comma-separated; pair: 1 rank and 1 thread alternating in one process)")
    p.add_argument("--startup", action="store_true", help="only: import + compile time, cold and from the compile cache")
    p.add_argument("--worker", choices=("shardc", "torch", "ddp", "pair"), help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    base = SMALL if a.small else FULL
    for k, v in base.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.repeats < 1 or a.rounds < 1:
        p.error("--repeats and --rounds must be positive")
    if a.batch % 2:
        p.error("--batch must be even (dp=2 and DDP split it in two)")
    return a


def _size_argv(a: argparse.Namespace) -> list[str]:
    return [f"--{k.replace('_', '-')}={getattr(a, k)}" for k in FULL] + [f"--repeats={a.repeats}"]


def model_config(a: argparse.Namespace) -> dict:
    """The LlamaConfig fields (what `--model-config` would hold)."""
    return {
        "hidden_size": a.hidden, "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads, "intermediate_size": a.ffn, "vocab_size": a.vocab,
        "max_position_embeddings": a.seq,
    }


def llama_task(a: argparse.Namespace):
    """`hf_task("hf:LlamaForCausalLM", model_config=...)`: the model (seed 0), its loss,
    derived axes and no-decay names, as shardc-train builds them."""
    from shardc.frontends.hf import hf_task

    with tempfile.TemporaryDirectory(prefix="hf-bench-") as d:
        path = os.path.join(d, "config.json")
        with open(path, "w") as f:
            json.dump(model_config(a), f)
        return hf_task("hf:LlamaForCausalLM", model_config=path, block_size=a.seq, seed=0)


def batch(a: argparse.Namespace, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Step k's global (tokens, next tokens), int64 [batch, seq], the same for every side."""
    idx = np.random.default_rng(k).integers(0, a.vocab, (a.batch, a.seq + 1))
    return idx[:, :-1].copy(), idx[:, 1:].copy()


HELD: dict[str, int] = {}
"""This process's resident bytes when its peak was restarted (the stream is forked)."""


class TimedBatches:
    """The step's batches as a stream (`state`/`restore`, as TorchTraining reads one) that
    restarts the peak-memory mark when the second batch is taken, i.e. after the first
    step: every rank reads its stream, so each rank's peak covers the timed steps only."""

    def __init__(self, a: argparse.Namespace, steps: int, position: int = 0):
        self.a, self.steps, self.position = a, steps, position

    def __iter__(self) -> TimedBatches:
        return self

    def __next__(self) -> tuple[np.ndarray, np.ndarray]:
        if self.position == 1:
            HELD["rss"] = resident_rss()
            reset_peak_rss()
        self.position += 1
        return batch(self.a, self.position - 1)

    def state(self) -> dict:
        return {"position": self.position}

    def restore(self, state: dict) -> None:
        self.position = int(state["position"])

    def fork(self) -> TimedBatches:
        return TimedBatches(self.a, self.steps, self.position)


# ---------------------------------------------------------------------------------------
# Workers (each in its own process)
# ---------------------------------------------------------------------------------------


def shardc_worker(a: argparse.Namespace) -> dict:
    """One rank of `mpiexec -n N` (N = 1: one rank; 2: dp=2 with ZeRO): prepare (import +
    compile, or a cache hit) and run `repeats + 1` steps; every rank returns its figures."""
    from mpi4py import MPI

    from shardc.frontends.torch_train import TorchTraining
    from shardc.training.axis import ShardingPolicy
    from shardc.training.train import set_blas_threads

    set_blas_threads(1)
    world = MPI.COMM_WORLD
    t0 = time.perf_counter()
    task = llama_task(a)
    t_model = time.perf_counter() - t0
    steps = a.repeats + 1
    t0 = time.perf_counter()
    job = TorchTraining.prepare(
        task.model, TimedBatches(a, steps), task.loss_fn, axes=task.axes, plan=task.plan,
        policy=ShardingPolicy(tp=1, zero=world.Get_size() > 1), world=None, steps=steps, lr=LR, no_decay=task.no_decay,
    )
    t_prepare = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = job.run()
    t_run = time.perf_counter() - t0
    times = [s.seconds for s in result.log[1:]]
    mine = {
        "step_s": statistics.median(times), "first_step_s": result.log[0].seconds, "rss": peak_rss(), "held": HELD.get("rss", 0),
        "model_s": t_model, "compile_s": job.program.compile_seconds, "import_s": t_prepare - job.program.compile_seconds,
        "source": job.program.cached, "run_s": t_run, "loss": result.log[0].loss,
        "collectives": {f: dict(c) for f, c in job.program.shard_collectives.items()},
    }
    every = world.allgather(mine)
    out = dict(every[0])
    out["step_s"] = max(r["step_s"] for r in every)
    out["rss"] = max(r["rss"] for r in every)
    out["held"] = max(r["held"] for r in every)
    out["ranks"] = world.Get_size()
    return out


def torch_adamw(task):
    """`torch.optim.AdamW` over the task's model with transformers' no-decay names in a
    second group (weight_decay 0), as shardc's step has them."""
    import re

    import torch

    skip = [re.compile(p) for p in task.no_decay]
    named = list(task.model.named_parameters())
    decay = [p for n, p in named if not any(rx.fullmatch(n) for rx in skip)]
    other = [p for n, p in named if any(rx.fullmatch(n) for rx in skip)]
    return torch.optim.AdamW([{"params": decay}, {"params": other, "weight_decay": 0.0}], lr=LR)


def torch_worker(a: argparse.Namespace, threads: int, ddp: bool = False) -> dict:
    """PyTorch eager: forward, loss, backward and `torch.optim.AdamW` (transformers'
    no-decay groups, as shardc's step) on `threads` threads, or as one process of DDP on
    gloo (its half of the batch)."""
    import torch

    torch.set_num_threads(threads)
    task = llama_task(a)
    model = task.model
    rank, world = 0, 1
    if ddp:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch_adamw(task)
    share = a.batch // world
    times, first_loss = [], None
    for k in range(a.repeats + 1):
        x, y = (torch.from_numpy(v[rank * share : (rank + 1) * share]) for v in batch(a, k))
        if ddp:
            dist.barrier()
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = task.loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if ddp:
            dist.barrier()
        if k:
            times.append(time.perf_counter() - t)
        else:
            first_loss = float(loss)
            held = resident_rss()
            reset_peak_rss()
    out = {"step_s": statistics.median(times), "rss": peak_rss(), "held": held, "loss": first_loss}
    if ddp:
        got: list[dict] = [{} for _ in range(world)]
        dist.all_gather_object(got, out)
        dist.destroy_process_group()
        out = {"step_s": max(g["step_s"] for g in got), "rss": max(g["rss"] for g in got), "held": max(g["held"] for g in got), "loss": None}
    return out


def paired_worker(a: argparse.Namespace) -> dict:
    """shardc's 1-rank step and PyTorch's 1-thread step alternating in one process (each
    PyTorch step runs in `on_step`, right after the shardc step it follows), so both see
    the same moments of a shared machine's load; medians after the first pair."""
    import torch

    from shardc.frontends.torch_train import TorchTraining
    from shardc.training.axis import ShardingPolicy
    from shardc.training.train import set_blas_threads

    set_blas_threads(1)
    torch.set_num_threads(1)
    ours_task, theirs = llama_task(a), torch_step(a)
    steps = a.repeats + 1
    job = TorchTraining.prepare(
        ours_task.model, TimedBatches(a, steps), ours_task.loss_fn, axes=ours_task.axes, plan=ours_task.plan,
        policy=ShardingPolicy(tp=1, zero=False), world=1, steps=steps, lr=LR, no_decay=ours_task.no_decay,
    )
    t_theirs: list[float] = []

    def after(entry) -> None:
        t = time.perf_counter()
        theirs(entry.step - 1)
        t_theirs.append(time.perf_counter() - t)

    result = job.run(after)
    t_ours = [s.seconds for s in result.log]
    return {"ours": statistics.median(t_ours[1:]), "theirs": statistics.median(t_theirs[1:]),
            "ratios": [b / o for o, b in zip(t_ours[1:], t_theirs[1:])]}


def torch_step(a: argparse.Namespace):
    """PyTorch's step k on a fresh model (seed 0): forward, loss, backward, AdamW with
    transformers' no-decay groups (as shardc's step)."""
    import torch

    task = llama_task(a)
    opt = torch_adamw(task)

    def step(k: int) -> float:
        x, y = (torch.from_numpy(v) for v in batch(a, k))
        opt.zero_grad(set_to_none=True)
        loss = task.loss_fn(task.model(x), y)
        loss.backward()
        opt.step()
        return float(loss)

    return step


# ---------------------------------------------------------------------------------------
# Launchers
# ---------------------------------------------------------------------------------------


def _result(cmd: list[str], out: str, err: str, rc: int) -> dict:
    line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
    if rc or line is None:
        raise SystemExit(f"hf_train_step.py: a benchmark process failed ({' '.join(cmd[:6])} ...):\n{err[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def _run(cmd: list[str], env: dict[str, str]) -> dict:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env, stdin=subprocess.DEVNULL)
    return _result(cmd, p.stdout, p.stderr, p.returncode)


def launch_shardc(a: argparse.Namespace, ranks: int, cache_dir: str | None = None) -> dict:
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise SystemExit("hf_train_step.py: mpiexec is not on PATH")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")  # the ranks share the machine
    if cache_dir is not None:
        env.pop("SHARDC_CACHE", None)
        env["SHARDC_CACHE_DIR"] = cache_dir
    cmd = [mpiexec, "-n", str(ranks), sys.executable, os.path.abspath(__file__), "--worker", "shardc", *_size_argv(a)]
    return _run(cmd, env)


def launch_torch(a: argparse.Namespace, threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    return _run([sys.executable, os.path.abspath(__file__), "--worker", "torch", f"--threads={threads}", *_size_argv(a)], env)


def launch_pair(a: argparse.Namespace) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return _run([sys.executable, os.path.abspath(__file__), "--worker", "pair", *_size_argv(a)], env)


def launch_ddp(a: argparse.Namespace, n: int) -> dict:
    """DistributedDataParallel on `n` gloo processes, one thread each (torchrun's
    environment, set by hand)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "ddp", *_size_argv(a)]
    procs = []
    for r in range(n):
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL))
    outs = [p.communicate(timeout=3600) for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("hf_train_step.py: the DDP run failed:\n" + "\n".join(e[-2000:] for _, e in outs))
    return _result(cmd, outs[0][0], outs[0][1], 0)


# ---------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------


def _header(a: argparse.Namespace) -> None:
    print(f"LlamaForCausalLM: hidden {a.hidden}, {a.layers} layers, {a.heads} heads / {a.kv_heads} kv heads, ffn {a.ffn}, "
          f"seq {a.seq}, batch {a.batch}, vocab {a.vocab} ({a.batch * a.seq} tokens per step); float32, sdpa (the class default)")
    print(f"processor: {processor()}; figures as measured (the machine may be shared)")


def startup(a: argparse.Namespace) -> None:
    """Cold, then from the compile cache: two 1-rank jobs over one fresh cache directory."""
    _header(a)
    a.repeats = 1  # the first step, and one more to see it settle
    with tempfile.TemporaryDirectory(prefix="shardc-hf-cache-") as d:
        runs = [("cold", launch_shardc(a, 1, d)), ("cached", launch_shardc(a, 1, d))]
    print("build: importing transformers + building the model; import: make_fx's trace + torch-mlir; compile: shardc's "
          "pipeline + code generation, or the cache's load; first step: with numba's kernels compiled (cold) or loaded")
    print(f"{'run':<7} {'from':<9} {'build':>7} {'import':>8} {'compile':>8} {'first step':>11} {'next step':>10}")
    for name, r in runs:
        print(f"{name:<7} {r['source']:<9} {r['model_s']:>6.1f}s {r['import_s']:>7.1f}s {r['compile_s']:>7.2f}s {r['first_step_s']:>10.2f}s {r['step_s']:>9.2f}s")
    cold, warm = runs[0][1], runs[1][1]
    if cold["source"] != "compiled" or warm["source"] == "compiled":
        raise SystemExit(f"hf_train_step.py: expected a cold compile then a cache hit, got {cold['source']!r} then {warm['source']!r}")
    if cold["loss"] != warm["loss"]:
        raise SystemExit(f"hf_train_step.py: the cached step's first loss {warm['loss']} differs from the cold one's {cold['loss']}")
    print(f"import + compile: cold {cold['import_s'] + cold['compile_s']:.1f} s, from the cache {warm['import_s'] + warm['compile_s']:.1f} s "
          f"(the compile alone {cold['compile_s'] / max(warm['compile_s'], 1e-9):.0f}x faster from the cache; the import is not cached)")


def compare(a: argparse.Namespace) -> None:
    _header(a)
    configs = [c.strip() for c in a.configs.split(",") if c.strip()]
    launchers = {
        "1": ("shardc 1 rank", lambda: launch_shardc(a, 1)),
        "dp2": ("shardc dp=2", lambda: launch_shardc(a, 2)),
        "torch1": ("PyTorch 1 thread", lambda: launch_torch(a, 1)),
        "torch2": ("PyTorch 2 threads", lambda: launch_torch(a, 2)),
        "ddp2": ("PyTorch DDP 2 gloo", lambda: launch_ddp(a, 2)),
        "pair": ("1 rank vs 1 thread alternating", lambda: launch_pair(a)),
    }
    unknown = sorted(set(configs) - set(launchers))
    if unknown or not configs:
        raise SystemExit(f"hf_train_step.py: --configs takes {', '.join(launchers)}; got {', '.join(unknown) or 'nothing'}")
    got: dict[str, list[dict]] = {c: [] for c in configs}
    for r in range(a.rounds):
        for c in configs if r % 2 == 0 else configs[::-1]:
            got[c].append(launchers[c][1]())
    pairs = got.pop("pair", [])
    best = {c: min(runs, key=lambda x: x["step_s"]) for c, runs in got.items()}
    tokens = a.batch * a.seq
    mib = 1 << 20
    for c in ("1", "dp2"):
        if c in best:
            r = best[c]
            print(f"{launchers[c][0]}: import {r['import_s']:.1f} s, compile {r['compile_s']:.1f} s ({r['source']}); "
                  f"collectives per step {r['collectives'].get('train_step', {})}, adamw {r['collectives'].get('adamw_step', {})}")
    if best:
        print(f"{'row':<20} {'tokens/s':>9} {'step ms':>9} {'peak RSS/proc':>14} {'held before':>12}")
    for c, r in best.items():
        print(f"{launchers[c][0]:<20} {tokens / r['step_s']:>9,.0f} {r['step_s'] * 1e3:>9.0f} {r['rss'] / mib:>10,.0f} MiB {r['held'] / mib:>8,.0f} MiB")
    losses = {c: r["loss"] for c, r in best.items() if r.get("loss") is not None}
    if losses:
        print("first-step losses: " + ", ".join(f"{launchers[c][0]} {v:.4f}" for c, v in losses.items()))
    for p in pairs:
        print(f"1 rank vs 1 thread in one process, steps alternating: shardc {p['ours'] * 1e3:.0f} ms, PyTorch {p['theirs'] * 1e3:.0f} ms "
              f"-> {p['theirs'] / p['ours']:.2f}x (pairs {', '.join(f'{r:.2f}' for r in p['ratios'])})")
    rows = [(m, o) for m, o in (("1", "torch1"), ("dp2", "torch2"), ("dp2", "ddp2")) if m in best and o in best]
    if rows:
        print("shardc / PyTorch eager (speed: their step / ours, target >= 1.0x; memory: our peak / theirs):")
    for mine, other in rows:
        o, m = best[other], best[mine]
        print(f"  {launchers[mine][0]:<15} vs {launchers[other][0]:<19} {o['step_s'] / m['step_s']:5.2f}x   memory {m['rss'] / o['rss']:4.2f}x")


def main() -> None:
    a = _args()
    if a.worker == "shardc":
        res = shardc_worker(a)
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == 0:
            print("RESULT " + json.dumps(res), flush=True)
        return
    if a.worker == "torch":
        print("RESULT " + json.dumps(torch_worker(a, a.threads)), flush=True)
        return
    if a.worker == "pair":
        print("RESULT " + json.dumps(paired_worker(a)), flush=True)
        return
    if a.worker == "ddp":
        res = torch_worker(a, 1, ddp=True)
        if os.environ.get("RANK") == "0":
            print("RESULT " + json.dumps(res))
        # PyTorch's gloo can abort in interpreter teardown after a finished run (as in
        # bench/train_step.py): leave without it.
        sys.stdout.flush()
        os._exit(0)
    if a.startup:
        startup(a)
    else:
        compare(a)


if __name__ == "__main__":
    main()
