"""Harness pieces shared by the test suite (no dependency on the code under test).

Why a separate module: every fault test needs the same few judgements — "did the tree
change?", "was the failure one clean `error:` line?", "can this process still read files it
should not?" — and they must be made identically everywhere for the reliability table to mean
anything.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from signal_defaults import python_defaults

# --------------------------------------------------------------------------- tree digests


def tree_digest(root: str | os.PathLike[str], *, mtimes: bool = False, modes: bool = False,
                include_root: bool = True) -> dict[str, tuple]:
    """Map each path under ``root`` (relative, root itself is ``"."``) to what it is.

    Symlinks are recorded by target and never followed; regular files by size and sha256;
    directories by presence. With ``mtimes`` the mtime_ns of every entry is included, to
    check that read-only commands do not touch what the cache uses as last-used time; with
    ``modes`` its permission bits. ``include_root=False`` leaves ``root`` itself out (its
    mtime changes when a failed run created and removed a staging dir in it). A missing root
    digests to ``{}``.
    """
    root = os.fspath(root)
    out: dict[str, tuple] = {}
    if not os.path.lexists(root):
        return out

    def record(path: str, rel: str) -> bool:
        st = os.lstat(path)
        extra = ((st.st_mtime_ns,) if mtimes else ()) + ((stat.S_IMODE(st.st_mode),) if modes else ())
        if stat.S_ISLNK(st.st_mode):
            out[rel] = ("link", os.readlink(path), *extra)
            return False
        if stat.S_ISDIR(st.st_mode):
            out[rel] = ("dir", *extra)
            return True
        if stat.S_ISREG(st.st_mode):
            out[rel] = ("file", st.st_size, _sha256(path), *extra)
        else:
            out[rel] = ("other", stat.S_IFMT(st.st_mode), *extra)
        return False

    if not record(root, "."):
        return out
    if not include_root:
        del out["."]
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            record(full, rel)
    return out


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def digest_diff(before: Mapping[str, tuple], after: Mapping[str, tuple]) -> list[str]:
    """Human-readable differences between two digests (empty when equal)."""
    lines = []
    for rel in sorted(set(before) | set(after)):
        if rel not in after:
            lines.append(f"removed {rel}")
        elif rel not in before:
            lines.append(f"added {rel}")
        elif before[rel] != after[rel]:
            lines.append(f"changed {rel}: {before[rel]} -> {after[rel]}")
    return lines


# --------------------------------------------------------------------------- running the CLI


@dataclass(frozen=True)
class CliResult:
    """One fvconsole run: exit code (negative = killed by that signal) and its output."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    pid: int | None = None  # of the child process (None when run in this process)

    def __iter__(self):
        """Unpacks as ``code, out, err = result``."""
        return iter((self.returncode, self.stdout, self.stderr))

    @property
    def killed_by(self) -> int | None:
        return -self.returncode if self.returncode < 0 else None

    def describe(self) -> str:
        return f"fvconsole {' '.join(self.argv)} -> {self.returncode}\nstdout: {self.stdout[-2000:]}\nstderr: {self.stderr[-2000:]}"


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a CLI subprocess: no debug tracebacks, no inherited fault hooks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FVCONSOLE_", "FASTVIDEO_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


