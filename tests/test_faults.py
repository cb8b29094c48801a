"""Fault injection: a crash at any instant of a save leaves a run that resumes, and no traceback reaches the user.

Each scenario trains the tiny model in a forked child (4 steps, a checkpoint after each) and breaks
the save of ``checkpoint-3`` at a chosen point by patching transformers in the child only: SIGKILL,
a second SIGINT, a simulated full disk (``OSError(ENOSPC)``). The parent then resumes, in-process,
and checks that ``run.json`` holds every completed step once. Stated outcomes:

| fault | outcome |
| --- | --- |
| SIGKILL: checkpoint-3 folder made, nothing in it | resume from checkpoint-2; checkpoint-3 moved to incomplete/; ``crashed`` after step 3 |
| SIGKILL: all but ``trainer_state.json`` | the same |
| SIGKILL: transformers done, completion marker not written | checkpoint-3 is whole (its state file is written last): resume from it |
| second Ctrl-C during the save (CLI) | exit 130, one line; status ``aborted``; resume from checkpoint-2 |
| full disk during the save (CLI, simulated ENOSPC) | exit 2, one line that says the disk ran out; status ``failed``; resume from checkpoint-2 |
| full disk, a real 24 MiB tmpfs filled after checkpoint-2 (slow; needs user namespaces) | the same, from the real write error |
| a read-only folder, a real read-only tmpfs (same test) | exit 2, one line, before anything loads |
| a second run into a live run's folder | ``OutputDirError`` / exit 2, one line naming the first run's PID |
| truncated run.json on resume | kept as run.json.corrupt, the record rebuilt from the checkpoint's marker and history.jsonl |
| deleted trainer_state.json on resume | that checkpoint set aside, resume from the one before; none left: exit 2, one line |
"""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pytest
import torch
from tiny_run import TINY_RUN, signal_during_step

from grpo_lite import OutputDirError, train
from grpo_lite.cli import main

RUN = dict(TINY_RUN, method="lora", max_steps=4, save_steps=1)
CLI_RUN = [
    "--dataset",
    "synthetic",
    "--reward",
    "length",
    "--method",
    "lora",
    "--max-steps",
    "4",
    "--set",
    "num_generations=4",
    "--set",
    "per_device_train_batch_size=4",
    "--set",
    "max_completion_length=16",
    "--set",
    "gradient_accumulation_steps=1",
    "--set",
    "learning_rate=0.01",
    "--set",
    "save_steps=1",
]


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="the faults are injected in a forked child (POSIX)")


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread: a forked child cannot use the parent's OpenMP pool, and the tiny model gains nothing."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _spawn(body) -> tuple[int, object]:
    """Start ``body()`` in a forked child; its output goes to a temporary file. Returns (pid, file)."""
    out = tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 99
        try:
            stream = io.TextIOWrapper(os.fdopen(os.dup(out.fileno()), "wb"), line_buffering=True)
            sys.stdout = sys.stderr = stream
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            code = int(body() or 0)
        except SystemExit as exc:
            code = int(exc.code or 0)
        except BaseException:  # noqa: BLE001 - shown to the parent
            traceback.print_exc()
            code = 98
        finally:
            sys.stdout.flush()
            os._exit(code)
    return pid, out


