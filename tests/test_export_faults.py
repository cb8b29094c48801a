"""The export under faults: a run still training, a read-only folder, a full disk at the Modelfile, a cut-off
run.json, a temporary left by a killed export, ``overwrite`` over an exported run, Ctrl-C in the commands.

Each fault is injected at the filesystem's edge (``open``, ``os.unlink``...) so that it hits whatever
code writes the file; the checks are the one-line error, the files left, and the lock.
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gguf")

from grpo_lite.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def run_dir(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """A finished run folder: run.json (a prompt style with a system prompt) and final/."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copytree(tiny_model_dir, run / "final")
    record = {
        "model": str(tiny_model_dir),
        "stop_strings": ["</answer>"],
        "prompt_style": {"system_prompt": "Answer.", "one_shot": False, "prefill": "", "examples": []},
    }
    (run / "run.json").write_text(json.dumps(record))
    return run


def _export(run: Path, capsys: pytest.CaptureFixture, *extra: str) -> tuple[int, str]:
    """The exit code and the last line on stderr (transformers' loading bar comes before)."""
    code = main(["export", str(run), "--gguf", "--quant", "f16", *extra])
    err = capsys.readouterr().err.strip().splitlines()
    return code, err[-1] if err else ""


def _failing_open(monkeypatch: pytest.MonkeyPatch, fails: callable) -> None:  # type: ignore[valid-type]
    """Make ``open`` (builtins and io: every Python file write) raise ``fails(path)`` when it returns an error."""
    real = builtins.open

    def fake(file, mode="r", *args, **kwargs):  # noqa: ANN001, ANN202
        error = (
            fails(Path(os.fsdecode(file))) if isinstance(file, (str, os.PathLike)) and set(mode) & set("wxa") else None
        )
        if error is not None:
            raise error
        return real(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake)
    monkeypatch.setattr(io, "open", fake)


def _read_only(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """``folder`` as on a read-only filesystem (the tests run as root, where chmod does not stop writes)."""

    def rofs(path: Path) -> OSError | None:
        return OSError(errno.EROFS, "Read-only file system", str(path)) if folder in path.parents else None

    _failing_open(monkeypatch, rofs)
    real_os_open, real_unlink = os.open, os.unlink

    def fake_os_open(path, flags, *args, **kwargs):  # noqa: ANN001, ANN202
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and (error := rofs(Path(os.fsdecode(path)))):
            raise error
        return real_os_open(path, flags, *args, **kwargs)

    def fake_unlink(path, *args, **kwargs):  # noqa: ANN001, ANN202 - EROFS even for a missing file, as Linux does
        if error := rofs(Path(os.fsdecode(path))):
            raise error
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_os_open)
    monkeypatch.setattr(os, "unlink", fake_unlink)


def test_a_run_still_training_is_refused_and_nothing_is_written(run_dir, capsys):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from grpo_lite.training.run.lock import "
            "RunLock; lock = RunLock.acquire(Path(sys.argv[1])); print('held', flush=True); time.sleep(60)",
            str(run_dir),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        code, err = _export(run_dir, capsys)
    finally:
        holder.kill()
        holder.wait()
    assert code == 2
    assert err.startswith(f"error: cannot export {run_dir} now: another grpo-lite run (PID {holder.pid}")
    assert err.endswith("wait for the run to finish (or stop it), then export again")
    assert not (run_dir / "final.gguf").exists() and not (run_dir / "final.Modelfile").exists()


def test_the_export_holds_the_run_lock_and_gives_it_back(run_dir, capsys, monkeypatch):
    from grpo_lite.export import gguf_file
    from grpo_lite.training.run.lock import RunLock

    seen = []
    real = gguf_file.write_gguf

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - while it writes, a run cannot start there
        seen.append(_locked(run_dir))
        return real(*args, **kwargs)

    monkeypatch.setattr(gguf_file, "write_gguf", spy)
    assert _export(run_dir, capsys)[0] == 0 and seen == [True]
    RunLock.check(run_dir)  # given back: nothing holds the folder now
    assert not (run_dir / ".grpo-lite.lock").exists() and not _locked(run_dir)


