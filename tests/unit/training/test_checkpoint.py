"""Sharded checkpoints on simulated ranks: who writes what, bitwise resume, atomicity and
`keep`, the exported model, and every bad-input case with its exact message."""

import json
import os
import struct
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from shardc.training.axis import resolve
from shardc.training.checkpoint import (
    remove_interrupted,
    MANIFEST,
    BatchStream,
    CheckpointError,
    CheckpointOptions,
    complete_checkpoints,
    open_checkpoint,
    step_dir,
    write_slice,
)
from shardc.training.data import CharTokenizer, batches, split, synthetic_corpus
from shardc.training.gpt import GPTConfig, param_specs
from shardc.training.mesh import make_grid
from shardc.training.trainer import TrainingConfig, compile_program, train_simulated

TEXT = synthetic_corpus(4000, seed=0)
TOK = CharTokenizer.from_text(TEXT, pad_to=8)
TRAIN, VAL = split(TOK.encode(TEXT))
MODEL = GPTConfig(n_layer=1, n_head=4, n_embd=16, block_size=8, vocab_size=TOK.vocab_size)
BASE = TrainingConfig(MODEL, per_device_batch=1, steps=6, warmup_steps=2, eval_every=0)
GLOBAL_BATCH = 4

# (world, tp, zero, fsdp): every layout of 1, 2 and 4 ranks with tp 1 or 2.
LAYOUTS = [(w, tp, z, f) for w in (1, 2, 4) for tp in (1, 2) if tp <= w for z, f in ((False, False), (True, False), (True, True))]


def config(layout, steps: int = 6) -> TrainingConfig:
    """BASE on `layout`, with the same global batch on every grid."""
    world, tp, zero, fsdp = layout
    return replace(BASE, per_device_batch=GLOBAL_BATCH // (world // tp), steps=steps).shard(tp=tp, zero=zero, fsdp=fsdp)


@lru_cache(maxsize=None)
def program_for(layout):
    cfg = config(layout)
    return compile_program(cfg, cfg.grid(layout[0]))


def train(layout, steps: int, directory=None, every: int = 0, keep: int = 10, resume=None, on_step=None):
    cfg = config(layout, steps)
    opts = None if directory is None else CheckpointOptions(Path(directory), every, keep)
    return train_simulated(cfg, TRAIN, layout[0], None, on_step, program_for(layout), checkpoint=opts, resume=resume)


# ---------------------------------------------------------------------------------------
# Who writes what
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_every_element_is_written_once(layout):
    world, tp, zero, fsdp = layout
    cfg = config(layout)
    grid = make_grid(world, tp)
    for s in param_specs(MODEL):
        lay = resolve(s.axes, cfg.plan, cfg.policy)
        for spec in (lay.storage, lay.update):
            count = np.zeros(s.shape, np.int32)
            for r in range(world):
                sl = write_slice(s.shape, spec, grid, r)
                if sl is not None:
                    count[sl] += 1
            assert (count == 1).all(), (s.path, spec)


@pytest.mark.parametrize("tp, zero, fsdp", [(1, False, False), (1, True, False), (2, True, True)])
def test_each_rank_writes_its_share(tp, zero, fsdp):
    """At GPT-2 small's shapes on 2 ranks, every rank writes 1/2 of the state, whatever
    the policy (replicated pieces are split among their replicas)."""
    model = GPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50304)
    policy = BASE.shard(tp=tp, zero=zero, fsdp=fsdp).policy
    world = 2
    grid = make_grid(world, tp)
    written = [0] * world
    total = 0
    for s in param_specs(model):
        lay = resolve(s.axes, BASE.plan, policy)
        for spec in (lay.storage, lay.update, lay.update):
            total += int(np.prod(s.shape))
            for r in range(world):
                sl = write_slice(s.shape, spec, grid, r)
                written[r] += 0 if sl is None else int(np.prod([x.stop - x.start for x in sl]))
    assert sum(written) == total
    assert max(abs(w - total / world) for w in written) < 1e-4 * total


def test_batch_stream_is_data_batches_and_resumes():
    ref = batches(TRAIN, 3, 8, seed=5)
    s = BatchStream(TRAIN, 3, 8, seed=5)
    for _ in range(4):
        a, b = next(ref), next(s)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    state = json.loads(json.dumps(s.state()))  # as the manifest keeps it
    t = BatchStream(TRAIN, 3, 8, seed=0)
    t.restore(state)
    assert t.position == 4
    for _ in range(3):
        a, b = next(ref), next(t)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


# ---------------------------------------------------------------------------------------
# Save and resume on the same grid: bitwise
# ---------------------------------------------------------------------------------------

TP2_FSDP = (4, 2, True, True)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """6 steps on 4 ranks (tp=2, FSDP) saving every 2 steps."""
    d = tmp_path_factory.mktemp("full")
    return d, train(TP2_FSDP, 6, d, every=2)