def _reap(pid: int, out, timeout: float = 120) -> tuple[int, str]:
    """Wait for the child; return its exit code (minus the signal that killed it) and its output."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the child ran past {timeout} s")
        time.sleep(0.05)
    out.seek(0)
    return os.waitstatus_to_exitcode(status), out.read().decode(errors="replace")


def _in_child(body, timeout: float = 120) -> tuple[int, str]:
    """Run ``body()`` in a forked child and wait for it."""
    return _reap(*_spawn(body), timeout=timeout)


def _break_save(step: int, where: str, action: str) -> None:
    """In this process only: make the save of ``checkpoint-<step>`` meet ``action`` at ``where``."""
    from transformers import Trainer
    from transformers.trainer_callback import TrainerState

    from grpo_lite.training.run import checkpoints

    def fault() -> None:
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif action == "sigint":  # the second Ctrl-C: the first came during the step
            os.kill(os.getpid(), signal.SIGINT)
        elif action == "sigterm":  # the second SIGTERM: the first came during the step
            os.kill(os.getpid(), signal.SIGTERM)
        elif action == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def ours(path: str) -> bool:
        return Path(path).name == f"checkpoint-{step}"

    if where == "empty":
        original_model = Trainer.save_model

        def save_model(self, output_dir=None, _internal_call=False):
            if output_dir and ours(output_dir):
                os.makedirs(output_dir, exist_ok=True)
                fault()
            return original_model(self, output_dir, _internal_call)

        Trainer.save_model = save_model
    else:  # where -> what to wrap, and the checkpoint folder it writes, read from the call's arguments
        owner, name, folder_of = {
            "optimizer": (Trainer, "_save_optimizer_and_scheduler", lambda self, output_dir: output_dir),
            "state": (TrainerState, "save_to_json", lambda self, json_path: os.path.dirname(json_path)),
            "marker": (checkpoints, "mark_complete", lambda folder, run: folder),
        }[where]
        original = getattr(owner, name)

        def wrapper(*args):
            if ours(str(folder_of(*args))):
                fault()
            return original(*args)

        setattr(owner, name, wrapper)


def _record(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())


def _resume_and_check(tiny_model_dir, out: Path, *, from_step: int) -> dict:
    """Resume to 4 steps; every completed step is in run.json exactly once."""
    result = train(str(tiny_model_dir), output_dir=out, resume=True, **RUN)
    record = _record(out)
    assert result.steps == 4 and record["status"] == "finished"
    assert [r["step"] for r in record["history"]] == [1, 2, 3, 4]
    resumes = [e for e in record["events"] if e["event"] == "resume"]
    assert resumes[-1]["checkpoint"].endswith(f"checkpoint-{from_step}") and resumes[-1]["step"] == from_step
    assert (out / "final").is_dir() and oct((out / "run.json").stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    return record


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@needs_fork
@pytest.mark.parametrize(("where", "resumes_from"), [("empty", 2), ("state", 2), ("marker", 3)])
def test_sigkill_during_a_save_then_resume(tiny_model_dir, tmp_path, where, resumes_from):
    out = tmp_path / "run"

    def body():
        _break_save(3, where, "kill")
        train(str(tiny_model_dir), output_dir=out, **RUN)

    code, output = _in_child(body)
    assert code == -signal.SIGKILL, output[-2000:]
    assert [json.loads(line)["step"] for line in (out / "history.jsonl").read_text().splitlines()] == [1, 2, 3]
    assert _record(out)["status"] == "running"  # what a killed process leaves; the resume says "crashed"
    record = _resume_and_check(tiny_model_dir, out, from_step=resumes_from)
    crashed = [e for e in record["events"] if e["event"] == "crashed"]
    assert crashed == [{"event": "crashed", "after_step": 3}]
    notes = " ".join(record["events"][-1].get("notes", []))
    assert "lock of an earlier run" in notes and "process is gone" in notes
    if resumes_from == 2:
        assert (out / "incomplete" / "checkpoint-3").is_dir() and "checkpoint-3 is incomplete" in notes
    else:
        assert not (out / "incomplete").exists()


@needs_fork
def test_second_ctrl_c_during_a_save_then_resume(tiny_model_dir, tmp_path):
    out = tmp_path / "run"

    def body():
        _break_save(3, "optimizer", "sigint")
        from grpo_lite.training import pipeline

        original = pipeline.train  # the CLI calls train(); add the first Ctrl-C during step 3
        pipeline.train = lambda *a, **k: original(*a, **k, callbacks=[signal_during_step(3)])
        return main(["train", str(tiny_model_dir), *CLI_RUN, "--output-dir", str(out)])

    code, output = _in_child(body)
    assert code == 130, output[-2000:]
    assert "Traceback" not in output and output.strip().splitlines()[-1].startswith(
        "interrupted: stopped without saving"
    )
    record = _record(out)
    assert record["status"] == "aborted" and record["events"][-1] == {"event": "aborted", "after_step": 3}
    _resume_and_check(tiny_model_dir, out, from_step=2)


@needs_fork
def test_full_disk_during_a_save_is_one_line_then_resume(tiny_model_dir, tmp_path):
    out = tmp_path / "run"

    def body():
        _break_save(3, "optimizer", "enospc")  # a simulated ENOSPC: the weights are written, the optimizer is not
        return main(["train", str(tiny_model_dir), *CLI_RUN, "--output-dir", str(out)])

    code, output = _in_child(body)
    assert code == 2, output[-2000:]
    last = output.strip().splitlines()[-1]
    assert "Traceback" not in output and last.startswith(f"error: the disk holding {out} ran out of space"), last
    assert "checkpoint-2 is complete" in last and "--resume" in last
    record = _record(out)
    assert record["status"] == "failed" and "No space left on device" in record["events"][-1]["error"]
    _resume_and_check(tiny_model_dir, out, from_step=2)


def _can_mount_tmpfs() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=1m none /tmp"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


FILLER = """
import os, sys
from transformers import TrainerCallback
from grpo_lite.training import pipeline