def _locked(run: Path) -> bool:
    """Whether another process could not take the lock of ``run`` now (a child process tries)."""
    probe = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from grpo_lite.training.run.lock import RunLock\n"
            "try: RunLock.check(Path(sys.argv[1]))\nexcept OSError: sys.exit(3)",
            str(run),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return probe.wait() == 3


def test_a_read_only_folder_is_one_line_that_says_so(run_dir, capsys, monkeypatch):
    _read_only(monkeypatch, run_dir)
    code, err = _export(run_dir, capsys)
    assert code == 2, err
    assert err == (
        f"error: cannot write {run_dir / 'final.gguf'}: the folder is read-only; nothing was written there (an "
        "older file is kept whole); pass a path in another folder: grpo-lite export ... --output PATH"
    )
    monkeypatch.undo()
    out = run_dir.parent / "elsewhere"
    out.mkdir()
    _read_only(monkeypatch, run_dir)
    assert _export(run_dir, capsys, "--output", str(out / "m.gguf"))[0] == 0  # the advice works as written
    assert (out / "m.gguf").stat().st_size > 0 and (out / "m.Modelfile").is_file()


def _exported(run: Path) -> dict[str, bytes]:
    """The export's three files in ``run`` and their bytes, and no temporary beside them."""
    assert not [p.name for p in run.iterdir() if ".tmp" in p.name]
    return {p.name: p.read_bytes() for p in sorted(run.glob("final.*"))}