def _assert_same(a, b):
    assert a.losses == b.losses
    assert [s.lr for s in a.log] == [s.lr for s in b.log]
    for k in a.params:
        assert np.array_equal(a.params[k], b.params[k]), k


@pytest.mark.slow
@pytest.mark.parametrize("step", [2, 4])
def test_resume_is_bitwise_equal(full_run, step):
    d, full = full_run
    resumed = train(TP2_FSDP, 6, resume=step_dir(d, step))
    _assert_same(full, resumed)
    assert [s.step for s in resumed.log] == list(range(1, 7))


def test_manifest_records_the_state(full_run):
    d, _ = full_run
    ck = open_checkpoint(d)  # the newest
    m = ck.manifest
    assert ck.directory == step_dir(d, 6) and m["step"] == 6 and m["world"] == 4
    assert m["grid"] == {"batch": 2, "shard": 2} and m["policy"] == {"tp": 2, "zero": True, "fsdp": True}
    assert m["model"]["n_embd"] == 16 and m["training"]["lr"] == BASE.lr and len(m["fingerprint"]) == 64
    a = m["arrays"]["params/h.0.attn.c_attn.weight"]
    assert a["shape"] == [16, 3, 4, 4] and a["dtype"] == "float32" and a["spec"] == [None, None, ["shard", "batch"], None]
    assert len(a["pieces"]) == 4 and {p["file"] for p in a["pieces"]} == {f"rank-{r:05d}.safetensors" for r in range(4)}
    assert set(m["arrays"]) == {f"{k}/{s.path}" for k in ("params", "opt_state/mu", "opt_state/nu") for s in param_specs(MODEL)}
    assert m["progress"]["data"]["position"] == 6 and len(m["progress"]["history"]) == 6
    assert sorted(os.listdir(ck.directory)) == [MANIFEST] + [f"rank-{r:05d}.safetensors" for r in range(4)]


@pytest.mark.slow
def test_keep_and_interrupted_saves(tmp_path):
    # An interrupted save of an earlier run: a temporary directory with a partial file.
    stale = tmp_path / ".tmp-step-00000003"
    stale.mkdir()
    (stale / "rank-00000.safetensors").write_bytes(b"partial")
    train((2, 1, True, False), 4, tmp_path, every=1, keep=2)
    assert [s for s, _ in complete_checkpoints(tmp_path)] == [3, 4]
    # the trainer leaves another job's temporary directory alone (it may be saving now);
    # the job that holds the directory's lock removes it (shardc-train does at startup)
    assert sorted(os.listdir(tmp_path)) == [".tmp-step-00000003", "step-00000003", "step-00000004"]
    assert remove_interrupted(tmp_path) == [stale]
    assert sorted(os.listdir(tmp_path)) == ["step-00000003", "step-00000004"]
    # A save interrupted before its rename is invisible: the previous one is resumed.
    (tmp_path / ".tmp-step-00000005").mkdir()
    assert open_checkpoint(tmp_path).step == 4


