"""`shardc-train --auto`'s predictions against measurements: model x world x policy.

    python bench/auto_plan.py                          # GPT n_layer 4 and 12 (n_embd 128), a Llama, a GPT-2; worlds 1, 2, 4
    python bench/auto_plan.py --models llama --worlds 2,4   # pick models (gpt4, gpt12, llama, gpt2) and worlds
    python bench/auto_plan.py --quick [--models llama] # a tiny GPT (or Llama), world 2, 3 steps: a smoke run
    python bench/auto_plan.py --rates measure          # calibrate the cost model first (cached per machine and MPI)
    python bench/auto_plan.py --solve [both]           # the auto-sharding solve of a GPT-2-small step, layers shared [and not]

The models: the built-in GPT (n_layer 4 and 12, n_embd 128, 4 heads, block 64, batch 8)
and a Llama-shaped transformers model, `LlamaForCausalLM` built from its config as
`shardc-train --torch-model hf:LlamaForCausalLM --model-config` builds it (random init,
no download: hidden 256, 4 layers, 8 query / 4 key-value heads, MLP 688, seq 128, batch
4), and a GPT-2-shaped one (`hf:GPT2LMHeadModel`: n_embd 128, 4 layers, 4 heads, seq 64,
batch 8: the built-in GPT4's shape, with transformers' tanh GELU and LayerNorms), planned
by `plan_torch_job` and trained by the trainer's own job. For every model and
world the table has one row per hand policy the grid allows among dp, zero, fsdp, tp=2,
tp=2+fsdp, then `auto` (the plan `--auto` chooses with no budget) and `auto tight` (the
budget 1 byte below what plain DP and ZeRO need, when a plan fits it): predicted and
measured ms per step and their ratio, predicted and measured memory per rank and their
ratio, the resident-set peak, tokens/s, and the time the plan took to choose. The auto
rows end with the ratio of their measured tokens/s to the best hand policy's, measured in
the same run; each model ends with a summary line: those ratios, and how many measured
policies are within 25% (time) and 15% (memory) of their predictions.

Every row runs under `mpiexec -n W` (the MPI beside this Python), one process per rank,
BLAS on one thread, measured as `--auto` measures (`shardc.training.auto_plan.Measurement`):
the step time is the median of the steps after the first two (after the first with fewer
than 4 steps), which run under tracemalloc; memory `traced` is rank 0's: the numpy bytes
live after the first step (the state) plus the second step's peak above them, what the
prediction models (state, activations, transient copies). For the Llama it adds the
module's own parameters: every rank builds the whole module, the state's arrays view
its tensors, and the trace (numpy's buffers, from the compiled step on) cannot see them.
`RSS` is the largest rank's resident-set high-water mark above the compiled step's,
which also holds the runtime's own pages (libraries, BLAS buffers, the first step's lazy
imports), so small models measure far above their prediction. The predictions are for
the W ranks on this host, as `--auto` under mpiexec makes them: with more ranks than
cores each rank's compute takes ranks/cores as long and each collective waits for its
peers (`shardc.passes.cost_model.CostModel.on_host`; the wait is measured with the
rates, `--rates measure`). Other work on the machine is not: a loaded machine measures
above its predictions, and the load average is printed at the start and the end.

Last (unless `--no-plan-only`), `--plan-only` predictions for a GPT-2-small-shaped model
(12 layers, n_embd 768, 12 heads, block 1024, vocab 50304, 8 sequences per device) on 8
to 1024 ranks, beside the measured points above (not the same model: the small GPTs are
what runs here).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HAND = ("dp", "zero", "fsdp", "tp=2", "tp=2+fsdp")
HF_CLASS = {"llama": "hf:LlamaForCausalLM", "gpt2": "hf:GPT2LMHeadModel"}
"""The transformers class of a model entry's kind (the built-in GPT's is "gpt")."""


def _policy(name: str, overrides: list | None = None):
    """The policy a row names (`tp=2+fsdp`; a mix's name ends `[group=kind,...]`, its
    overrides are `overrides`: [pattern, zero, fsdp] each)."""
    from shardc.training.axis import LayoutOverride, ShardingPolicy

    base = name.split("[")[0]
    tp = int(base.split("=")[1].split("+")[0]) if base.startswith("tp=") else 1
    return ShardingPolicy(tp, "zero" in base or "fsdp" in base, "fsdp" in base, tuple(LayoutOverride(*o) for o in overrides or ()))


def worker(spec: dict) -> None:
    """One row on the MPI ranks this process is one of: compile, train under
    `Measurement` (the definition `--auto` prints), rank 0 prints a JSON line."""
    from mpi4py import MPI

    from shardc.training.auto_plan import Measurement
    from shardc.training.train import set_blas_threads

    comm = MPI.COMM_WORLD
    set_blas_threads(1)
    measure = Measurement()
    secs = (_train_gpt if spec["kind"] == "gpt" else _train_llama)(spec, comm, measure)
    peaks = comm.allgather(measure.peak_bytes())
    traced = measure.traced_bytes()
    if comm.Get_rank() == 0:
        import statistics

        # the two traced steps run slower: the median of the later ones (after the first with fewer than 4)
        secs = secs[2:] if len(secs) >= 4 else secs[1:] or secs
        row = {"ms": statistics.median(secs) * 1e3, "peak": max(x or 0 for x in peaks), "traced": traced, "state": measure.numpy_live}
        print("ROW " + json.dumps(row), flush=True)


def _train_gpt(spec: dict, comm, measure) -> list[float]:
    """The built-in GPT under `spec`'s policy: its step seconds (rank 0)."""
    import numpy as np

    from shardc.training.data import synthetic_corpus
    from shardc.training.gpt import GPTConfig
    from shardc.training.tokenizer import make_tokenizer
    from shardc.training.trainer import TrainingConfig, compile_program, train_mpi

    p = _policy(spec["policy"], spec.get("overrides"))
    text = synthetic_corpus(60000, 0)
    tok = make_tokenizer("char", text, None, pad_to=int(np.lcm(8, comm.Get_size() // p.tp)))
    data = np.asarray(tok.encode(text), np.int32)
    model = GPTConfig(spec["n_layer"], spec["n_head"], spec["n_embd"], spec["block"], tok.vocab_size)
    cfg = TrainingConfig(model, per_device_batch=spec["batch"], steps=spec["steps"], warmup_steps=1).shard(p.tp, p.zero, p.fsdp, p.overrides)
    program = compile_program(cfg, cfg.grid(comm.Get_size()), world=comm)
    measure.compiled(trace=comm.Get_rank() == 0)
    result = train_mpi(cfg, data, None, lambda step: measure.stepped(), program)
    return [s.seconds for s in result.log] if result is not None else []


def _train_llama(spec: dict, comm, measure) -> list[float]:
    """The transformers model of `spec` (`hf:LlamaForCausalLM` or, kind "gpt2",
    `hf:GPT2LMHeadModel` from its config, random init) under `spec`'s policy, as `shardc-train --torch-model` trains it: its step
    seconds (rank 0, from loss.csv)."""
    import csv

    from shardc.frontends.torch_source import TorchSource
    from shardc.tools.train import arg_parser
    from shardc.training.job import run_job

    args = arg_parser().parse_args(_llama_flags(spec) + _policy_flags(spec["policy"], spec.get("overrides")) + ["--steps", str(spec["steps"]), "--out", spec["out"]])
    if run_job(args, TorchSource(), comm, measure=measure) != 0:
        raise SystemExit(1)
    if comm.Get_rank() != 0:
        return []
    with open(Path(spec["out"]) / "loss.csv") as f:
        return [float(r["seconds"]) for r in csv.DictReader(f)]


def _llama_flags(spec: dict) -> list[str]:
    return [
        "--torch-model", HF_CLASS[spec["kind"]], "--model-config", spec["config"], "--block-size", str(spec["block"]),
        "--per-device-batch", str(spec["batch"]), "--quiet", "--eval-every", "0", "--checkpoint-every", "0",
    ]


def _policy_flags(name: str, overrides: list | None = None) -> list[str]:
    p = _policy(name, overrides)
    mix = [f for o in p.overrides for f in ("--policy-override", f"{o.pattern}={o.kind}")]
    return ["--tp", str(p.tp), "--zero" if p.zero else "--no-zero", *(["--fsdp"] if p.fsdp else []), *mix]


def _llama_config(m: dict) -> dict:
    """The LlamaConfig (GPT2Config) fields of a llama (gpt2) model entry (vocab_size: the tokenizer's)."""
    if m["kind"] == "gpt2":
        return dict(n_embd=m["hidden"], n_layer=m["n_layer"], n_head=m["n_head"], n_positions=m["block"])
    return dict(
        hidden_size=m["hidden"], intermediate_size=m["mlp"], num_hidden_layers=m["n_layer"], num_attention_heads=m["n_head"],
        num_key_value_heads=m["n_kv"], max_position_embeddings=m["block"],
    )


def _llama_plan(m: dict, world: int, budget: float | None, cost):
    """The auto plan of the llama entry on `world` ranks, as `shardc-train --torch-model
    ... --auto` makes it (`plan_torch_job`)."""
    from shardc.frontends.torch_plan import plan_torch_job
    from shardc.tools.train import arg_parser
    from shardc.training.job import Job

    args = arg_parser().parse_args(_llama_flags(m))
    args.memory_budget = budget
    return plan_torch_job(Job(args, world), world, world, cost=cost)  # every rank on this host, as under mpiexec


def measure_row(spec: dict, world: int, timeout: float) -> dict | None:
    from shardc.passes.cost_model import default_mpiexec

    mpiexec = default_mpiexec()
    if mpiexec is None:
        return None
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = [mpiexec, "-n", str(world), sys.executable, __file__, "--worker", json.dumps(spec)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
    if done.returncode != 0 or not rows:
        sys.stderr.write(f"  {spec['policy']} on {world}: failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}\n")
        return None
    return json.loads(rows[-1][4:])


class Summary:
    """A model's rows against the issue's proof: how many measured policies are within
    25% of their predicted step time and 15% of their predicted memory (traced), and
    auto's measured tokens/s over the best hand policy's per world."""

    def __init__(self) -> None:
        self.time: list[float] = []
        self.memory: list[float] = []
        self.auto: list[tuple[int, float]] = []

    def add(self, time_ratio: float, memory_ratio: float) -> None:
        self.time.append(time_ratio)
        self.memory.append(memory_ratio)

    def text(self) -> str:
        if not self.time:
            return "nothing measured"
        auto = ", ".join(f"{r:.2f}x on {w}" for w, r in self.auto) or "-"
        in_time = sum(abs(r - 1) <= TIME_WITHIN for r in self.time)
        in_mem = sum(abs(r - 1) <= MEMORY_WITHIN for r in self.memory)
        return (
            f"auto's tokens/s / best hand policy's: {auto}; of {len(self.time)} measured policies {in_time} within "
            f"{TIME_WITHIN:.0%} (time), {in_mem} within {MEMORY_WITHIN:.0%} (memory)"
        )


def solve_times(unshared: bool) -> int:
    """`--solve`: seconds `auto-sharding` takes to plan the GPT-2-small training step
    (`@train_step` unannotated, on a 2x2 grid, default rates), repeated layers shared and,
    with `unshared`, each solved on its own; the predicted step time must agree."""
    from xdsl.dialects import func

    from shardc.passes.auto_sharding import plan_function
    from shardc.passes.cost_model import DEFAULT_RATES, CostModel
    from shardc.training.gpt import GPTConfig
    from shardc.training.mesh import make_grid
    from shardc.training.step import build_step_module

    module = build_step_module(GPTConfig(12, 12, 768, 1024, 50304), 8, only=["train_step"])
    grid = make_grid(4, 2).grid_op()
    module.body.block.insert_op_before(grid, module.body.block.first_op)
    fn = next(op for op in module.body.block.ops if isinstance(op, func.FuncOp))
    print("auto-sharding of the GPT-2-small training step (12 layers, n_embd 768, batch 8, grid 2x2)")
    for share in (True, False) if unshared else (True,):
        start, cpu = time.perf_counter(), time.process_time()
        b, program, solution = plan_function(fn, grid, CostModel(DEFAULT_RATES), None, share_layers=share)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(f"  {'shared layers' if share else 'every layer  '}: {seconds:6.1f} s ({cpu:.1f} s CPU), {len(b.nodes)} nodes ({program.tied} tied), "
              f"{len(program.costs)} columns; predicted step {solution.time * 1e3:.1f} ms, peak {solution.peak / 2**20:.0f} MiB/rank")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


MODELS = {
    "gpt4": ("gpt-l4-e128", dict(kind="gpt", n_layer=4, n_head=4, n_embd=128, block=64, batch=8)),
    "gpt12": ("gpt-l12-e128", dict(kind="gpt", n_layer=12, n_head=4, n_embd=128, block=64, batch=8)),
    "llama": ("llama-h256-l4", dict(kind="llama", n_layer=4, n_head=8, n_kv=4, hidden=256, mlp=688, block=128, batch=4)),
    "gpt2": ("gpt2-e128-l4", dict(kind="gpt2", n_layer=4, n_head=4, hidden=128, block=64, batch=8)),
}
"""The full run's models: `--models` picks among them."""
QUICK = {
    "gpt": ("gpt-l1-e16", dict(kind="gpt", n_layer=1, n_head=2, n_embd=16, block=8, batch=2)),
    "llama": ("llama-h32-l1", dict(kind="llama", n_layer=1, n_head=4, n_kv=2, hidden=32, mlp=64, block=16, batch=2)),
}
"""`--quick`'s tiny ones (`--models gpt`, the default, or `llama`, or both)."""
TIME_WITHIN, MEMORY_WITHIN = 0.25, 0.15
"""The issue's proof: predicted step time within 25% of measured, memory within 15%."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one tiny model on 2 ranks, 3 steps")
    ap.add_argument("--models", help=f"comma-separated: {', '.join(MODELS)} (default: all), with --quick {', '.join(QUICK)} (default: gpt)")
    ap.add_argument("--worlds", help="comma-separated ranks (default 1,2,4; with --quick 2)")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--rates", default="cached", help="cached | default | measure (calibrate and cache) | a JSON file of Rates.to_json()")
    ap.add_argument("--no-measure", action="store_true", help="predictions only")
    ap.add_argument("--no-plan-only", action="store_true", help="leave out the GPT-2-small --plan-only rows")
    ap.add_argument("--solve", nargs="?", const="shared", choices=("shared", "both"), help="only time the auto-sharding pass's solve of the GPT-2-small training step (12 layers, n_embd 768, 2x2 grid): shared layers, or both shared and each layer on its own (a minute more)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(json.loads(a.worker))
        return 0
    if a.solve:
        return solve_times(a.solve == "both")

    from shardc.passes.cost_model import DEFAULT_RATES, CostModel, load_rates
    from shardc.host import physical_cores
    from shardc.training.auto_plan import PlanError, choose, host_cost_model, size_text
    from shardc.training.data import synthetic_corpus
    from shardc.training.gpt import GPTConfig
    from shardc.training.job import JobError
    from shardc.training.tokenizer import make_tokenizer

    if a.rates not in ("cached", "default", "measure"):
        from shardc.passes.cost_model import Rates

        rates = Rates.from_json(json.loads(Path(a.rates).read_text()))
    else:
        rates = DEFAULT_RATES if a.rates == "default" else load_rates(recalibrate=a.rates == "measure")
    cost = CostModel(rates)
    n_tokens = make_tokenizer("char", synthetic_corpus(60000, 0)).n_tokens
    table = QUICK if a.quick else MODELS
    picked = (a.models or ("gpt" if a.quick else ",".join(MODELS))).split(",")
    unknown = [m for m in picked if m not in table]
    if unknown:
        ap.error(f"--models: no model {unknown[0]!r}{' with --quick' if a.quick else ''} (choose from {', '.join(table)})")
    models = [table[m] for m in picked]
    try:
        worlds = tuple(int(w) for w in a.worlds.split(",")) if a.worlds else (2,) if a.quick else (1, 2, 4)
    except ValueError:
        ap.error(f"--worlds: expected comma-separated rank counts, got {a.worlds!r}")
    steps = a.steps or (3 if a.quick else 8)
    work = Path(tempfile.mkdtemp(prefix="auto_plan_bench."))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"rates: {rates.source}; oversubscribed wait {rates.oversubscribed_wait * 1e3:.2f} ms per collective and extra rank per core; "
        f"measured under mpiexec, {physical_cores()} cores here (load average {load}), {steps} steps (median of those after the 2 traced)"
    )
    head = (
        f"{'model':<13} {'W':>2} {'policy':<18} {'pred ms':>8} {'meas ms':>8} {'meas/pred':>9} {'pred mem':>11} {'traced':>11} "
        f"{'meas/pred':>9} {'RSS':>11} {'tok/s meas':>10} {'solve ms':>8}"
    )
    print(head)
    print("-" * len(head))
    for label, m in models:
        if m["kind"] != "gpt":
            m = dict(m, config=str(work / f"{label}.json"))
            Path(m["config"]).write_text(json.dumps(_llama_config(m)))

            def plan_for(world: int, budget: float | None, m: dict = m):
                return _llama_plan(m, world, budget, cost)
        else:
            model = GPTConfig(m["n_layer"], m["n_head"], m["n_embd"], m["block"], n_tokens)

            def plan_for(world: int, budget: float | None, model: GPTConfig = model, m: dict = m):
                # every rank on this host, as `--auto` under mpiexec plans them
                return choose(model, world, m["batch"], budget=budget, cost=host_cost_model(cost, world), ranks_per_host=world, pad_vocab=True)

        summary = Summary()
        for world in worlds:
            plan = plan_for(world, None)
            by_name = {p.name: p for p in plan.considered}
            rows = [(n, by_name[n], None) for n in HAND if n in by_name]
            rows.append(("auto -> " + plan.chosen.name, plan.chosen, plan.seconds))
            plain = [p.memory.total for n, p in by_name.items() if n in ("dp", "zero")]
            if plain:
                try:
                    tight = plan_for(world, min(plain) - 1)
                    rows.append((f"tight -> {tight.chosen.name}", tight.chosen, tight.seconds))
                except (PlanError, JobError) as e:  # plan_torch_job's are JobErrors
                    print(f"{label:<13} {world:>2} auto tight: {e}")
            measured: dict[str, dict | None] = {}
            counted: set[str] = set()
            best_hand = 0.0
            for name, pred, solve in rows:
                key = pred.name
                if key not in measured:
                    mix = [[o.pattern, o.zero, o.fsdp] for o in pred.policy.overrides]
                    spec = dict(m, steps=steps, policy=key, overrides=mix, out=str(work / f"{label}-{world}-{key}"))
                    measured[key] = None if a.no_measure else measure_row(spec, world, 1800.0)
                got = measured[key]
                meas_ms = got["ms"] if got else float("nan")
                tps = pred.tokens / (meas_ms / 1e3) if got else float("nan")
                if solve is None and got:
                    best_hand = max(best_hand, tps)
                traced = got.get("traced") if got else None
                mem_ratio = traced / pred.memory.total if traced else float("nan")
                mem = f"{size_text(traced) if traced else '-':>11} {mem_ratio:>9.2f} {size_text(got['peak']) if got else '-':>11}"
                tail = f" {solve * 1e3:>8.1f}" if solve is not None else f" {'':>8}"
                if solve is not None and got and best_hand:
                    tail += f"  {tps / best_hand:.2f}x best hand"
                    if name.startswith("auto"):
                        summary.auto.append((world, tps / best_hand))
                if got and key not in counted:  # each measured policy once in the counts
                    counted.add(key)
                    summary.add(meas_ms / (pred.step_s * 1e3), mem_ratio)
                print(
                    f"{label:<13} {world:>2} {name:<18} {pred.step_s * 1e3:>8.1f} {meas_ms:>8.1f} {meas_ms / (pred.step_s * 1e3):>9.2f} "
                    f"{size_text(pred.memory.total):>11} {mem} {tps:>10,.0f}{tail}",
                    flush=True,
                )
        print(f"{label}: {summary.text()}", flush=True)
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} (the predictions share this host's cores among the ranks, nothing else running)")
    shutil.rmtree(work, ignore_errors=True)
    if a.no_plan_only:
        return 0
    print()
    print("--plan-only: GPT-2-small shape (12 layers, n_embd 768, 12 heads, block 1024, vocab 50304, 8 sequences/device)")
    gpt2 = GPTConfig(12, 12, 768, 1024, 50304)
    print(f"{'ranks':>6} {'plan':<10} {'grid':<22} {'pred ms':>10} {'tokens/s':>12} {'mem/rank':>11} {'priced':>6} {'solve ms':>8}")
    for world in ((8, 16) if a.quick else (8, 16, 32, 64, 128, 256, 512, 1024)):
        start = time.perf_counter()
        plan = choose(gpt2, world, 8, cost=cost)
        c = plan.chosen
        print(
            f"{world:>6} {c.name:<10} {str(c.grid):<22} {c.step_s * 1e3:>10.0f} {c.tokens_per_s:>12,.0f} {size_text(c.memory.total):>11} "
            f"{len(plan.considered):>6} {(time.perf_counter() - start) * 1e3:>8.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