@pytest.mark.parametrize("fault", ["cut off in silence", "cut off, disk full", "short write", "ENOSPC"])
def test_a_gguf_cut_off_on_a_full_disk_is_never_called_written(run_dir, capsys, monkeypatch, fault):
    """A nearly full disk under an earlier export: the new GGUF is cut off (in silence, as numpy's tofile can do,
    or with numpy's errno-less "N requested and M written", or ENOSPC). Exit 2, one line that says the disk is full
    (or that the file is not whole), and the earlier three files whole: no new file is called written."""
    import gguf

    assert _export(run_dir, capsys, "--quant", "q8_0")[0] == 0  # the earlier export (q8_0: other bytes than f16)
    before = _exported(run_dir)
    assert sorted(before) == ["final.Modelfile", "final.gguf", "final.system_prompt.txt"]
    (run_dir / "run.json").write_text(
        json.dumps({**json.loads((run_dir / "run.json").read_text()), "stop_strings": []})
    )
    real, written = gguf.GGUFWriter.write_tensors_to_file, []

    def cut_off(self, *args, **kwargs):  # noqa: ANN001, ANN202
        real(self, *args, **kwargs)
        for fout in self.fout:
            fout.flush()
            written.append(os.fstat(fout.fileno()).st_size)  # the whole file, as gguf writes it
            os.truncate(fout.name, written[-1] - 416)  # 416 bytes lost, as on the 2 MB tmpfs
        if fault == "short write":
            raise OSError("4352 requested and 0 written")
        if fault == "ENOSPC":
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", cut_off)
    if fault != "cut off in silence":  # the disk full while the cut-off temporary is there: none left free
        monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(2 << 20, 2 << 20, 0))
    code, err = _export(run_dir, capsys)
    assert code == 2 and err.startswith(f"error: cannot write {run_dir / 'final.gguf'}: "), err
    if fault == "cut off in silence":
        assert "the file written is not whole" in err and "nothing was kept" in err, err
    else:  # in the disk's blocks: free once the temporary is removed, what it held; needed: the whole file and a
        # block each for the Modelfile and the system prompt; to free: the difference (KB rounded up)
        block = os.statvfs(run_dir).f_frsize
        held, need = -(-(written[0] - 416) // block) * block, (-(-written[0] // block) + 2) * block
        free, more = f"{held / 1e3:.0f} KB free", f"free at least {-(-(need - held) // 1000)} KB"
        assert f"is full ({free}, the export needs {-(-need // 1000)} KB): {more} or export elsewhere" in err, err
        assert "export elsewhere with -o PATH" in err and "requested" not in err, err
    assert _exported(run_dir) == before  # the earlier export whole: its GGUF, Modelfile and system prompt


def test_a_full_disk_at_the_modelfile_leaves_no_empty_file(run_dir, capsys, monkeypatch):
    assert _export(run_dir, capsys)[0] == 0
    (run_dir / "final.Modelfile").write_text("FROM ./an-earlier-export.gguf\n")
    gguf_before = (run_dir / "final.gguf").read_bytes()
    (run_dir / "run.json").write_text(
        json.dumps({**json.loads((run_dir / "run.json").read_text()), "stop_strings": []})
    )

    class FullDisk(io.StringIO):  # the file is created, then the first write finds the disk full
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    real = builtins.open

    def fake(file, mode="r", *args, **kwargs):  # noqa: ANN001, ANN202
        handle = real(file, mode, *args, **kwargs)
        if (
            isinstance(file, (str, os.PathLike))
            and ".Modelfile" in os.fsdecode(file)
            and "b" not in mode
            and set(mode) & set("wx")
        ):
            monkeypatch.setattr(handle, "write", FullDisk().write)
        return handle

    monkeypatch.setattr(builtins, "open", fake)
    monkeypatch.setattr(io, "open", fake)
    code, err = _export(run_dir, capsys)
    assert code == 2
    assert err.startswith(f"error: cannot write {run_dir / 'final.Modelfile'}: the disk holding {run_dir} is full")
    assert "nothing was written there" in err and "export elsewhere with -o PATH" in err, err
    assert (run_dir / "final.Modelfile").read_text() == "FROM ./an-earlier-export.gguf\n"  # whole, not emptied
    assert (run_dir / "final.gguf").read_bytes() == gguf_before  # the new GGUF is not renamed without its Modelfile
    assert not [p.name for p in run_dir.iterdir() if ".tmp" in p.name]


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"model": "x", "prompt_st', "Unterminated string"),
        ("[1, 2]", "not a JSON object"),
        ('{"stop_strings": "</answer>"}', 'stop_strings is "</answer>", not a list'),  # valid JSON, the wrong shape
        ('{"prompt_style": {"system_prompt": 1}}', "prompt_style.system_prompt is not a prompt style's field"),
    ],
)
def test_a_broken_run_json_is_one_line(run_dir, capsys, text, why):
    (run_dir / "run.json").write_text(text)
    code, err = _export(run_dir, capsys)
    assert code == 2
    assert err.startswith(f"error: cannot export the run {run_dir}: its run.json is broken ({why}")
    assert err.endswith(
        f"mv {run_dir / 'run.json'} {run_dir / 'run.json.corrupt'} && grpo-lite export {run_dir / 'final'} --gguf"
    )
    assert not (run_dir / "final.gguf").exists()
    (run_dir / "run.json").rename(run_dir / "run.json.corrupt")  # the advice, as written
    assert main(["export", str(run_dir / "final"), "--gguf", "--quant", "f16"]) == 0
    assert (run_dir / "final.gguf").stat().st_size > 0 and "Respond in the following format" in (
        run_dir / "final.Modelfile"
    ).read_text()


