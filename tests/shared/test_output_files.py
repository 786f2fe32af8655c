"""D30: `--output FILE` writes through the output-file door (`core/shared/output_file.py`).

A regular file (or an absent path) is replaced atomically; a FIFO or character device is
written through in place and stays what it was; a directory, a socket, a symlink to a
regular file or to nothing is refused with one `error:` line naming the path, exit 1, and
nothing is written anywhere. All with real files, FIFOs, device nodes, sockets and ptys.
"""

from __future__ import annotations

import csv
import io
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sized_cache import sized_entry

from fvconsole.cli import main
from fvconsole.core.journal.log import JournalRecord, append_record

DAY = 86400.0
PROM = ["--format", "prometheus", "--output"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "wcache"
    sized_entry(root, "a", 1, DAY)
    return root


def _ls(root: Path, target: str | Path, capsys) -> tuple[int, str, str]:
    code = main(["cache", "ls", str(root), *PROM, str(target)])
    out, err = capsys.readouterr()
    return code, out, err


def _refused(code: int, out: str, err: str, path: Path, why: str) -> None:
    assert code == 1 and out == ""
    assert err.startswith(f"error: {path}: --output: {why}") and len(err.splitlines()) == 1, err


def _listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


class _Reader(threading.Thread):
    """Reads a FIFO to its end (the writer's close), like a `cat` or a collector would."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.data = b""

    def run(self) -> None:
        with open(self.path, "rb") as handle:
            self.data = handle.read()


def test_a_fifo_with_a_reader_is_written_through_and_stays_a_fifo(root: Path, tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "metrics.fifo"
    os.mkfifo(fifo)
    before = os.lstat(fifo)
    reader = _Reader(fifo)
    reader.start()
    code, out, err = _ls(root, fifo, capsys)
    reader.join(10)
    assert (code, out, err) == (0, "", "")
    assert b"fvconsole_cache_entries" in reader.data and reader.data.endswith(b"\n")
    after = os.lstat(fifo)
    assert stat.S_ISFIFO(after.st_mode) and after.st_ino == before.st_ino
    assert _listing(tmp_path) == ["metrics.fifo", "wcache"]  # no temp file beside it


def test_a_fifo_without_a_reader_is_refused_at_once(root: Path, tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "nobody.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    code, out, err = _ls(root, fifo, capsys)
    assert time.monotonic() - started < 10  # never a hang on open
    _refused(code, out, err, fifo, "is a FIFO with no reader")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and _listing(tmp_path) == ["nobody.fifo", "wcache"]


def test_a_character_device_node_is_written_through_not_replaced(root: Path, tmp_path: Path, capsys) -> None:
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a private node of the null device
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD")
    before = os.lstat(device)
    code, out, err = _ls(root, device, capsys)
    assert (code, out, err) == (0, "", "")
    after = os.lstat(device)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert _listing(tmp_path) == ["null", "wcache"]


def test_dev_null_keeps_its_inode(root: Path, capsys) -> None:
    before = os.lstat("/dev/null")
    code, out, err = _ls(root, "/dev/null", capsys)
    assert (code, out, err) == (0, "", "")
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_a_device_that_fails_the_write_is_one_error_line(root: Path, capsys) -> None:
    before = os.lstat("/dev/full")
    code, out, err = _ls(root, "/dev/full", capsys)
    _refused(code, out, err, Path("/dev/full"), "cannot write (No space left on device)")
    assert os.lstat("/dev/full").st_ino == before.st_ino


def test_a_pty_is_written_through(root: Path, capsys) -> None:
    master, slave = os.openpty()
    try:
        name = os.ttyname(slave)
        code, out, err = _ls(root, name, capsys)
        assert (code, out, err) == (0, "", "")
        os.set_blocking(master, False)
        seen = b""
        deadline = time.monotonic() + 5
        while b"fvconsole_cache_entries" not in seen and time.monotonic() < deadline:
            try:
                seen += os.read(master, 65536)
            except BlockingIOError:
                time.sleep(0.01)
        assert b"fvconsole_cache_entries" in seen
        assert stat.S_ISCHR(os.lstat(name).st_mode)
    finally:
        os.close(master)
        os.close(slave)


def test_proc_self_fd_of_a_pipe_is_written_through(root: Path, tmp_path: Path) -> None:
    """`--output /proc/self/fd/1` (what /dev/stdout points at) with stdout a pipe: the pipe gets it."""
    run = subprocess.run([sys.executable, "-m", "fvconsole", "cache", "ls", str(root), *PROM, "/proc/self/fd/1"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()},
                         cwd=os.getcwd())
    assert run.returncode == 0 and run.stderr == ""
    assert "fvconsole_cache_entries" in run.stdout


def test_a_symlink_to_a_regular_file_is_refused_and_both_stay(root: Path, tmp_path: Path, capsys) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("precious\n")
    link = tmp_path / "out.prom"
    link.symlink_to(elsewhere)
    code, out, err = _ls(root, link, capsys)
    _refused(code, out, err, link, "is a symlink to a regular file")
    assert link.is_symlink() and os.readlink(link) == str(elsewhere) and elsewhere.read_text() == "precious\n"
    assert _listing(tmp_path) == ["elsewhere.txt", "out.prom", "wcache"]


def test_a_dangling_symlink_is_refused(root: Path, tmp_path: Path, capsys) -> None:
    link = tmp_path / "out.prom"
    link.symlink_to(tmp_path / "missing")
    code, out, err = _ls(root, link, capsys)
    _refused(code, out, err, link, "is a symlink to nothing")
    assert link.is_symlink() and not (tmp_path / "missing").exists()


def test_a_symlink_to_a_directory_is_refused(root: Path, tmp_path: Path, capsys) -> None:
    link = tmp_path / "out"
    link.symlink_to(root)
    before = _listing(root)
    code, out, err = _ls(root, link, capsys)
    _refused(code, out, err, link, "is a symlink to a directory")
    assert link.is_symlink() and _listing(root) == before


def test_a_socket_is_refused(root: Path, tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        code, out, err = _ls(root, path, capsys)
        _refused(code, out, err, path, "is a socket")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        server.close()
    assert _listing(tmp_path) == ["s.sock", "wcache"]


def test_a_directory_is_refused_under_json_too(root: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "dir"
    target.mkdir()
    code = main(["cache", "ls", str(root), "--json", "--output", str(target)])
    out, err = capsys.readouterr()
    assert code == 1 and '"error"' in out and str(target) in out
    assert err.startswith(f"error: {target}: --output: is a directory") and _listing(target) == []


def test_an_absent_path_and_a_regular_file_are_still_replaced_atomically(root: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "new.prom"
    assert _ls(root, target, capsys)[0] == 0 and "fvconsole_cache_entries" in target.read_text()
    first = target.stat().st_ino
    assert _ls(root, target, capsys)[0] == 0
    assert target.stat().st_ino != first and stat.S_ISREG(target.lstat().st_mode)
    assert _listing(tmp_path) == ["new.prom", "wcache"]


def test_fleet_ls_output_writes_the_csv_through_the_door(tmp_path: Path, srun_on_path: str, capsys) -> None:
    base = tmp_path / "nodes"
    sized_entry(base / "a1" / "wc", "a", 1, DAY)
    (base / "a2" / "wc").mkdir(parents=True)
    target = tmp_path / "fleet.csv"
    argv = ["fleet", "cache", "ls", "--nodes", "a[1-2]", "--cache-root", str(base / "{node}" / "wc"),
            "--format", "csv", "--fanout", "per-node", "--output"]
    assert main([*argv, str(target)]) == 0
    assert capsys.readouterr().out == ""
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert sorted(r["node"] for r in rows) == ["a1", "a2"]
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    assert main([*argv, str(link)]) == 1
    assert capsys.readouterr().err.startswith(f"error: {link}: --output: is a symlink to a regular file")


def test_the_journal_takes_the_same_door_and_refuses_streams(tmp_path: Path) -> None:
    record = JournalRecord.now(action="cache evict", target="/r", result="ok", exit_code=0, bytes=0)
    fifo = tmp_path / "journal.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # even with a reader: the journal is read back
    try:
        written = append_record(record, str(fifo))
    finally:
        os.close(reader)
    assert not written.written and written.error == "the journal is a FIFO, not a regular file"
    link = tmp_path / "journal.jsonl"
    link.symlink_to(tmp_path / "elsewhere")
    written = append_record(record, str(link))
    assert not written.written and written.error.startswith("the journal is a symlink to nothing")
    assert not (tmp_path / "elsewhere").exists()
