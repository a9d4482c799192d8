"""Test harness: a real PostgreSQL and a real Redis of the test's own, never the machine's.

``PostgresServer`` and ``RedisServer`` start the server binaries this machine has (Debian's
packages; ``scripts/system-packages.sh postgresql redis-server`` installs them) on a free
loopback port with their files in a directory of the test's, so a laptop that runs its own
servers on 5432 and 6379 tests exactly what CI tests. Each is a context manager; ``stop()``
and ``start()`` again keep the port (and PostgreSQL its data), and ``pause()``/``resume()``
freeze the server with SIGSTOP, so a test can make the server refuse connections, or hang,
and come back.

Servers run in a session (process group) of their own, die with the process that started them
(parent-death signal: start them from the thread that outlives them, as fixtures do) and are
stopped on ``__exit__`` whatever happened. PostgreSQL refuses to run as root: as root, the
cluster runs as the ``postgres`` system user in a private directory under /tmp (the test's
directory, under pytest's 0700 ``pytest-of-root``, is out of that user's reach), linked from
``<directory>/data`` and removed on ``__exit__``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from tests.gateway import free_port

POSTGRES_LIB = Path("/usr/lib/postgresql")
POSTGRES_USER = "gateway"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it


def _die_with_parent() -> None:
    """In the child before exec (after its user changed, which would clear it): SIGKILL when
    the thread that started it ends, so a killed test run leaves no server behind."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _tail(path: Path, lines: int = 30) -> str:
    if not path.exists():
        return f"({path.name}: none)"
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return f"--- {path} (last {len(text)} lines) ---\n" + "\n".join(text)


class _ServerProcess:
    """One server process: started in its own session, polled until ready, stopped with
    ``stop_signal`` and killed (with its whole process group) when it does not stop."""

    name = "server"
    stop_signal = signal.SIGTERM

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False
        self._output: IO[bytes] | None = None

    # What a server defines.
    def _argv(self) -> list[str]:
        raise NotImplementedError

    def _ready(self) -> bool:
        raise NotImplementedError

    def _logs(self) -> str:
        raise NotImplementedError

    def _prepare(self) -> None:
        """Before each start (PostgreSQL makes its cluster the first time)."""

    def _spawn_user(self) -> pwd.struct_passwd | None:
        return None

    @property
    def output_path(self) -> Path:
        """The server's stdout and stderr (appended to across restarts)."""
        return self.directory / f"{self.name}.out"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = START_TIMEOUT) -> Self:
        """Start the server and wait until it answers; stop it again if it does not."""
        if self.process is not None:
            raise RuntimeError(f"{self.name} on port {self.port} is already started")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._prepare()
        user = self._spawn_user()
        self._output = self.output_path.open("ab")
        try:
            self.process = subprocess.Popen(
                self._argv(),
                stdin=subprocess.DEVNULL,
                stdout=self._output,
                stderr=subprocess.STDOUT,
                env=_clean_env(),
                cwd=self.directory if user is None else "/",
                start_new_session=True,
                user=None if user is None else user.pw_uid,
                group=None if user is None else user.pw_gid,
                extra_groups=None if user is None else [],
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only calls prctl
            )
            self._wait(self._ready, timeout, "accept connections")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``condition`` (the server's own readiness check) until the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(
                    f"{self.name} exited ({code}) before it could {what}:\n" + self._logs()
                )
            if condition():
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"{self.name} did not {what} on 127.0.0.1:{self.port} within {timeout} s:\n"
                    + self._logs()
                )
            time.sleep(0.02)  # polling a process outside this one; bounded by the deadline

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Stop the server (resuming it first if paused); kill its process group if it does not
        end within ``timeout``. Returns its exit code, None when it was not running."""
        process, self.process = self.process, None
        code: int | None = None
        if process is not None:
            children = _children(process.pid)
            if process.poll() is None:
                if self.paused:
                    for pid in children:  # a stopped child would outlive its server
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGCONT)
                    _signal_group(process.pid, signal.SIGCONT)
                process.send_signal(self.stop_signal)
            try:
                code = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # The leader is not reaped yet, so its process group id cannot be reused.
                _signal_group(process.pid, signal.SIGKILL)
                for pid in children:  # sessions of their own (PostgreSQL's backends)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                code = process.wait(timeout=10)
        self.paused = False
        if self._output is not None:
            self._output.close()
            self._output = None
        return code

    def refuses_connections(self) -> bool:
        """Whether a TCP connect to the port is refused (nothing listens)."""
        return _tcp_refused(self.port)

    def pause(self) -> None:
        """Freeze the server (SIGSTOP to its process group and its children): connections are
        accepted by the kernel but never answered, like a server that hangs. (PostgreSQL's
        backends each start a session of their own, so the group alone is not enough.)"""
        assert self.process is not None, "start() first"
        _signal_group(self.process.pid, signal.SIGSTOP)
        for child in _children(self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        assert self.process is not None, "start() first"
        for child in _children(self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGCONT)
        _signal_group(self.process.pid, signal.SIGCONT)
        self.paused = False

    def close(self) -> None:
        """Stop for good (PostgreSQL also removes what it made outside the directory)."""
        self.stop()

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _children(parent: int) -> list[int]:
    """The pids whose parent is ``parent`` (from /proc)."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == parent:
            found.append(int(stat_file.parent.name))
    return found