def run_cli(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    unprivileged: bool = False,
    timeout: float = 240,
) -> CliResult:
    """Run ``python -m fvconsole argv`` in a subprocess (needed when it may be SIGKILLed).

    ``unprivileged`` drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH before exec, so even
    as root the child obeys file modes (see :func:`drop_dac_capabilities`).
    """
    argv = tuple(str(a) for a in argv)
    with subprocess.Popen(
        [sys.executable, "-m", "fvconsole", *argv],
        env=cli_env(env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=drop_dac_capabilities if unprivileged else None,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    return CliResult(argv, proc.returncode, stdout, stderr, proc.pid)


def run_forked(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> CliResult:
    """Run ``fvconsole.cli.main(argv)`` in a forked child process (it may SIGKILL itself).

    Why: a fresh ``python -m fvconsole`` pays ~2 s importing torch per crash trial; a fork of
    this process (torch already imported) is a real separate process that the kernel kills
    just the same, at a fraction of the cost. Output goes to temp files read afterwards.
    """
    argv = tuple(str(a) for a in argv)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # child: never return into pytest
            code = 70
            try:
                python_defaults()  # a suite run under nohup or `&` ignores SIGHUP or SIGINT: the test sends them
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
                sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
                for key in [k for k in os.environ if k.startswith(("FVCONSOLE_", "FASTVIDEO_"))]:
                    del os.environ[key]
                os.environ.update(env or {})
                from fvconsole.cli import main

                try:
                    code = int(main(list(argv)) or 0)
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 2
            except BaseException:  # noqa: BLE001 - report, then leave without unwinding pytest
                import traceback

                traceback.print_exc()
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return CliResult(
            argv,
            os.waitstatus_to_exitcode(status),
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            pid,
        )


def run_inproc(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> CliResult:
    """Run ``fvconsole.cli.main(argv)`` in this process (fast: for property tests)."""
    from fvconsole.cli import main

    argv = tuple(str(a) for a in argv)
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    captured = capsys.readouterr()
    return CliResult(argv, int(code), captured.out, captured.err)


def assert_clean_error(
    result: CliResult, codes: Sequence[int] = (1,), names: Sequence[str] = (), *, progress_ok: bool = False
) -> str:
    """The failure contract: allowed exit code, exactly one stderr line `error: ...`, no traceback.

    ``warning:`` lines may come before it: every warning is on stderr (a refused migration still
    reports the staging dirs it left alone), and none is an error.
    ``names``: at least one of them must appear in that line (the file or field at fault).
    ``progress_ok``: a failure part-way may follow ``progress:`` lines (they are not errors).
    Returns the error line.
    """
    assert result.returncode in codes, result.describe()
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.describe()
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("warning: ")]
    if progress_ok:
        lines = [line for line in lines if not line.startswith("progress:")]
    if result.returncode == 2 and len(lines) == 2:
        # A usage error's second line is the README's promise: where to read the usage.
        assert re.fullmatch(r"try: fvconsole( [a-z-]+)* --help", lines[1]), result.describe()
        lines = lines[:1]
    assert len(lines) == 1, f"expected exactly one stderr line\n{result.describe()}"
    line = lines[0]
    assert line.startswith("error: "), result.describe()
    assert "internal error" not in line, result.describe()
    if names:
        assert any(str(n) in line for n in names), f"error line names none of {list(names)}: {line}"
    return line


def assert_no_traceback(result: CliResult) -> None:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.describe()
    assert "internal error" not in result.stderr, result.describe()


# --------------------------------------------------------------------------- privileges


_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE = 1
_CAP_DAC_READ_SEARCH = 2


def drop_dac_capabilities() -> None:
    """preexec_fn: remove the two capabilities that let root ignore file modes.

    Dropping them from the bounding set before exec means the exec'd root process gets a
    permitted set without them, so it is refused like any other owner would be (files
    owned by root with mode 000 become unreadable, 0555 dirs unwritable). This keeps the
    interpreter and site-packages under /root usable, which `nobody` could not reach.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), "prctl(PR_CAPBSET_DROP)")


def can_drop_privileges() -> str | None:
    """None if file-mode tests can run here, else the skip reason."""
    if os.geteuid() != 0:
        # Non-root: file modes already apply to us.
        return None
    probe = tempfile.mkdtemp(prefix="fv-rel-cap-")
    try:
        target = os.path.join(probe, "f")
        Path(target).write_text("x")
        os.chmod(target, 0)
        proc = subprocess.run(
            [sys.executable, "-c", f"open({target!r}).read()"],
            preexec_fn=drop_dac_capabilities,
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            return "cannot make a root subprocess obey file modes here"
        return None
    except OSError as exc:
        return f"cannot drop capabilities: {exc}"
    finally:
        shutil.rmtree(probe, ignore_errors=True)


# --------------------------------------------------------------------------- malicious pickles


class _OpenMarker:
    """Unpickling this calls ``open(marker, "w")``: creating the marker proves code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def malicious_payload(marker: str | os.PathLike[str], rank: int = 0, world_size: int = 1, step: int = 0) -> dict:
    """A sidecar-shaped dict hiding an object whose unpickling creates ``marker``."""
    return {
        "version": 1,
        "rank": rank,
        "world_size": world_size,
        "step": step,
        "state_kind": "dataset",
        "state": {"evil": _OpenMarker(os.fspath(marker))},
    }


def write_malicious_pt(path: str | os.PathLike[str], marker: str | os.PathLike[str], *, fmt: str = "torch", **kw) -> None:
    """Write a `.pt` whose loading with ``weights_only=False`` would create ``marker``.

    ``fmt="torch"``: torch.save zip format; ``fmt="pickle"``: a bare pickle (legacy format).
    """
    import pickle

    payload = malicious_payload(marker, **kw)
    if fmt == "torch":
        import torch

        torch.save(payload, os.fspath(path))
    else:
        Path(path).write_bytes(pickle.dumps(payload, protocol=2))


# --------------------------------------------------------------------------- syscall-level kills


def strace_available() -> str | None:
    """None if ``strace`` can inject signals here, else the skip reason."""
    if shutil.which("strace") is None:
        return "strace is not installed (apt-get install strace)"
    proc = subprocess.run(
        ["strace", "-f", "-o", "/dev/null", "-e", "trace=getpid", "-e", "inject=getpid:signal=SIGKILL:when=1",
         sys.executable, "-c", "import os; os.getpid(); print('survived')"],
        capture_output=True, text=True,
    )
    if "survived" in proc.stdout or proc.returncode == 0:
        return f"strace cannot inject signals here: {proc.stderr.strip()[:200]}"
    return None


def run_cli_killed_at_syscall(
    argv: Sequence[str], syscall: str, nth: int, *, env: Mapping[str, str] | None = None, timeout: float = 240
) -> CliResult:
    """Run the CLI under strace and SIGKILL it on entry to its ``nth`` ``syscall`` (not executed).

    strace counts each syscall separately (per thread), so "the 3rd unlinkat" is exact for a
    single-threaded code path. Used where the code under test has no fault hook of its own.
    """
    argv = tuple(str(a) for a in argv)
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-o", "/dev/null", "-e", f"trace={syscall}",
         "-e", f"inject={syscall}:signal=SIGKILL:when={nth}", sys.executable, "-m", "fvconsole", *argv],
        env=cli_env(env), capture_output=True, text=True, timeout=timeout,
    )
    return CliResult(argv, proc.returncode, proc.stdout, proc.stderr)


def count_syscalls(argv: Sequence[str], syscalls: Sequence[str], *, env: Mapping[str, str] | None = None) -> dict[str, int]:
    """How many times an uninterrupted run makes each of ``syscalls`` (strace -c)."""
    import tempfile as _tempfile

    with _tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        proc = subprocess.run(
            ["strace", "-f", "-c", "-o", out.name, "-e", f"trace={','.join(syscalls)}",
             sys.executable, "-m", "fvconsole", *map(str, argv)],
            env=cli_env(env), capture_output=True, text=True,
        )
        assert proc.returncode == 0, proc.stderr
        counts = dict.fromkeys(syscalls, 0)
        for line in out.read().splitlines():
            parts = line.split()
            if parts and parts[-1] in counts:
                counts[parts[-1]] = int(parts[3])
        return counts


#: Every syscall that could delete or move something.
DESTRUCTIVE_SYSCALLS = ("unlink", "unlinkat", "rmdir", "rename", "renameat", "renameat2")


def run_cli_no_destruction(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> CliResult:
    """Run the CLI with every delete/rename syscall failing (EPERM) under strace.

    A safety net for tests that point a destructive command at a real system path (`/`):
    even a broken refusal cannot delete anything. Python's own startup does not need these.
    """
    argv = tuple(str(a) for a in argv)
    calls = ",".join(DESTRUCTIVE_SYSCALLS)
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-o", "/dev/null", "-e", f"trace={calls}", "-e", f"inject={calls}:error=EPERM",
         sys.executable, "-m", "fvconsole", *argv],
        env=cli_env(env), capture_output=True, text=True, timeout=240,
    )
    return CliResult(argv, proc.returncode, proc.stdout, proc.stderr)
