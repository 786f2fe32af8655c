"""A real single-host Slurm cluster for the fleet tests: three emulated nodes n1..n3.

Usage in a test module::

    from slurm_cluster import slurm_cluster_fixture  # noqa: F401  (registers `slurm_cluster`)

    @pytest.mark.slurm
    def test_x(slurm_cluster): ...

The session-scoped fixture writes its own ``slurm.conf`` (non-default free ports, per-node
``%n`` spool/pid/log paths, its own munge socket so a system munged is never touched),
starts ``munged`` as the munge user, ``slurmctld`` and one ``slurmd -N nX`` per node, all in
the foreground so it holds their pids, waits (bounded) until ``sinfo`` shows every node idle,
sets ``SLURM_CONF`` for the test process, and stops every daemon it started by pid at the
end. Its ``Epilog=`` runs the hooks a test installs with ``SlurmCluster.epilog_hook`` (none
by default) and always succeeds. Where the cluster cannot be started (not root, binaries missing, start-up failure)
the tests using it skip with the reason, including the last log lines -- or fail, when
``FVCONSOLE_REQUIRE_SLURM=1`` says this machine must run them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

NODES = ("n1", "n2", "n3")
NODELIST = "n[1-3]"
_BINARIES = ("munged", "slurmctld", "slurmd", "srun", "sinfo", "squeue", "sbatch", "scancel")
_STARTUP_SECONDS = 60.0


@dataclasses.dataclass
class SlurmCluster:
    """What a test needs to talk to the emulated cluster."""

    conf: Path
    workdir: Path
    nodes: tuple[str, ...]
    pids: dict[str, int]

    @property
    def env(self) -> dict[str, str]:
        """Environment for Slurm client commands."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command against this cluster."""
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout)

    @contextlib.contextmanager
    def epilog_hook(self, name: str, script: str) -> Iterator[Path]:
        """Install ``script`` as an epilog hook (run by slurmd after every job on each node) while in the block."""
        hook = self.workdir / EPILOG_HOOKS / f"{name}.sh"
        hook.write_text(script)
        hook.chmod(0o755)
        try:
            yield hook
        finally:
            hook.unlink(missing_ok=True)