def _signal_group(leader: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(leader, signum)


def _clean_env() -> dict[str, str]:
    """This environment without the libpq variables (PGHOST, PGPORT, PGUSER, PGSERVICE …) that
    would point the client tools elsewhere."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")}


def _tcp_refused(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(("127.0.0.1", port))
        except OSError:
            return True
        return False


# --- PostgreSQL ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PostgresBinaries:
    initdb: Path
    postgres: Path
    psql: Path
    pg_isready: Path


def _version_key(bin_dir: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", bin_dir.parent.name))


def find_postgres() -> PostgresBinaries:
    """The server binaries of the highest major version under /usr/lib/postgresql (Debian's
    layout) that has ``initdb`` and ``postgres``; else those on PATH."""
    names = ("initdb", "postgres", "psql", "pg_isready")
    dirs = [d for d in POSTGRES_LIB.glob("*/bin") if (d / "initdb").is_file()]
    dirs = [d for d in dirs if (d / "postgres").is_file()]
    found: dict[str, Path] = {}
    if dirs:
        best = max(dirs, key=_version_key)
        found = {name: best / name for name in names if (best / name).is_file()}
    for name in names:
        if name not in found and (on_path := shutil.which(name)) is not None:
            found[name] = Path(on_path)
    missing = [name for name in names if name not in found]
    if missing:
        raise RuntimeError(
            f"PostgreSQL's {', '.join(missing)} not found (under {POSTGRES_LIB}/*/bin or on "
            "PATH): install the server with `scripts/system-packages.sh postgresql` (as root)"
        )
    return PostgresBinaries(**found)


def _postgres_system_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError(
            "PostgreSQL refuses to run as root and this machine has no `postgres` user to run "
            "it as: install the server with `scripts/system-packages.sh postgresql` (its "
            "package creates the user), or run the tests as another user"
        ) from None


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class PostgresServer(_ServerProcess):
    """A private PostgreSQL cluster on ``127.0.0.1:<port>``: superuser ``gateway``, trust
    authentication, durability off (fsync, synchronous commit, full page writes) unless
    ``durable`` (as a production server runs: what the benchmarks measure)."""

    name = "postgres"
    stop_signal = signal.SIGINT  # fast shutdown: roll back open transactions, checkpoint, exit

    def __init__(self, directory: Path, port: int | None = None, *, durable: bool = False) -> None:
        super().__init__(directory, port)
        self.durable = durable
        self.binaries = find_postgres()
        self.user = _postgres_system_user() if os.geteuid() == 0 else None
        self._home: Path | None = None
        self.initdb_seconds: float | None = None

    @property
    def home(self) -> Path:
        """Where the cluster lives: the test's directory, or as root a private directory the
        ``postgres`` user owns (made on first start)."""
        if self.user is None:
            return self.directory
        if self._home is None:
            self._home = Path(tempfile.mkdtemp(prefix="gateway-pg-", dir="/tmp"))
            os.chown(self._home, self.user.pw_uid, self.user.pw_gid)
            link = self.directory / "data"
            link.unlink(missing_ok=True)
            link.symlink_to(self._home / "data")
        return self._home

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    def _spawn_user(self) -> pwd.struct_passwd | None:
        return self.user

    def _prepare(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        log = self.directory / "initdb.log"
        argv = [str(self.binaries.initdb), "-D", str(self.data_dir), "-A", "trust"]
        argv += ["-U", POSTGRES_USER, "--no-sync", "-E", "UTF8", "--locale=C"]
        began = time.monotonic()
        with log.open("ab") as output:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=_clean_env(),
                cwd=self.home,
                user=None if self.user is None else self.user.pw_uid,
                group=None if self.user is None else self.user.pw_gid,
                extra_groups=None if self.user is None else [],
                timeout=120,
                check=False,
            )
        self.initdb_seconds = time.monotonic() - began
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed ({done.returncode}):\n{_tail(log)}")

    def _argv(self) -> list[str]:
        argv = [str(self.binaries.postgres), "-D", str(self.data_dir), "-k", str(self.home)]
        argv += ["-h", "127.0.0.1", "-p", str(self.port)]
        settings = ["max_connections=200", "listen_addresses=127.0.0.1"]
        if not self.durable:
            argv.append("-F")
            settings += ["fsync=off", "synchronous_commit=off", "full_page_writes=off"]
        for setting in settings:
            argv += ["-c", setting]
        return argv

    def _ready(self) -> bool:
        argv = [str(self.binaries.pg_isready), "-q", "-h", "127.0.0.1", "-p", str(self.port)]
        argv += ["-U", POSTGRES_USER, "-d", "postgres", "-t", "2"]
        return subprocess.run(argv, env=_clean_env(), timeout=10, check=False).returncode == 0

    def _logs(self) -> str:
        return _tail(self.directory / "initdb.log") + "\n" + _tail(self.output_path)

    def url(self, database: str) -> str:
        """The gateway's storage URL for ``database`` on this server."""
        return f"postgresql+asyncpg://{POSTGRES_USER}@127.0.0.1:{self.port}/{database}"

    def psql(
        self, sql: str, database: str = "postgres", connect_timeout: int = 10, timeout: float = 60.0
    ) -> str:
        """Run ``sql`` with psql; its unaligned, tuples-only output (``select 1`` → ``"1"``).
        Raises ``RuntimeError`` with psql's message when it fails: connection refused, or no
        answer within ``connect_timeout`` seconds (a paused server)."""
        return self._psql(sql, database, [], connect_timeout, timeout).strip()

    def query(self, database: str, sql: str, timeout: float = 60.0) -> list[tuple[str, ...]]:
        """The rows ``sql`` returns, each value as psql prints it (NULL as ``""``)."""
        # Each row ends in a zero byte; its fields are separated by the unit separator.
        out = self._psql(sql, database, ["-F", "\x1f", "-0"], 10, timeout)
        return [tuple(row.split("\x1f")) for row in out.split("\0")[:-1]]

    def _psql(
        self, sql: str, database: str, options: list[str], connect_timeout: int, timeout: float
    ) -> str:
        argv = [str(self.binaries.psql), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
        argv += ["-h", "127.0.0.1", "-p", str(self.port), "-U", POSTGRES_USER, "-d", database]
        env = _clean_env() | {"PGCONNECT_TIMEOUT": str(connect_timeout)}
        done = subprocess.run(
            [*argv, *options, "-c", sql],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql ({done.returncode}) on port {self.port}: {done.stderr}")
        return done.stdout

    def create_database(self, name: str, template: str | None = None) -> str:
        """``CREATE DATABASE name [TEMPLATE template]``; returns its ``url``."""
        sql = f"CREATE DATABASE {_quote_ident(name)}"
        if template is not None:
            sql += f" TEMPLATE {_quote_ident(template)}"
        self.psql(sql)
        return self.url(name)

    def close(self) -> None:
        """Stop, and remove the private directory made as root (the test's directory stays)."""
        self.stop()
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None


# --- Redis --------------------------------------------------------------------------------------

RespValue = str | int | bytes | None | list["RespValue"]


class RedisError(Exception):
    """An error reply (``-ERR …``) from Redis."""


def _encode(*args: str | bytes) -> bytes:
    parts = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode() if isinstance(arg, str) else arg
        parts += [f"${len(data)}\r\n".encode(), data, b"\r\n"]
    return b"".join(parts)


def _read_reply(stream: IO[bytes]) -> RespValue:
    line = stream.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError(f"redis closed the connection mid-reply: {line!r}")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RedisError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        data = stream.read(size + 2)
        return data[:-2]
    if kind == b"*":
        count = int(rest)
        return None if count < 0 else [_read_reply(stream) for _ in range(count)]
    raise ConnectionError(f"not a RESP reply: {line!r}")


def redis_command(
    port: int,
    *args: str | bytes,
    timeout: float = 5.0,
    user: tuple[str, str] | None = None,
) -> RespValue:
    """One command on a fresh connection to ``127.0.0.1:port`` over raw RESP (the venv has no
    Redis client), authenticated as ``user`` (name, password) when given. A refused
    connection raises ``ConnectionRefusedError``."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        if user is not None:
            sock.sendall(_encode("AUTH", *user))
        sock.sendall(_encode(*args))
        with sock.makefile("rb") as stream:
            if user is not None:
                _read_reply(stream)
            return _read_reply(stream)


def find_redis_server() -> Path:
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").is_file() else None
    )
    if found is None:
        raise RuntimeError(
            "redis-server not found (on PATH or /usr/bin): install it with "
            "`scripts/system-packages.sh redis-server` (as root)"
        )
    return Path(found)


GATEWAY_REDIS_USER = "gateway"
GATEWAY_REDIS_ACL = ("~agw:*", "&agw:*", "+@all", "-@dangerous")
"""What the gateway's Redis user may do: its own keys and channels, no administration
(docker-compose.replicas.yml gives its replicas the same user)."""


class RedisServer(_ServerProcess):
    """A private Redis on ``127.0.0.1:<port>``, database 0, nothing persisted: a restart
    starts empty, as a Redis that lost its memory does.

    Like a deployed one it refuses anyone who does not log in (the default user is off): the
    gateways connect as the ``gateway`` user, with ``GATEWAY_REDIS_ACL`` (``url`` carries its
    password); ``command`` runs as an ``operator`` user allowed everything (tests flush)."""

    name = "redis"

    def __init__(self, directory: Path, port: int | None = None) -> None:
        super().__init__(directory, port)
        self.binary = find_redis_server()
        self.password = secrets.token_hex(16)
        self._operator = ("operator", secrets.token_hex(16))

    @property
    def url(self) -> str:
        return f"redis://{GATEWAY_REDIS_USER}:{self.password}@127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    def _argv(self) -> list[str]:
        return [
            str(self.binary),
            *("--port", str(self.port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", str(self.directory)),
            *("--daemonize", "no", "--protected-mode", "yes", "--logfile", str(self.log_path)),
            *("--user", "default", "off"),
            *("--user", GATEWAY_REDIS_USER, "on", f">{self.password}", *GATEWAY_REDIS_ACL),
            *("--user", self._operator[0], "on", f">{self._operator[1]}", "~*", "&*", "+@all"),
        ]

    def _ready(self) -> bool:
        try:
            return self.command("PING", timeout=1.0) == "PONG"
        except (OSError, RedisError):
            return False

    def _logs(self) -> str:
        return _tail(self.output_path) + "\n" + _tail(self.log_path)

    def command(self, *args: str | bytes, timeout: float = 5.0) -> RespValue:
        return redis_command(self.port, *args, timeout=timeout, user=self._operator)

    @property
    def operator_url(self) -> str:
        """``redis://`` for the ``operator`` user (allowed everything): for a test that
        listens to keyspace notifications or kills the gateways' connections."""
        user, password = self._operator
        return f"redis://{user}:{password}@127.0.0.1:{self.port}/0"
