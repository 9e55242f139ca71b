"""Checkpoints that cannot be confused, under `mpiexec`: another run's checkpoints in the
directory (a fresh run refuses them, `--overwrite` deletes them, pruning keeps to this
run's), a corrupt newest checkpoint (the newest intact one is resumed, bitwise equal),
manifest edits (one line naming the checkpoint and what is wrong, before compiling), a
`--steps` below the checkpoint's step, and a disk that fills up during a save (one line
with the path and the bytes, no partial files, the last checkpoint intact)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from _cluster_jobs import MODEL, TRAIN, no_traceback, run, same_params, under_mpiexec

from shardc.training.checkpoint import MANIFEST, complete_checkpoints, open_checkpoint, prune, run_of, step_dir

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs and signals sent to running trainers


def _one_error(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 1, p.stdout + p.stderr
    no_traceback(p)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shardc-train: error: "), p.stderr
    assert "compiled the step" not in p.stdout and "loaded the compiled step" not in p.stdout  # before compiling
    return lines[0].removeprefix("shardc-train: error: ")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A 4-rank run of 20 steps with checkpoints at 10, 15 and 20."""
    out = tmp_path_factory.mktemp("finished")
    p = run(under_mpiexec(out, "--steps", "20", "--checkpoint-every", "5", "--keep", "3"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert [s for s, _ in complete_checkpoints(out / "checkpoints")] == [10, 15, 20]
    return out


def test_another_runs_checkpoints(tmp_path, finished):
    out = tmp_path / "out"
    shutil.copytree(finished / "checkpoints", out / "checkpoints")
    theirs = run_of(step_dir(out / "checkpoints", 20))
    assert theirs is not None and len(theirs.id) == 12
    # a fresh run refuses to start beside them
    msg = _one_error(run(under_mpiexec(out, "--steps", "10", "--checkpoint-every", "5", n=2)))
    assert msg.startswith(f"checkpoint directory {out / 'checkpoints'} holds checkpoints of another run (run {theirs.id} (started {theirs.started} on {theirs.host}): steps 10, 15, 20): ")
    assert msg.endswith("--resume continues the newest, --overwrite deletes them, or choose another --out or --checkpoint-dir")
    # --overwrite deletes them; this run's own checkpoints survive its pruning
    p = run(under_mpiexec(out, "--steps", "10", "--checkpoint-every", "5", "--keep", "2", "--overwrite", n=2))
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"shardc-train: --overwrite: deleted 3 checkpoints of another run (run {theirs.id} " in p.stdout
    mine = [(s, run_of(d)) for s, d in complete_checkpoints(out / "checkpoints")]
    assert [s for s, _ in mine] == [5, 10] and mine[0][1] == mine[1][1] and mine[0][1].id != theirs.id
    # --resume says whose run it continues, and keeps it
    p = run(under_mpiexec(out, "--steps", "15", "--checkpoint-every", "5", "--keep", "2", "--resume", n=2))
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"(step 10, saved on 2 ranks, grid (batch=1, shard=2)) of run {mine[0][1].id} (started {mine[0][1].started} on {mine[0][1].host})\n" in p.stdout
    assert run_of(step_dir(out / "checkpoints", 15)) == mine[0][1]
    # pruning counts only the saving run's checkpoints: older steps of this run go, another run's newer ones stay
    shutil.copytree(finished / "checkpoints" / "step-00000020", out / "checkpoints" / "step-00000020")
    prune(out / "checkpoints", 1, mine[0][1].id)
    assert [s for s, _ in complete_checkpoints(out / "checkpoints")] == [15, 20]


@pytest.mark.parametrize("damage", ["checksum", "manifest"])
def test_corrupt_newest_falls_back(tmp_path, finished, damage):
    out = tmp_path / "out"
    shutil.copytree(finished / "checkpoints", out / "checkpoints")
    newest = step_dir(out / "checkpoints", 20)
    if damage == "checksum":
        f = newest / "rank-00002.safetensors"
        raw = bytearray(f.read_bytes())
        raw[-1] ^= 0x01
        f.write_bytes(bytes(raw))
        said = f"shardc-train: note: checkpoint {newest}: checksum mismatch in rank-00002.safetensors ("
    else:  # a manifest cut short: whose run it was cannot be read either
        (newest / MANIFEST).write_text((newest / MANIFEST).read_text()[:100])
        said = f"shardc-train: note: checkpoint {newest}: manifest.json is unreadable or corrupt ("
    p = run(under_mpiexec(out, "--steps", "20", "--checkpoint-every", "5", "--keep", "3", "--resume"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert said in p.stdout, p.stdout
    assert "passed over for the newest intact checkpoint" in p.stdout
    assert f"resuming from {step_dir(out / 'checkpoints', 15)} (step 15," in p.stdout
    assert same_params(out, finished)  # steps 16..20 again: the same model, bitwise
    assert open_checkpoint(out / "checkpoints").step == 20  # the corrupt one replaced by a good one


def _edit(ck: Path, change) -> None:
    m = json.loads((ck / MANIFEST).read_text())
    change(m)
    (ck / MANIFEST).write_text(json.dumps(m))


def _first_array(m: dict) -> dict:
    return m["arrays"][sorted(m["arrays"])[0]]


EDITS = {
    "step": (lambda m: m.update(step=5), "manifest.json says step 5, the directory's name says 15"),
    "world": (lambda m: m.update(world=0), "manifest.json says world 0, its grid (batch=2, shard=2) has 4 ranks"),
    "grid": (lambda m: m["grid"].update(batch=0), "manifest.json is corrupt: grid {'batch': 0, 'shard': 2} is not a (batch, shard) grid of positive sizes"),
    "dropped array": (lambda m: m["arrays"].pop(sorted(m["arrays"])[0]), "manifest.json is corrupt: it holds no array "),
    "shape": (lambda m: _first_array(m)["shape"].__setitem__(0, _first_array(m)["shape"][0] * 2), "manifest.json is corrupt: the pieces of "),
    "offset": (lambda m: _first_array(m)["pieces"][0]["offset"].__setitem__(0, 10**6), "manifest.json is corrupt: a piece of "),
    "history": (lambda m: m["progress"]["history"].pop(), "manifest.json is corrupt: the loss history has 14 entries for step 15"),
    "rng": (lambda m: m["progress"]["data"]["rng"].update(state="garbage"), "manifest.json is corrupt: the batch RNG's state is not a generator's state"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_manifest_edit_is_one_line(tmp_path, finished, edit):
    ck = tmp_path / "step-00000015"
    shutil.copytree(step_dir(finished / "checkpoints", 15), ck)
    change, want = EDITS[edit]
    _edit(ck, change)
    msg = _one_error(run(under_mpiexec(tmp_path / "out", "--steps", "20", "--resume", str(ck), n=2)))
    assert msg.startswith(f"checkpoint {ck}: {want}"), msg


def test_steps_below_the_checkpoint(tmp_path, finished):
    out = tmp_path / "out"
    shutil.copytree(finished / "checkpoints", out / "checkpoints")
    msg = _one_error(run(under_mpiexec(out, "--steps", "12", "--resume", n=2)))
    assert msg == f"checkpoint {step_dir(out / 'checkpoints', 20)}: it is at step 20, past this run's last step 12 (--steps): train to step 20 or beyond to continue it"


@pytest.mark.parametrize("ranks", ["mpiexec", "simulate"])
def test_disk_full_during_a_save(tmp_path, ranks):
    """A small tmpfs as the checkpoint directory fills up after a few checkpoints (4 ranks
    under mpiexec, or as threads of one process)."""
    full = tmp_path / "small"
    full.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(full)], capture_output=True, text=True)
    if m.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {m.stderr.strip()}")
    try:
        args = ["--steps", "200", "--checkpoint-every", "5", "--keep", "100", "--checkpoint-dir", str(full)]
        if ranks == "mpiexec":
            p = run(under_mpiexec(tmp_path / "out", *args))
        else:
            p = run([*TRAIN, *MODEL, "--simulate", "4", "--out", str(tmp_path / "out"), *args])
        assert p.returncode == 1, p.stdout + p.stderr
        no_traceback(p)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1, p.stderr
        assert lines[0].startswith(f"shardc-train: error: checkpoint not saved: no space left on the device of {full}/.tmp-step-"), p.stderr
        assert "bytes free" in lines[0] or ("the file needs" in lines[0] and "are free" in lines[0]), lines[0]
        assert lines[0].endswith("the partial files are removed and the earlier checkpoints are intact")
        left = sorted(x.name for x in full.iterdir())
        assert not [n for n in left if n.startswith(".tmp-") or n.endswith(".part")], left
        saved = complete_checkpoints(full)
        assert saved, left
        ck = open_checkpoint(saved[-1][1])  # intact: its manifest validates
        from shardc.training.checkpoint import check_files, verify_share

        check_files(ck)
        verify_share(ck, 0, 1)
    finally:
        subprocess.run(["umount", str(full)], check=False)