FAKE_SRUN = r'''#!{python}
"""Stand-in srun for tests without Slurm: run the node command locally, once per --nodelist node.

Like srun: --nodelist is a hostlist, every node runs the command after the options as one
task with SLURMD_NODENAME and SLURM_PROCID set, all tasks at once; with --label each output
line is prefixed "<task>: " and, as slurmstepd forwards at most 1024 bytes at a time, a
longer line arrives as several labelled pieces. Node names choose a failure:

- down*: the whole srun fails before any task starts ("Invalid node name specified");
- flaky*: the first srun naming it fails before any task starts, as slurmctld does for a
  moment ("Unable to allocate resources: Invalid argument"); later ones run the command;
- hang*: the step waits for resources that never come (srun writes its pid to
  $FAKE_SRUN_PIDS/<node>.pid); with --immediate srun fails at once ("nodes are busy");
- stuck*: the node runner starts, but its command never returns;
- garbage*: the node prints a result frame with broken JSON;
- twice*: the node prints two complete results;
- others run the command. $FAKE_SRUN_NODES/<node>.py, if present, is run instead (with the
  runner's arguments): a test's hostile or broken node.
"""
import os, re, subprocess, sys, threading, time

args = sys.argv[1:]
opts = {}
while args and args[0].startswith("-"):
    key, _, value = args.pop(0).partition("=")
    opts[key] = value
cmd = args
label = "--label" in opts
lock = threading.Lock()


def expand(text):
    names = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
        match = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", item)
        if not match:
            names.append(item)
            continue
        prefix, ranges, suffix = match.groups()
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            for n in range(int(lo), int(hi or lo) + 1):
                names.append(f"{prefix}{n:0{len(lo)}d}{suffix}")
    return names


nodes = expand(opts["--nodelist"])
if any(n.startswith("down") for n in nodes):
    print("srun: error: Unable to allocate resources: Invalid node name specified", file=sys.stderr)
    sys.exit(1)
for node in nodes:
    if node.startswith("flaky"):
        tried = os.path.join(os.path.dirname(os.path.abspath(__file__)), "." + node + ".tried")
        if not os.path.exists(tried):
            open(tried, "w").close()
            print("srun: error: Unable to allocate resources: Invalid argument", file=sys.stderr)
            sys.exit(1)


def emit(stream, task, data):
    with lock:
        stream.write((f"{task}: ".encode() if label else b"") + data + (b"\n" if label and not data.endswith(b"\n") else b""))
        stream.flush()


def forward(pipe, stream, task):
    buf = b""
    while True:
        chunk = os.read(pipe.fileno(), 1 << 16)
        buf += chunk
        while True:
            cut = buf.find(b"\n") + 1
            if not cut and len(buf) < 1024 and chunk:
                break
            if not buf:
                break
            size = min(cut or len(buf), 1024)
            emit(stream, task, buf[:size])
            buf = buf[size:]
        if not chunk:
            return


def task_argv(node):
    hostile = os.path.join(os.environ.get("FAKE_SRUN_NODES", "/nonexistent"), node + ".py")
    runner = cmd[3:] if cmd[1] in ("-m", "-c") else cmd[1:]  # the node runner's arguments
    if os.path.exists(hostile):
        return [cmd[0], hostile, *runner]
    if node.startswith("stuck"):
        code = ("import sys, time, fvconsole.cli.node as n\n"
                "n.run_captured = lambda argv: time.sleep(600)\n"
                "sys.exit(n.main(sys.argv[1:]))")
        return [cmd[0], "-c", code, *runner]
    if node.startswith("garbage"):
        return [cmd[0], "-c", f"print('FVNODE {node} start'); print('FVNODE {node} 0/1 {{not json')"]
    if node.startswith("twice"):
        line = f"FVNODE {node} 0/1 {{}}"
        return [cmd[0], "-c", f"print({line!r}); print({line!r})"]
    return cmd


busy = [n for n in nodes if n.startswith("hang")]
if busy and "--immediate" in opts:
    print("srun: error: Unable to allocate resources: Requested nodes are busy", file=sys.stderr)
    sys.exit(1)
for node in busy:  # the step waits for resources that never come
    if os.environ.get("FAKE_SRUN_PIDS"):
        with open(os.path.join(os.environ["FAKE_SRUN_PIDS"], node + ".pid"), "w") as f:
            f.write(str(os.getpid()))
if busy:
    time.sleep(600)
procs = []
for task, node in enumerate(nodes):
    env = {**os.environ, "SLURMD_NODENAME": node, "SLURM_PROCID": str(task)}
    proc = subprocess.Popen(task_argv(node), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    threads = [threading.Thread(target=forward, args=(proc.stdout, sys.stdout.buffer, task)),
               threading.Thread(target=forward, args=(proc.stderr, sys.stderr.buffer, task))]
    for t in threads:
        t.start()
    procs.append((task, node, proc, threads))
worst = 0
for task, node, proc, threads in procs:
    code = proc.wait()
    for t in threads:
        t.join()
    if code:
        what = "Killed" if code < 0 else f"Exited with exit code {code}"
        print(f"srun: error: {node}: task {task}: {what}", file=sys.stderr, flush=True)
        worst = max(worst, 128 - code if code < 0 else code)
sys.exit(worst)
'''


