"""A training job's warm start (issue #16): a compile-cache hit in a fresh interpreter
loads only the runtime modules its entry names (the xDSL-free `*_run` ones), imports
no xDSL IR and none of the compiler, builds no IR (no shard dialect, step builder,
autodiff, passes, printer, unused dialects' emitters), compiles only the
generated functions the steps call (not `@loss`) and gives the cold run's losses
bitwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from shardc.runtime.codegen import cache
from shardc.runtime.codegen.cache import CorruptEntry

_JOB = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from shardc.runtime.execute.comm import run_simulated
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.spmd import RankState
    from shardc.training.trainer import TrainingConfig, compile_program

    cfg = TrainingConfig(GPTConfig(1, 2, 16, 8, 16), per_device_batch=2, steps=1)
    program = compile_program(cfg, cfg.grid(1))
    rng = np.random.default_rng(0)
    batch = (rng.integers(0, 16, (program.batch, 8)).astype(np.int32), rng.integers(0, 16, (program.batch, 8)).astype(np.int32))

    def job():
        state = RankState(program, 0, init_params(cfg.model, cfg.seed, np.float32))
        losses = [float(state.train_step([batch], 1e-3)).hex() for _ in range(2)]
        return losses, [float(np.sum(p.astype(np.float64))).hex() for p in state.params]

    losses, sums = run_simulated(1, job)[0]
    pending = sorted(getattr(program.compiled, "_pending", {}))  # generated functions never compiled
    print(json.dumps({"cached": program.cached, "losses": losses, "sums": sums, "modules": sorted(sys.modules), "pending": pending}))
    """
)

# What a hit must not load: the IR builders, the compiler, the emitters of dialects the
# step does not use.
_NOT_ON_A_HIT = (
    "shardc.dialects.shard",
    "shardc.training.step",
    "shardc.training.autodiff",
    "shardc.passes",
    "shardc.lowering",
    "shardc.ir.printer",
    "shardc.ir.fast_parser",
    "shardc.runtime.codegen.kernels.tosa",
    "shardc.runtime.codegen.kernels.tm_tensor",
    "shardc.runtime.codegen.kernels.affine",
    "shardc.runtime.codegen.kernels.shard",
    "shardc.runtime.codegen.kernels.scf",
)


def _run(cache_dir: str) -> dict:
    env = dict(os.environ, SHARDC_CACHE_DIR=cache_dir)
    env.pop("SHARDC_CACHE", None)
    p = subprocess.run([sys.executable, "-c", _JOB], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


# What a hit imports of xDSL: its exceptions module alone (`code_check`'s
# UnsafeCodeError is a DiagnosticException; a leaf of exception classes, 1 ms), never
# its IR, IRDL, dialects, parser or printer (0.3 s). Nor shardc's compiler.
_XDSL_ALLOWED = {"xdsl", "xdsl.utils", "xdsl.utils.exceptions"}
_COMPILER = ("shardc.dialects", "shardc.passes", "shardc.ir", "shardc.interfaces", "shardc.lowering", "shardc.runtime.codegen.compile", "shardc.runtime.execute.dtypes", "shardc.training.ir_builder")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, object]:
    """A cold run, then a warm one on its cache, each in a fresh interpreter."""
    where = tmp_path_factory.mktemp("warm") / "c"
    return _run(str(where)), _run(str(where)), where


@pytest.mark.slow
def test_warm_start_imports_no_xdsl_ir_and_no_compiler(runs):
    cold, warm, _ = runs
    assert (cold["cached"], warm["cached"]) == ("compiled", "cache")
    assert warm["losses"] == cold["losses"] and warm["sums"] == cold["sums"]  # bitwise
    xdsl = {m for m in warm["modules"] if m == "xdsl" or m.startswith("xdsl.")}
    assert xdsl <= _XDSL_ALLOWED, sorted(xdsl - _XDSL_ALLOWED)
    compiler = [m for m in warm["modules"] if _under(m, _COMPILER) and m not in ("shardc.ir", "shardc.ir.escape")]  # escape: the display helper messages use
    assert not compiler, compiler
    assert "xdsl.ir" in cold["modules"] and [m for m in cold["modules"] if _under(m, _COMPILER)]  # the check is live


