"""The trainer's job (`shardc.training.job`): `run_job` hands a job to its model source,
reports a JobError once under MPI, releases the directory locks; `shardc-train` reaches
both sources through it; the trainer's packages import no command-line tool."""

import argparse
import ast
from pathlib import Path

import pytest

import shardc
from shardc.training import job as job_module
from shardc.training.job import Job, JobError, accounting, collective_lines, kib, run_job


class Recording:
    """A ModelSource that records the job it got and does what it is told."""

    def __init__(self, error: str | None = None):
        self.jobs: list[tuple[str, Job]] = []
        self.error = error

    def show_layouts(self, job: Job) -> int:
        self.jobs.append(("layouts", job))
        return 0

    def train(self, job: Job) -> int:
        self.jobs.append(("train", job))
        if self.error:
            raise JobError(self.error)
        return 0


class FakeComm:
    def __init__(self, rank: int, size: int):
        self.rank, self.size = rank, size

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's name
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size


def _settings(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"show_layouts": False, "simulate": None, **kw})


def test_run_job_trains_on_the_simulated_ranks_or_the_comm():
    src = Recording()
    assert run_job(_settings(simulate=4), src) == 0
    (what, job), = src.jobs
    assert what == "train" and (job.world, job.rank, job.comm) == (4, 0, None)
    comm = FakeComm(2, 8)
    run_job(_settings(), src, comm)
    assert (src.jobs[1][1].world, src.jobs[1][1].rank, src.jobs[1][1].comm) == (8, 2, comm)


def test_run_job_shows_layouts_for_the_ranks_it_is_given():
    src = Recording()
    run_job(_settings(show_layouts=True), src, world=6, rank=3)
    (what, job), = src.jobs
    assert what == "layouts" and (job.world, job.rank) == (6, 3)


def test_a_job_error_is_rank_zeros_to_report(monkeypatch):
    released = []
    monkeypatch.setattr("shardc.training.outdir.release_all", lambda: released.append(True))
    assert run_job(_settings(), Recording("bad --data"), FakeComm(1, 2)) == 1  # quietly: rank 0 says it
    with pytest.raises(JobError, match="^bad --data$"):
        run_job(_settings(), Recording("bad --data"), FakeComm(0, 2))
    with pytest.raises(JobError, match="^bad --data$"):
        run_job(_settings(simulate=2), Recording("bad --data"))
    assert released == [True, True, True]


def test_the_job_reads_data_and_reports_a_bad_file(tmp_path):
    job = Job(_settings(data=str(tmp_path / "none.txt"), seed=0), 1)
    with pytest.raises(JobError, match=r"^cannot read '.*none\.txt': No such file or directory$"):
        job.text()
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9")
    with pytest.raises(JobError, match=r"^cannot read '.*latin1\.txt': not UTF-8 text$"):
        Job(_settings(data=str(tmp_path / "latin1.txt"), seed=0), 1).text()
    tok_job = Job(_settings(tp=3, tokenizer="char", vocab_size=None), 4)
    with pytest.raises(JobError, match="^tp=3 does not divide the 4 ranks$"):
        tok_job.tokenizer("abc")


def test_header_lines():
    assert kib(1536) == "1.5 KiB" and kib(3 << 20) == "3.00 MiB"
    from collections import Counter

    lines = collective_lines({"train_step": Counter({"shard.all_reduce[1]": 4, "shard.all_gather[0,1]": 1}), "loss": Counter()})
    assert lines == ["  collectives in @train_step: 1 all_gather over batch+shard, 4 all_reduce over shard", "  collectives in @loss: none"]

    class Cfg:
        per_device_batch, accum = 2, 3

        def microbatch(self, grid):
            return 4

        def global_batch(self, grid):
            return 12

    class Grid:
        batch = 2

    class Mem:
        params, grads, opt_state, total = 1024, 1024, 2048, 4096

    assert accounting(Cfg(), Grid(), 8, Mem()) == [
        "  global batch: 2 per device x 2 data replicas x 3 accumulation steps = 12 sequences (96 tokens; microbatch 4)",
        "  per-rank state: params 1.0 KiB, grads 1.0 KiB, optimizer 2.0 KiB (total 4.0 KiB)",
    ]


@pytest.mark.parametrize("extra, source", [([], "GPTSource"), (["--torch-model", "m.py:make"], "TorchSource")])
def test_shardc_train_reaches_both_sources_through_run_job(monkeypatch, extra, source):
    from shardc.tools.train import main

    got = []
    monkeypatch.setattr(job_module, "run_job", lambda settings, src, *a, **k: got.append((settings, src)) or 0)
    monkeypatch.delenv("PMI_RANK", raising=False)
    monkeypatch.delenv("OMPI_COMM_WORLD_RANK", raising=False)
    monkeypatch.delenv("PMIX_RANK", raising=False)
    monkeypatch.delenv("SLURM_STEP_NUM_TASKS", raising=False)
    assert main(["--simulate", "2", *extra]) == 0
    (settings, src), = got
    assert type(src).__name__ == source and settings.simulate == 2


def test_a_job_error_is_shardc_trains_one_line(monkeypatch, capsys):
    from shardc.tools.train import main

    monkeypatch.setattr(job_module, "run_job", lambda *a, **k: (_ for _ in ()).throw(JobError("the data is too short")))
    assert main(["--simulate", "1"]) == 1
    assert capsys.readouterr().err == "shardc-train: error: the data is too short\n"


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []


def test_the_trainer_and_the_frontends_import_no_tool_and_no_private_name():
    """training/ and frontends/ sit below the command-line tools: nothing of tools/,
    and no underscore name of another shardc module."""
    root = Path(shardc.__file__).parent
    bad = []
    for package in ("training", "frontends"):
        for path in sorted((root / package).glob("*.py")):
            for module, names in _imports(path):
                if module.startswith("shardc.tools"):
                    bad.append(f"{path.name}: {module}")
                if module.startswith("shardc.") and any(n.startswith("_") for n in names):
                    bad.append(f"{path.name}: {module} {names}")
    for module, names in _imports(root / "tools" / "train.py"):
        if module.startswith("shardc.") and any(n.startswith("_") for n in names):
            bad.append(f"tools/train.py: {module} {names}")
    assert bad == []