class Fill(TrainerCallback):  # after step 2's checkpoint, leave the disk almost full
    def on_save(self, args, state, control, **kwargs):
        if state.global_step == 2:
            free = os.statvfs(args.output_dir).f_bavail * os.statvfs(args.output_dir).f_frsize
            with open(os.path.join(os.path.dirname(args.output_dir), "filler"), "wb") as f:
                f.write(b"x" * max(0, free - 100_000))

original = pipeline.train
pipeline.train = lambda *a, **k: original(*a, **k, callbacks=[Fill()])
from grpo_lite.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs Linux user namespaces to mount a small tmpfs")
def test_full_disk_on_a_real_tmpfs_then_resume(tiny_model_dir, tmp_path):
    """A real full disk (a write error with or without an errno: the free space left tells), and a real
    read-only folder."""
    mount = tmp_path / "disk"
    mount.mkdir()
    keep = tmp_path / "kept"
    script = tmp_path / "fill.py"
    script.write_text(FILLER)
    train_cmd = f"{sys.executable} {script} train {tiny_model_dir} {' '.join(CLI_RUN)} --output-dir {mount}/run"
    read_only = tmp_path / "ro"
    read_only.mkdir()
    shell = (
        f"mount -t tmpfs -o size=24m none {mount} && {{ {train_cmd} > {tmp_path}/first.log 2>&1; "
        f"echo $? > {tmp_path}/first.rc; rm -f {mount}/filler; {train_cmd} --resume > {tmp_path}/second.log 2>&1; "
        f"echo $? > {tmp_path}/second.rc; cp -r {mount}/run {keep}; }} && "
        f"mount -t tmpfs -o size=1m,ro none {read_only} && {{ {sys.executable} -m grpo_lite train {tiny_model_dir} "
        f"{' '.join(CLI_RUN)} --output-dir {read_only}/run > {tmp_path}/ro.log 2>&1; echo $? > {tmp_path}/ro.rc; }}"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run(["unshare", "-Urm", "sh", "-c", shell], env=env, timeout=300, check=True)
    first = (tmp_path / "first.log").read_text()
    assert (tmp_path / "first.rc").read_text().strip() == "2", first[-3000:]
    assert "Traceback" not in first and "ran out of space" in first.strip().splitlines()[-1]
    assert (tmp_path / "second.rc").read_text().strip() == "0", (tmp_path / "second.log").read_text()[-3000:]
    record = json.loads((keep / "run.json").read_text())
    assert [r["step"] for r in record["history"]] == [1, 2, 3, 4] and record["status"] == "finished"
    assert [e["event"] for e in record["events"]] == ["failed", "resume"]
    ro = (tmp_path / "ro.log").read_text().strip().splitlines()  # a real read-only folder, too
    assert (
        (tmp_path / "ro.rc").read_text().strip() == "2"
        and ro[-1].startswith("error: cannot create the output folder")
        and "Read-only" in ro[-1]
    ), ro[-5:]


@needs_fork
def test_a_second_run_into_a_live_runs_folder_is_refused(tiny_model_dir, tmp_path, capsys):
    from transformers import TrainerCallback

    out, ready, go = tmp_path / "run", tmp_path / "ready", tmp_path / "go"

    class Hold(TrainerCallback):  # the first run waits, lock held, until the parent has tried its own
        def on_train_begin(self, args, state, control, **kwargs):
            ready.touch()
            deadline = time.monotonic() + 60
            while not go.exists() and time.monotonic() < deadline:
                time.sleep(0.05)

    def body():
        return (
            0
            if train(str(tiny_model_dir), output_dir=out, callbacks=[Hold()], **{**RUN, "max_steps": 2}).steps == 2
            else 3
        )

    child, output_file = _spawn(body)
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists(), "the first run did not start"
    holder = json.loads((out / ".grpo-lite.lock").read_text())["pid"]
    assert holder == child
    with pytest.raises(OutputDirError, match=rf"another grpo-lite run \(PID {holder}\b.*pass another output_dir"):
        train(str(tiny_model_dir), output_dir=out, **RUN)
    capsys.readouterr()
    assert main(["train", str(tiny_model_dir), *CLI_RUN, "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"PID {holder}" in err[0], err
    go.touch()
    code, output = _reap(child, output_file)
    assert code == 0, output[-2000:]
    assert _record(out)["status"] == "finished" and not (out / ".grpo-lite.lock").exists()


@pytest.fixture(scope="module")
def finished_run(tiny_model_dir, tmp_path_factory) -> Path:
    """A finished 3-step run (checkpoints 2 and 3): each test below works on its own copy."""
    out = tmp_path_factory.mktemp("finished") / "run"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(str(tiny_model_dir), output_dir=out, **{**RUN, "max_steps": 3})
    finally:
        torch.set_num_threads(before)
    return out


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def test_truncated_run_json_on_resume_is_rebuilt(tiny_model_dir, finished_run, tmp_path):
    out = _copy(finished_run, tmp_path / "run")
    text = (out / "run.json").read_text()
    (out / "run.json").write_text(text[: len(text) // 3])
    record = _resume_and_check(tiny_model_dir, out, from_step=3)
    assert (out / "run.json.corrupt").read_text() == text[: len(text) // 3]
    assert "run.json could not be read" in " ".join(record["events"][-1]["notes"])


def test_deleted_trainer_state_on_resume_falls_back_or_says_so(tiny_model_dir, finished_run, tmp_path, capsys):
    alone = _copy(finished_run, tmp_path / "alone")  # the only checkpoint: nothing to fall back to
    shutil.rmtree(alone / "checkpoint-2")
    (alone / "checkpoint-3" / "trainer_state.json").unlink()
    capsys.readouterr()
    assert main(["train", str(tiny_model_dir), *CLI_RUN, "--output-dir", str(alone), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no complete checkpoint (checkpoint-3: trainer_state.json is missing" in err[0], err
    assert "--overwrite" in err[0]

    out = _copy(finished_run, tmp_path / "run")
    (out / "checkpoint-3" / "trainer_state.json").unlink()
    record = _resume_and_check(tiny_model_dir, out, from_step=2)
    assert "checkpoint-3 is incomplete (trainer_state.json is missing)" in " ".join(record["events"][-1]["notes"])


def test_a_final_save_cut_by_a_full_disk_leaves_no_partial_folder(tiny_model_dir, tmp_path, monkeypatch):
    """The final save's temporary folder is removed when the save fails: a partial model is not left in the run
    folder, and its room goes back to the disk (before, .final.tmp stayed and run.json could stay 'running')."""
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    save_model = LiteGRPOTrainer.save_model

    def full_disk(self, output_dir=None, *args, **kwargs):
        if output_dir is not None and Path(output_dir).name == ".final.tmp":
            Path(output_dir).mkdir(parents=True, exist_ok=True)
            (Path(output_dir) / "model.safetensors").write_bytes(
                b"\0" * 1000
            )  # the part written before the disk filled
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return save_model(self, output_dir, *args, **kwargs)

    monkeypatch.setattr(LiteGRPOTrainer, "save_model", full_disk)
    out = tmp_path / "run"
    with pytest.raises(OutputDirError, match="ran out of space"):
        train(str(tiny_model_dir), output_dir=out, **dict(RUN, max_steps=1, save_steps=10))
    assert not os.path.lexists(out / ".final.tmp") and not (out / "final").exists()
    assert _record(out)["status"] == "failed"
    assert not (out / ".grpo-lite.lock").exists()


def test_a_failed_resume_logs_no_resume_event(tiny_model_dir, finished_run, tmp_path, monkeypatch):
    from transformers import Trainer

    out = _copy(finished_run, tmp_path / "run")

    def broken(self, *args, **kwargs):
        raise RuntimeError("cannot read the checkpoint (injected)")

    monkeypatch.setattr(Trainer, "_load_from_checkpoint", broken)
    with pytest.raises(RuntimeError, match="injected"):
        train(str(tiny_model_dir), output_dir=out, resume=True, **RUN)
    record = _record(out)
    assert [e["event"] for e in record["events"]] == ["failed"] and record["status"] == "failed"
    assert not (out / ".grpo-lite.lock").exists()


def test_a_write_error_without_errno_on_a_full_disk_is_recognised(tmp_path, monkeypatch):
    """torch's zip writer reports a full disk as a RuntimeError with no errno: the free space left decides."""
    import shutil as shutil_module

    from grpo_lite.training.run import folder

    usage = shutil_module._ntuple_diskusage
    torch_error = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 101312 vs 101204")
    monkeypatch.setattr(folder.shutil, "disk_usage", lambda path: usage(2**30, 2**30 - 4096, 4096))
    error = folder.disk_full_error(torch_error, tmp_path, 2**20, tmp_path / "checkpoint-2")
    assert isinstance(error, OutputDirError) and "ran out of space (0.0 MiB free now)" in str(error)
    assert "checkpoint-2 is complete; free at least 1.0 MiB" in str(error)
    assert folder.disk_full_error(KeyboardInterrupt(), tmp_path, 2**20, None) is None
    monkeypatch.setattr(folder.shutil, "disk_usage", lambda path: usage(2**40, 2**30, 2**40 - 2**30))
    assert folder.disk_full_error(torch_error, tmp_path, 2**20, None) is None  # plenty of room: another failure
    enospc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    before_any = str(folder.disk_full_error(enospc, tmp_path, 2**20, None))
    # --resume refuses a folder without a complete checkpoint: the advice is the start that works
    assert "no checkpoint is complete yet, so there is nothing to resume" in before_any
    assert "plus --overwrite (Python: overwrite=True)" in before_any and "--resume" not in before_any


def test_lock_check_leaves_a_stale_lock_for_the_run_to_report(tmp_path):
    from grpo_lite.training.run.lock import LOCK_NAME, RunLock

    (tmp_path / LOCK_NAME).write_text('{"pid": 999999999, "host": "here", "started": 0}')
    RunLock.check(tmp_path)  # nobody holds it: no error, and the record stays for the run to report
    lock = RunLock.acquire(tmp_path)
    assert lock.stale["pid"] == 999999999 and "PID 999999999" in lock.stale_note()
    with pytest.raises(OutputDirError, match=rf"PID {os.getpid()}\b"):
        RunLock.check(tmp_path)
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()
    RunLock.check(tmp_path)


def test_the_lock_names_its_holder_by_pid_host_and_start(tmp_path):
    """The record a run writes in its lock, and the lines made of it: a live holder's (the check's error), a dead
    one's (the note of a stale lock taken over), another host's, one without a start time, one not a record."""
    import socket

    from filelock import FileLock

    from grpo_lite.training.run.lock import LOCK_NAME, RunHeld, RunLock

    def local(when: float) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))

    before = time.time()
    lock = RunLock.acquire(tmp_path)
    record = json.loads((tmp_path / LOCK_NAME).read_text())
    assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
    assert before <= record["started"] <= time.time() and lock.stale is None and lock.stale_note() is None
    with pytest.raises(RunHeld) as held:
        RunLock.check(tmp_path)
    assert str(held.value) == (
        f"another grpo-lite run (PID {os.getpid()}, started {local(record['started'])}) is writing to {tmp_path}; "
        "wait for it to finish or stop it, or pass another output_dir (--output-dir)"
    )
    lock.release()
    lock.release()  # a second release is nothing
    assert not (tmp_path / LOCK_NAME).exists()

    here = socket.gethostname()
    stale = {
        '{"pid": 41, "host": "elsewhere", "started": 0}': f"PID 41 on elsewhere, started {local(0)}",
        f'{{"pid": 42, "host": "{here}", "started": 86400.5}}': f"PID 42, started {local(86400.5)}",
        '{"pid": 43, "started": "noon"}': "PID 43",
    }
    for text, holder in stale.items():
        (tmp_path / LOCK_NAME).write_text(text)
        lock = RunLock.acquire(tmp_path)
        assert lock.stale == json.loads(text)
        assert lock.stale_note() == (
            f"the lock of an earlier run ({holder}) was left behind: that process is gone; taken over"
        )
        lock.release()
    for text in ["[1, 2]", "", f'{{"pid": {os.getpid()}}}']:  # not a record, none, this process's own
        (tmp_path / LOCK_NAME).write_text(text)
        lock = RunLock.acquire(tmp_path)
        assert lock.stale is None and lock.stale_note() is None
        lock.release()
    (tmp_path / LOCK_NAME).write_bytes(b"\xff" + b"x" * 200)  # not text: its first 80 bytes kept, readable
    lock = RunLock.acquire(tmp_path)
    assert lock.stale == {"pid": None, "raw": "\ufffd" + "x" * 79}
    lock.release()

    (tmp_path / LOCK_NAME).write_text("")  # held, its record not written yet
    other = FileLock(tmp_path / LOCK_NAME, timeout=0, thread_local=False)
    other.acquire()
    try:
        with pytest.raises(RunHeld, match=r"^another grpo-lite run \(another process\) is writing to "):
            RunLock.check(tmp_path)
    finally:
        other.release()


def test_the_lock_is_given_back_from_any_thread_and_without_its_file(tmp_path):
    """One lock a process (``thread_local=False``): another thread gives it back; a lock file removed under the
    run (a user's ``rm``) is no error when the run ends, and the lock is given back all the same."""
    import threading

    from grpo_lite.training.run.lock import LOCK_NAME, RunLock

    lock = RunLock.acquire(tmp_path)
    held = lock.lock
    other = threading.Thread(target=lock.release)
    other.start()
    other.join()
    assert not held.is_locked  # given back, not only for the thread that gave it (its descriptor closed)
    RunLock.check(tmp_path)  # nothing holds the folder
    lock = RunLock.acquire(tmp_path)
    (tmp_path / LOCK_NAME).unlink()
    lock.release()
    assert lock.lock is None and not (tmp_path / LOCK_NAME).exists()
    RunLock.acquire(tmp_path).release()


@pytest.mark.parametrize("code", [errno.ELOOP, errno.EMLINK], ids=["ELOOP", "EMLINK"])  # O_NOFOLLOW: Linux, FreeBSD
def test_a_link_at_the_lock_path_is_refused_in_one_line(tmp_path, monkeypatch, code):
    from grpo_lite.training.run import lock as run_lock

    target = tmp_path / "precious.txt"
    target.write_text("not a lock")
    (tmp_path / run_lock.LOCK_NAME).symlink_to(target)
    if code != errno.ELOOP:

        class Refuses:  # what filelock raises where O_NOFOLLOW fails with another errno
            def __init__(self, path, **options):
                pass

            def acquire(self):
                raise OSError(code, os.strerror(code))

        monkeypatch.setattr(run_lock, "FileLock", Refuses)
    for take in (run_lock.RunLock.acquire, run_lock.RunLock.check):
        with pytest.raises(OutputDirError) as refused:
            take(tmp_path)
        assert str(refused.value) == (
            f"{tmp_path / run_lock.LOCK_NAME} is a symbolic link; a run's lock is never followed out of its folder: "
            "remove the link, or pass another output_dir (--output-dir)"
        )
    assert target.read_text() == "not a lock"


def test_the_lock_holder_is_never_read_through_a_link(tmp_path):
    from grpo_lite.training.run.lock import _holder

    target = tmp_path / "elsewhere.json"
    target.write_text('{"pid": 7}')
    (tmp_path / "link").symlink_to(target)
    assert _holder(target) == {"pid": 7} and _holder(tmp_path / "link") is None
    assert _holder(tmp_path / "missing") is None


def test_a_folder_without_file_locks_is_said_so_by_the_check_as_by_the_run(tmp_path, monkeypatch):
    """flock missing (some network filesystems): the check and the run say so in the same line, and the check
    keeps a dead run's lock for the run to report (filelock's soft lock, which the check must not fall back to,
    would call that record a live run, and remove it on release)."""
    import fcntl

    from grpo_lite.training.run.lock import LOCK_NAME, RunLock

    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(fcntl, "flock", no_flock)
    (tmp_path / LOCK_NAME).write_text('{"pid": 999999999}')
    for take in (RunLock.check, RunLock.acquire):
        with pytest.raises(OutputDirError) as refused:
            take(tmp_path)
        assert str(refused.value) == (
            f"the filesystem holding {tmp_path} has no file locks (flock); pass an output_dir on a local disk "
            "(--output-dir)"
        )
    assert (tmp_path / LOCK_NAME).read_text() == '{"pid": 999999999}'


def test_resume_never_moves_or_deletes_through_a_linked_incomplete_folder(tiny_model_dir, finished_run, tmp_path):
    """``incomplete/`` a link to another folder, the newest checkpoint cut off: the resume is refused in one line
    naming the link; the checkpoint stays in the run folder and nothing in the link's target is touched."""
    out, elsewhere = _copy(finished_run, tmp_path / "run"), tmp_path / "elsewhere"
    (elsewhere / "checkpoint-3").mkdir(parents=True)
    (elsewhere / "checkpoint-3" / "precious.txt").write_text("kept")
    (out / "incomplete").symlink_to(elsewhere, target_is_directory=True)
    (out / "checkpoint-3" / "trainer_state.json").unlink()
    with pytest.raises(OutputDirError, match=r"incomplete is a symbolic link \(to .*elsewhere\).*remove the link"):
        train(str(tiny_model_dir), output_dir=out, resume=True, **RUN)
    assert (elsewhere / "checkpoint-3" / "precious.txt").read_text() == "kept"
    assert sorted(p.name for p in elsewhere.rglob("*")) == ["checkpoint-3", "precious.txt"]
    assert (out / "checkpoint-3").is_dir() and not (out / ".grpo-lite.lock").exists()


@pytest.mark.parametrize("name", ["README.md", "ranks"])
def test_a_link_where_the_run_writes_is_refused_and_its_target_kept(tiny_model_dir, tmp_path, name):
    """TRL's model card (README.md) and the rank records (ranks/) would be written through a link."""
    out, target = tmp_path / "run", tmp_path / "precious"
    out.mkdir()
    if name == "ranks":
        target.mkdir()
    else:
        target.write_text("mine")
    (out / name).symlink_to(target)
    with pytest.raises(OutputDirError, match=rf"{name} is a symbolic link.*rm "):
        train(str(tiny_model_dir), output_dir=out, **{**RUN, "max_steps": 1})
    assert list(target.iterdir()) == [] if name == "ranks" else target.read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == [name]  # nothing written, the lock gone


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"plan": []}, "plan is [], not an object"),
        ({"events": [1]}, "events[0] is 1, not an object with an event name"),
        ({"history": [{"reward": 0.5}]}, "history[0] has no step"),
        ({"history": [{"step": "3"}]}, 'history[0].step is "3", not a whole number'),
    ],
)
def test_a_run_json_of_the_wrong_shape_on_resume_is_kept_and_rebuilt(
    tiny_model_dir, finished_run, tmp_path, change, why
):
    """Valid JSON that is not a run record: kept as run.json.corrupt, the record rebuilt, no traceback."""
    out = _copy(finished_run, tmp_path / "run")
    wrong = {**_record(out), **change}
    (out / "run.json").write_text(json.dumps(wrong))
    record = _resume_and_check(tiny_model_dir, out, from_step=3)
    assert json.loads((out / "run.json.corrupt").read_text()) == wrong
    assert f"run.json could not be read ({why}): kept as run.json.corrupt" in " ".join(record["events"][-1]["notes"])
    assert not (out / ".grpo-lite.lock").exists()


def test_an_unexpected_error_while_the_folder_is_opened_leaves_no_lock(
    tiny_model_dir, finished_run, tmp_path, monkeypatch
):
    from grpo_lite.training.run import resume

    out = _copy(finished_run, tmp_path / "run")
    monkeypatch.setattr(resume, "earlier_run", lambda *a, **k: 1 / 0)  # a bug in the resume's own code
    with pytest.raises(ZeroDivisionError):
        train(str(tiny_model_dir), output_dir=out, resume=True, **RUN)
    assert not (out / ".grpo-lite.lock").exists()