@pytest.mark.slow
def test_exported_model_has_the_model_names(tmp_path):
    from safetensors.numpy import load_file

    from shardc.tools.train import main

    out = tmp_path / "out"
    args = ["--simulate", "2", "--n-layer", "1", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2", "--steps", "3", "--eval-every", "0", "--quiet", "--out", str(out)]
    assert main(args) == 0
    got = load_file(out / "model.safetensors")
    ref = np.load(out / "params.npz")
    assert set(got) == set(ref.files) == {s.path for s in param_specs(MODEL)}
    for k in ref.files:
        assert np.array_equal(got[k], ref[k]), k
    assert [s for s, _ in complete_checkpoints(out / "checkpoints")] == [3]


# ---------------------------------------------------------------------------------------
# Bad input: one line naming the checkpoint and what is wrong; training does not start
# ---------------------------------------------------------------------------------------


@pytest.fixture
def saved(tmp_path):
    """A 2-rank data-parallel checkpoint at step 2 (a copy per test: tests break it)."""
    train((2, 1, False, False), 2, tmp_path, every=2)
    return step_dir(tmp_path, 2)


def _refused(resume, cfg_change=None, meta=None) -> str:
    cfg = config((2, 1, False, False), 4)
    if cfg_change:
        cfg = cfg_change(cfg)
    steps = []
    opts = CheckpointOptions(Path(resume).parent / "new", meta=meta or {})
    with pytest.raises(CheckpointError) as e:
        train_simulated(cfg, TRAIN, 2, None, steps.append, program_for((2, 1, False, False)) if cfg_change is None else None, checkpoint=opts, resume=resume)
    assert steps == []  # not one step trained
    return str(e.value)


def _tensor_at(path: Path, pos: int) -> str:
    """The tensor whose bytes hold file position `pos`."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    for k, v in header.items():
        if k != "__metadata__" and v["data_offsets"][0] <= pos - 8 - n < v["data_offsets"][1]:
            return k
    raise AssertionError(pos)


@pytest.mark.slow
def test_missing_checkpoint(tmp_path):
    assert _refused(tmp_path / "nope") == f"no checkpoint at {tmp_path / 'nope'}: no such directory"


def test_no_complete_checkpoint(tmp_path):
    (tmp_path / ".tmp-step-00000002").mkdir()
    assert _refused(tmp_path) == f"no complete checkpoint in {tmp_path}"


def test_checkpoint_without_manifest(saved):
    (saved / MANIFEST).unlink()
    assert _refused(saved) == f"checkpoint {saved} is incomplete: it has no manifest.json (a save was interrupted)"


def test_missing_rank_file(saved):
    (saved / "rank-00001.safetensors").unlink()
    assert _refused(saved) == f"checkpoint {saved}: rank-00001.safetensors is missing"


def test_truncated_file(saved):
    f = saved / "rank-00001.safetensors"
    size = f.stat().st_size
    f.write_bytes(f.read_bytes()[:-100])
    assert _refused(saved) == f"checkpoint {saved}: rank-00001.safetensors is truncated ({size - 100} of {size} bytes)"


def test_wrong_checksum(saved):
    f = saved / "rank-00000.safetensors"
    raw = bytearray(f.read_bytes())
    pos = len(raw) - 3
    raw[pos] ^= 0x40
    f.write_bytes(bytes(raw))
    assert _refused(saved) == f"checkpoint {saved}: checksum mismatch in rank-00000.safetensors ({_tensor_at(f, pos)})"


def test_corrupt_rank_file_header(saved):
    f = saved / "rank-00000.safetensors"
    raw = bytearray(f.read_bytes())
    raw[8:12] = b"\x00\x01\x02\x03"
    f.write_bytes(bytes(raw))
    msg = _refused(saved)
    assert msg.startswith(f"checkpoint {saved}: rank-00000.safetensors is corrupt (")


def test_corrupt_manifest(saved):
    m = saved / MANIFEST
    m.write_text(m.read_text()[:200])
    assert _refused(saved).startswith(f"checkpoint {saved}: manifest.json is unreadable or corrupt (")
    m.write_text(json.dumps({"format": "something else"}))
    assert _refused(saved) == f"checkpoint {saved}: manifest.json is not a shardc-checkpoint/1 manifest"


def test_another_model(saved):
    msg = _refused(saved, lambda c: replace(c, model=replace(c.model, n_embd=32)))
    assert msg == f"checkpoint {saved}: saved for a different model: n_embd is 16 there, 32 here"


def test_another_vocabulary(saved):
    m = json.loads((saved / MANIFEST).read_text())
    m["meta"] = {"vocabulary": "abc"}
    (saved / MANIFEST).write_text(json.dumps(m))
    msg = _refused(saved, meta={"vocabulary": "def"})
    assert msg == f"checkpoint {saved}: saved with a different vocabulary (this run's does not match the checkpoint's)"
    msg = _refused(saved, lambda c: replace(c, model=replace(c.model, vocab_size=c.model.vocab_size + 8)))
    assert msg == f"checkpoint {saved}: saved for a different model: vocab_size is {MODEL.vocab_size} there, {MODEL.vocab_size + 8} here"


def test_another_training_configuration(saved):
    msg = _refused(saved, lambda c: replace(c, lr=0.01))
    assert msg == f"checkpoint {saved}: saved with a different training configuration: lr is {BASE.lr} there, 0.01 here"


@pytest.mark.slow
def test_cli_bad_checkpoint_is_one_line(tmp_path, capsys):
    from shardc.tools.train import main

    out = tmp_path / "out"
    args = ["--n-layer", "1", "--n-embd", "16", "--block-size", "8", "--steps", "2", "--eval-every", "0", "--quiet", "--out", str(out)]
    assert main(args) == 0
    d = step_dir(out / "checkpoints", 2)
    f = d / "rank-00000.safetensors"
    size = f.stat().st_size
    f.write_bytes(f.read_bytes()[:10])
    capsys.readouterr()
    assert main([*args, "--steps", "4", "--resume"]) == 1
    err = capsys.readouterr().err
    assert err == f"shardc-train: error: checkpoint {d}: rank-00000.safetensors is truncated (10 of {size} bytes)\n"
    assert main([*args, "--n-embd", "32", "--resume", str(d)]) == 1
    assert capsys.readouterr().err == f"shardc-train: error: checkpoint {d}: saved for a different model: n_embd is 16 there, 32 here\n"


def test_exported_model_loads_into_torch(tmp_path):
    """`model.safetensors` is what safetensors' torch API reads into a state dict."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")
    from safetensors.torch import load_file

    from shardc.training.checkpoint import export_safetensors
    from shardc.training.gpt import init_params

    params = init_params(MODEL, 0, np.float32)
    export_safetensors(params, tmp_path / "model.safetensors")
    sd = load_file(tmp_path / "model.safetensors")
    assert set(sd) == set(params)
    for k, v in params.items():
        assert sd[k].dtype == torch.float32 and np.array_equal(sd[k].numpy(), v), k