def write_fake_srun(directory: Path) -> str:
    """Write the stand-in ``srun`` into ``directory``; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "srun"
    path.write_text(FAKE_SRUN.replace("{python}", sys.executable))
    path.chmod(0o755)
    return str(path)


def unavailable_reason() -> str | None:
    """Why a cluster cannot be started here, or None if it can be tried."""
    if os.geteuid() != 0:
        return "Slurm tests need root (slurmd and munged run as system users)"
    missing = [b for b in _BINARIES if shutil.which(b) is None]
    if missing:
        return f"Slurm binaries missing ({', '.join(missing)}): run .ci/setup-slurm.sh (apt-get install slurm-wlm munge)"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no 'munge' user: the munge package is not installed correctly"
    return None


def _free_port_block(count: int) -> int:
    """A base port such that base..base+count-1 are all free (Slurm's Port=[a-b] needs a range)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + count > 65000:
            continue
        held: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("0.0.0.0", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no block of free ports found")


def _ensure_munge_key() -> None:
    key = Path("/etc/munge/munge.key")
    if key.exists():
        return
    ent = pwd.getpwnam("munge")
    key.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chown(key.parent, ent.pw_uid, ent.pw_gid)
    key.write_bytes(os.urandom(128))
    os.chown(key, ent.pw_uid, ent.pw_gid)
    os.chmod(key, 0o400)


#: Hooks a test installs (``<workdir>/epilog.d/*.sh``, see :meth:`SlurmCluster.epilog_hook`) run
#: after every job on each of its nodes; none are installed by default.
EPILOG_HOOKS = "epilog.d"
#: The cluster's Epilog: runs the installed hooks and always succeeds (a failing epilog would
#: drain the node for every later test).
EPILOG = """#!/bin/sh
for hook in {hooks}/*.sh; do
    [ -x "$hook" ] && "$hook"
done
exit 0
"""


def _write_conf(work: Path, munge_socket: Path, host: str) -> Path:
    base = _free_port_block(len(NODES) + 2)
    ctld_port, srun_lo = base, base + len(NODES) + 1
    node_lo, node_hi = base + 1, base + len(NODES)
    for sub in ("state", "spool", "log", "run", EPILOG_HOOKS):
        (work / sub).mkdir(exist_ok=True)
    epilog = work / "epilog.sh"
    epilog.write_text(EPILOG.format(hooks=work / EPILOG_HOOKS))
    epilog.chmod(0o755)
    conf = work / "slurm.conf"
    conf.write_text(
        "\n".join(
            [
                "ClusterName=fvtest",
                f"SlurmctldHost={host}(127.0.0.1)",
                f"SlurmctldPort={ctld_port}",
                f"SrunPortRange={srun_lo + 10}-{srun_lo + 60}",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={munge_socket}",
                "SlurmUser=root",
                "SlurmdUser=root",
                f"StateSaveLocation={work}/state",
                f"SlurmdSpoolDir={work}/spool/%n",
                f"SlurmctldPidFile={work}/run/slurmctld.pid",
                f"SlurmdPidFile={work}/run/slurmd.%n.pid",
                f"SlurmctldLogFile={work}/log/slurmctld.log",
                f"SlurmdLogFile={work}/log/slurmd.%n.log",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_CPU",
                "SchedulerType=sched/builtin",
                "MpiDefault=none",
                "SwitchType=switch/none",
                "ReturnToService=2",
                "JobCompType=jobcomp/none",
                "AccountingStorageType=accounting_storage/none",
                "JobAcctGatherType=jobacct_gather/none",
                "SlurmctldTimeout=30",
                "SlurmdTimeout=30",
                "MessageTimeout=20",
                "InactiveLimit=0",
                "KillWait=2",
                # Strict like many sites: a task that fails ends its step, unless srun says
                # --kill-on-bad-exit=0 (which single-step fan-out must, and is tested to).
                "KillOnBadExit=1",
                "MinJobAge=30",
                f"Epilog={epilog}",
                f"NodeName=n[1-{len(NODES)}] NodeHostname={host} NodeAddr=127.0.0.1 "
                f"Port=[{node_lo}-{node_hi}] CPUs=1 State=UNKNOWN",
                f"PartitionName=debug Nodes=n[1-{len(NODES)}] Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    return conf


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _logs_tail(work: Path) -> str:
    logs = sorted((work / "log").glob("*.*")) + [work / "munge" / "munged.log"]
    return "; ".join(f"{p.name}: {_tail(p, 3)}" for p in logs if p.exists())


def _stop(pids: dict[str, int], procs: list[subprocess.Popen]) -> None:
    """Stop the daemons this harness started, by pid: SIGTERM, bounded wait, then SIGKILL."""
    for proc in reversed(procs):
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
    for proc in reversed(procs):
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    pids.clear()


def drain_jobs(conf: Path, seconds: float = 30.0) -> None:
    """Cancel every job on this cluster and wait (bounded) until none is left.

    Stopping slurmd while a job still runs would orphan its slurmstepd, so the harness
    drains first and only then stops the daemons it started.
    """
    env = {**os.environ, "SLURM_CONF": str(conf)}

    def jobs() -> list[str]:
        try:
            out = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return []
        return out.stdout.split()

    pending = jobs()
    if pending:
        subprocess.run(["scancel", *pending], env=env, capture_output=True, timeout=10)
    deadline = time.monotonic() + seconds
    while pending and time.monotonic() < deadline:
        time.sleep(0.3)
        pending = jobs()


def _all_idle(conf: Path) -> tuple[bool, str]:
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %t"], env=env, capture_output=True, text=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        return False, "sinfo timed out"
    states = dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)
    ok = all(states.get(n) == "idle" for n in NODES)
    return ok, (out.stdout.strip() or out.stderr.strip()).replace("\n", ", ")


def start_cluster(work: Path) -> tuple[SlurmCluster, list[subprocess.Popen]]:
    """Start munged, slurmctld and one slurmd per node; raise RuntimeError with logs on failure."""
    _ensure_munge_key()
    ent = pwd.getpwnam("munge")
    munge_dir = work / "munge"
    munge_dir.mkdir()
    os.chown(munge_dir, ent.pw_uid, ent.pw_gid)
    os.chmod(munge_dir, 0o755)  # munged requires execute permission for all on its socket dir
    munge_socket = munge_dir / "munge.socket"
    host = socket.gethostname().split(".")[0]
    conf = _write_conf(work, munge_socket, host)
    procs: list[subprocess.Popen] = []
    pids: dict[str, int] = {}
    (work / "log").mkdir(exist_ok=True)

    def spawn(name: str, argv: list[str], **kw) -> None:
        with open(work / "log" / f"{name.replace(':', '-')}.out", "wb") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, **kw)
        procs.append(proc)
        pids[name] = proc.pid

    try:
        spawn(
            "munged",
            [
                "munged", "-F", f"--socket={munge_socket}", f"--pid-file={munge_dir}/munged.pid",
                f"--log-file={munge_dir}/munged.log", f"--seed-file={munge_dir}/munged.seed",
            ],
            user=ent.pw_uid, group=ent.pw_gid, extra_groups=[],
        )
        _wait_for(lambda: munge_socket.exists(), 15, "munged socket", procs, work)
        spawn("slurmctld", ["slurmctld", "-D", "-c", "-i", "-f", str(conf)])
        for node in NODES:
            spawn(f"slurmd:{node}", ["slurmd", "-D", "-f", str(conf), "-N", node])
        state = {"last": ""}

        def idle() -> bool:
            ok, state["last"] = _all_idle(conf)
            return ok

        _wait_for(idle, _STARTUP_SECONDS, "nodes idle", procs, work, lambda: state["last"])
    except BaseException:
        _stop(pids, procs)
        raise
    return SlurmCluster(conf=conf, workdir=work, nodes=NODES, pids=pids), procs


def _wait_for(check, seconds: float, what: str, procs, work: Path, detail=lambda: "") -> None:
    """Poll ``check`` until true; fail early if a daemon died (bounded, never a timed assertion)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        dead = [p.args[0] for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{', '.join(dead)} exited during start-up; {_logs_tail(work)}")
        time.sleep(0.3)
    raise RuntimeError(f"timed out waiting for {what} ({detail()}); {_logs_tail(work)}")


#: Set to 1 (CI does, after installing Slurm) to make "cannot start a cluster" a failure, not a skip.
REQUIRE_ENV = "FVCONSOLE_REQUIRE_SLURM"


def _skip_or_fail(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(name="slurm_cluster")
def slurm_cluster_fixture(slurm_cluster_session: SlurmCluster) -> SlurmCluster:
    """The session's cluster, once the previous test's jobs and steps are gone and every node is
    idle again: a node still completing a step refuses the next one ("Unable to create step")."""
    drain_jobs(slurm_cluster_session.conf)
    deadline = time.monotonic() + _QUIET_SECONDS
    last = ""
    while time.monotonic() < deadline:
        ok, last = _all_idle(slurm_cluster_session.conf)
        if ok:
            return slurm_cluster_session
        time.sleep(0.2)
    pytest.fail(f"the Slurm cluster did not become idle within {_QUIET_SECONDS:g}s: {last}", pytrace=False)


#: How long a test waits for the previous test's steps to finish on every node.
_QUIET_SECONDS = 60.0


@pytest.fixture(scope="session", name="slurm_cluster_session")
def slurm_cluster_session_fixture() -> Iterator[SlurmCluster]:
    """A running 3-node emulated cluster (session-scoped); skips with the reason if impossible."""
    reason = unavailable_reason()
    if reason:
        _skip_or_fail(reason)
    work = Path(tempfile.mkdtemp(prefix="fvslurm-"))
    os.chmod(work, 0o755)  # munged (as the munge user) must reach its socket directory
    try:
        cluster, procs = start_cluster(work)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(work, ignore_errors=True)
        _skip_or_fail(f"could not start a Slurm cluster: {exc}")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        drain_jobs(cluster.conf)
        _stop(cluster.pids, procs)
        shutil.rmtree(work, ignore_errors=True)