def test_a_temporary_left_by_a_killed_export_is_removed_by_the_next(run_dir, capsys):
    script = (
        "import os, sys; from grpo_lite.files import atomic_write\n"
        "with atomic_write(sys.argv[1], 'wb') as f:\n"
        "    f.write(b'GGUF half'); f.flush(); os.kill(os.getpid(), 9)"
    )
    killed = subprocess.run(
        [sys.executable, "-c", script, str(run_dir / "final.gguf")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert killed.returncode == -9
    left = [p for p in run_dir.iterdir() if p.name.startswith(".final.gguf.tmp-")]
    assert len(left) == 1 and left[0].read_bytes() == b"GGUF half"
    alive = run_dir / f".final.gguf.tmp-{os.getpid()}-abc123"  # a live process's: it may still be writing
    alive.write_bytes(b"in progress")
    assert _export(run_dir, capsys)[0] == 0
    assert not left[0].exists() and alive.read_bytes() == b"in progress"


def test_overwrite_removes_the_old_runs_exports(run_dir, capsys):
    from grpo_lite.training.run.folder import guard_output_dir

    assert _export(run_dir, capsys)[0] == 0
    (run_dir / "notes.txt").write_text("mine")
    (run_dir / "other.gguf").write_bytes(b"an export the user named")
    guard_output_dir(run_dir, resume=False, overwrite=True)
    assert sorted(p.name for p in run_dir.iterdir()) == ["notes.txt", "other.gguf"]


@pytest.mark.parametrize(
    "command, target, expected",
    [
        (["export", "RUN", "--gguf"], "grpo_lite.export.runtimes.export_for_runtimes", "nothing was exported"),
        (["eval", "RUN"], "grpo_lite.evaluation.evaluate", "the evaluation stopped before its result"),
        (["demo", "--steps", "1"], "grpo_lite.demo.run_demo", "the demo stopped; run the same command again"),
    ],
)
def test_ctrl_c_says_what_to_run_again(command, target, expected, monkeypatch, capsys):
    module, name = target.rsplit(".", 1)

    def interrupted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(__import__(module, fromlist=[name]), name, interrupted)
    assert main(command) == 130
    err = capsys.readouterr().err
    assert f"interrupted: {expected}" in err and "--resume" not in err


def test_atomic_write_keeps_the_old_file_whole_and_leaves_no_temporary_on_an_error(tmp_path):
    from grpo_lite.files import atomic_write, write_json

    target = write_json(tmp_path / "sub" / "run.json", {"status": "finished"})
    with pytest.raises(RuntimeError, match="cut off"), atomic_write(target) as f:
        f.write('{"status": "runn')
        raise RuntimeError("cut off")
    assert json.loads(target.read_text()) == {"status": "finished"} and os.listdir(target.parent) == ["run.json"]
    with pytest.raises(ValueError, match="choose 'w' \\(text\\) or 'wb' \\(bytes\\)"), atomic_write(target, "a"):  # type: ignore[arg-type]
        pass


def test_a_symlink_at_the_lock_path_is_said_so_not_wait_for_the_run(run_dir, tmp_path, capsys):
    target = tmp_path / "precious.txt"
    target.write_text("not a lock")
    (run_dir / ".grpo-lite.lock").symlink_to(target)
    code, err = _export(run_dir, capsys)
    assert code == 2 and "wait for the run" not in err, err
    assert err == (
        f"error: cannot export {run_dir}: {run_dir / '.grpo-lite.lock'} is a symbolic link; remove the link (a run "
        "makes its lock itself), then export again"
    )
    assert target.read_text() == "not a lock" and not (run_dir / "final.gguf").exists()


@pytest.mark.parametrize("command", ["export", "eval"])
def test_cut_off_weights_are_one_line_that_says_so(run_dir, capsys, command):
    """A model whose safetensors file is cut off (a copy or a save that did not finish) is one line naming the
    file, exit 2, not safetensors' traceback (exit 1); an export writes nothing."""
    weights = run_dir / "final" / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    if command == "export":
        code, err = _export(run_dir, capsys)
    else:
        code = main(["eval", str(run_dir / "final"), "--dataset", "synthetic", "--limit", "1", "--max-new-tokens", "2"])
        err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2, err
    assert err.startswith("error: cannot read the weights in ") and str(run_dir / "final") in err
    assert "cut off or damaged" in err
    assert not (run_dir / "final.gguf").exists()