def _under(module: str, names: tuple[str, ...]) -> bool:
    return any(module == n or module.startswith(n + ".") for n in names)


def test_warm_start_loads_only_what_the_entry_names_and_matches_the_cold_run(runs):
    cold, warm, where = runs
    assert (cold["cached"], warm["cached"]) == ("compiled", "cache")
    assert warm["losses"] == cold["losses"] and warm["sums"] == cold["sums"]  # bitwise
    loaded = set(warm["modules"])
    assert not [m for m in loaded if m.startswith(_NOT_ON_A_HIT)], sorted(m for m in loaded if m.startswith(_NOT_ON_A_HIT))
    assert set(_NOT_ON_A_HIT) & set(cold["modules"])  # the cold run does load them: the check is live
    (entry_file,) = where.rglob("*.entry")
    from shardc.runtime.codegen.cache import DiskCache

    data = DiskCache.default().unsealed(entry_file)
    header_end = data.index(b"\n", len(b"shardc-compile-cache\n"))
    body_len = json.loads(data[len(b"shardc-compile-cache\n") : header_end])["json"]
    body = json.loads(data[header_end + 1 : header_end + 1 + body_len])
    assert "shardc.runtime.execute.structured_run" in body["modules"] and set(body["modules"]) <= loaded
    assert not [m for m in body["modules"] if not m.endswith("_run") and m != "shardc.runtime.execute.helpers"]  # run-time modules only
    assert warm["pending"] == ["fn__loss"] and cold["pending"] == []  # a hit compiles what the steps call


def test_entry_modules_must_be_runtime_modules():
    cache.import_named(["shardc.runtime.execute.helpers"])
    for bad in ["os", "shardc.runtime.codegen.compile", "shardc.runtime.execute.compiled", "shardc.launch", "shardc.runtime.codegen.cache", "shardc.runtime.no_such_module", "shardc.runtime.x;y", 7]:
        with pytest.raises(CorruptEntry):
            cache.import_named([bad])  # type: ignore[list-item]


def test_pool_lists_the_modules_it_names():
    from shardc.runtime.execute import helpers

    modules: set[str] = set()
    cache.dump_bindings({"f": helpers.uview, "n": np.float32(1), "t": (1, "a")}, modules)
    assert modules == {"shardc.runtime.execute.helpers"}



@pytest.mark.parametrize("text", ["f16", "f32", "f64", "i1", "i8", "i16", "i32", "i64", "index"])
def test_a_hit_converts_scalars_by_text_as_the_compiler_does(text):
    """`CachedModule.call` converts scalar arguments by their type's text (no xDSL type
    built); the result is the one `dtypes.to_scalar` gives for the parsed type."""
    from shardc.runtime.execute.compiled import _convert_arg, scalar_spec  # pyright: ignore[reportPrivateUsage]
    from shardc.runtime.execute.dtypes import to_scalar

    assert scalar_spec(text) == (None, text) and scalar_spec("bf16") is None
    t = cache._scalar_type(text)  # pyright: ignore[reportPrivateUsage]
    for v in [0, 1, -1, 3, 2**40 + 5, 2**63 + 7, -(2**70), 0.5, 1e30, np.float64(2.5), np.int64(-9)]:
        if text.startswith("i") and isinstance(v, float | np.floating):
            continue  # integer scalars are given ints
        with np.errstate(all="ignore"):  # 1e30 overflows f16 (to inf) on both paths
            want = to_scalar(v, t)
            got = _convert_arg(v, (None, text), "f", 0)
        assert type(got) is type(want) and (got == want or (got != got and want != want)), (v, got, want)
