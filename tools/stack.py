"""The distributed stack on one machine, for trying it: `make up` and `make down`.

    python tools/stack.py up [--web 2] [--workers 2] [--port 8000] [--dir .stack]
    python tools/stack.py down [--dir .stack]
    python tools/stack.py status [--dir .stack]

`up` starts PostgreSQL 15 and Redis from the system packages with their data under the
folder, migrates, seeds the demo (`manage.py seed_demo`) and collects the static files, then
starts Celery workers, exactly one Celery beat (django-celery-beat's DatabaseScheduler) and
the web processes (uvicorn, one port each: a real deployment puts a load balancer in front),
with the production settings, the simulated cluster backend and plain HTTP. It returns once
every web port answers. `down` stops them all and keeps the data. Both are safe to repeat:
what runs is left running, what is stopped stays stopped.

The folder holds postgres/ and redis/ (data), logs/ (one file per process) and pids/ (each
process's pid and start time, so a reused pid is never taken for ours), and stack.json: the
ports and secret key of the first `up`, kept for the next.

Standard library only (Django runs in the processes it starts), so `make down` needs no
virtualenv; bench/distributed.py starts and stops stacks of its own through `up` and `down`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.servers import (  # noqa: E402
    database_create,
    give_to_postgres,
    listening,
    postgres_available,
    postgres_init,
    postgres_running,
    postgres_start,
    postgres_stop,
    postgres_url,
    redis_args,
    redis_available,
    wait_for_port,
)

DEFAULT_DIR = ROOT / ".stack"
HEALTH_PATH = "/login/"
# How long a process may take to stop on SIGTERM before its process group is killed.
STOP_SECONDS = 20.0


@dataclass
class Config:
    """What the first `up` chose; later ones reuse it unless told otherwise."""

    web: int = 2
    workers: int = 2
    port: int = 8000
    pg_port: int = 15432
    redis_port: int = 16379
    start_delay: float = 30.0
    secret_key: str = ""

    def web_ports(self) -> list[int]:
        """One port per web process, counting up from `port`."""
        return [self.port + i for i in range(self.web)]


class Stack:
    """The processes and data of one stack folder."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder.resolve()
        self.pg_root = self.dir / "postgres"
        self.pg_data = self.pg_root / "data"
        self.pg_sockets = self.pg_root / "sock"
        self.redis_data = self.dir / "redis"
        self.logs = self.dir / "logs"
        self.pids = self.dir / "pids"
        self.config_file = self.dir / "stack.json"

    # Configuration

    def config(self) -> Config | None:
        """The saved configuration, if a stack was ever brought up here."""
        if not self.config_file.exists():
            return None
        return Config(**json.loads(self.config_file.read_text()))

    def save(self, config: Config) -> None:
        """Keep the configuration (the secret key in it) readable by us alone."""
        self.config_file.write_text(json.dumps(asdict(config), indent=2) + "\n")
        self.config_file.chmod(0o600)

    def env(self, config: Config) -> dict[str, str]:
        """The environment of every Django process: production settings, simulated cluster."""
        path = os.environ.get("PYTHONPATH", "")
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), path) if p),
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "console.settings.production",
            "DATABASE_URL": postgres_url(config.pg_port),
            "REDIS_URL": f"redis://127.0.0.1:{config.redis_port}/0",
            "SECRET_KEY": config.secret_key,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            # Plain HTTP on loopback; behind a TLS-terminating load balancer this stays on.
            "SECURE_SSL_REDIRECT": "0",
            "TIDEPOOL_RUNNER": "celery",
            "TIDEPOOL_BACKEND": "simulated",
            "SIM_START_DELAY": f"{config.start_delay:g}",
        }

    # Processes of our own: a pid file holds "pid starttime"

    def _pid_file(self, name: str) -> Path:
        return self.pids / f"{name}.pid"

    def pid(self, name: str) -> int | None:
        """The pid of our process `name` while it runs (the same start time as recorded)."""
        try:
            pid_text, started = self._pid_file(name).read_text().split()
            pid = int(pid_text)
        except (OSError, ValueError):
            return None
        return pid if _start_time(pid) == started else None

    def running(self) -> dict[str, int]:
        """Each recorded process that still runs, by name."""
        if not self.pids.exists():
            return {}
        names = sorted(p.stem for p in self.pids.glob("*.pid"))
        return {name: pid for name in names if (pid := self.pid(name)) is not None}

    def spawn(self, name: str, args: list[str], env: dict[str, str]) -> int:
        """Start a process in a session of its own, its output appended to logs/NAME.log."""
        log = self.logs / f"{name}.log"
        with log.open("ab") as out:
            out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(args)}\n".encode())
            out.flush()
            proc = subprocess.Popen(
                args,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # Right after fork, /proc may not show the start time yet on a busy machine.
        started = None
        for _ in range(50):
            started = _start_time(proc.pid)
            if started:
                break
            time.sleep(0.01)
        self._pid_file(name).write_text(f"{proc.pid} {started}\n")
        return proc.pid

    def stop(self, name: str) -> bool:
        """SIGTERM the process's group, SIGKILL it after STOP_SECONDS; whether it was running."""
        pid = self.pid(name)
        if pid is not None:
            _signal_group(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_SECONDS
            while self.pid(name) is not None and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.pid(name) is not None:  # hung: the whole group goes (a worker's pool too)
                _signal_group(pid, signal.SIGKILL)
        self._pid_file(name).unlink(missing_ok=True)
        return pid is not None

    # The servers

    def start_postgres(self, config: Config) -> str:
        """initdb on the first `up`, then start the server unless it runs."""
        if postgres_running(self.pg_data):
            return "running"
        fresh = not (self.pg_data / "PG_VERSION").exists()
        self.pg_sockets.mkdir(parents=True, exist_ok=True)
        log = self.logs / "postgres.log"
        log.touch()
        give_to_postgres(self.pg_root, self.pg_sockets, log)
        if os.geteuid() == 0:  # the postgres user must get through the folder (mkdtemp's: 0700)
            self.dir.chmod(self.dir.stat().st_mode | 0o111)
        _port_free(config.pg_port, "PostgreSQL", "--pg-port")
        try:
            if fresh:
                postgres_init(self.pg_data)
            postgres_start(self.pg_data, port=config.pg_port, sockets=self.pg_sockets, log=log)
            if fresh:
                database_create(config.pg_port)
        except subprocess.CalledProcessError as error:
            said = (error.stderr or b"").decode(errors="replace").strip()
            raise StackError(f"{' '.join(map(str, error.cmd))} failed: {said}", log) from None
        return "initialised and started" if fresh else "started"

    def start_redis(self, config: Config) -> str:
        """Redis with snapshots in redis/, unless it runs."""
        if self.pid("redis") is not None:
            return "running"
        _port_free(config.redis_port, "Redis", "--redis-port")
        self.redis_data.mkdir(exist_ok=True)
        self.spawn("redis", redis_args(config.redis_port, data=self.redis_data), dict(os.environ))
        if not wait_for_port(config.redis_port, timeout=15):
            raise StackError("Redis did not start", self.logs / "redis.log")
        return "started"

    def manage(self, config: Config, *args: str) -> str:
        """Run a manage.py command, its output kept in logs/setup.log; its output."""
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env(config),
            capture_output=True,
            text=True,
        )
        with (self.logs / "setup.log").open("a") as log:
            log.write(f"--- manage.py {' '.join(args)}\n{done.stdout}{done.stderr}")
        if done.returncode != 0:
            raise StackError(f"manage.py {' '.join(args)} failed", self.logs / "setup.log")
        return done.stdout

    def start_django(self, config: Config) -> dict[str, str]:
        """Workers, beat and web processes that do not run yet; what each did."""
        env = self.env(config)
        celery = [sys.executable, "-m", "celery", "-A", "console"]
        wanted: dict[str, list[str]] = {}
        ports: dict[str, int] = {}
        for i in range(1, config.workers + 1):
            # One task at a time each (a cycle holds the cycle lock anyway).
            wanted[f"worker{i}"] = [
                *celery,
                "worker",
                "-n",
                f"worker{i}@%h",
                "--loglevel=INFO",
                "--concurrency=1",
            ]
        # Exactly one beat, whatever the number of workers: two would fire each task twice.
        wanted["beat"] = [
            *celery,
            "beat",
            "--loglevel=INFO",
            "--scheduler=django_celery_beat.schedulers:DatabaseScheduler",
        ]
        for i, port in enumerate(config.web_ports(), start=1):
            ports[f"web{i}"] = port
            wanted[f"web{i}"] = [
                sys.executable,
                "-m",
                "uvicorn",
                "console.asgi:application",
                "--loop",
                "uvloop",
                "--http",
                "httptools",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--timeout-graceful-shutdown",
                "5",
                # Frames are small JSON: compressing each costs CPU that delivery needs.
                "--ws-per-message-deflate",
                "false",
            ]
        done = {}
        # Processes beyond the counts asked for this time (an earlier `up --web 3`) stop.
        for name in self.running():
            if name.startswith(("web", "worker")) and name not in wanted:
                self.stop(name)
                done[name] = "stopped (not asked for)"
        for name, args in wanted.items():
            if self.pid(name) is not None:
                done[name] = "running"
                continue
            if name in ports:
                _port_free(ports[name], f"web process {name}", "--port")
            self.spawn(name, args, env)
            done[name] = "started"
        return done

    def wait_healthy(self, config: Config, *, timeout: float = 120) -> None:
        """Until each web port answers GET /login/ with 200; fail if a process dies."""
        deadline = time.monotonic() + timeout
        pending = {f"web{i}": port for i, port in enumerate(config.web_ports(), start=1)}
        while pending:
            for name, port in list(pending.items()):
                if _answers(port):
                    del pending[name]
            for name in [*pending, "beat", *(f"worker{i}" for i in range(1, config.workers + 1))]:
                if self.pid(name) is None:
                    raise StackError(f"{name} exited", self.logs / f"{name}.log")
            if pending and time.monotonic() > deadline:
                name = next(iter(pending))
                raise StackError(f"{name} did not answer in {timeout:.0f} s", self.logs)
            time.sleep(0.3)


class StackError(Exception):
    """A step of `up` failed; `where` is the log (or folder) that says why."""

    def __init__(self, message: str, where: Path) -> None:
        super().__init__(message)
        self.where = where


def up(stack: Stack, asked: dict[str, object]) -> Config:
    """Bring the whole stack up (what runs already is kept); the configuration in force."""
    if not (postgres_available() and redis_available()):
        raise SystemExit(
            "PostgreSQL 15 and redis-server are needed (apt-get install postgresql redis-server)"
        )
    for folder in (stack.dir, stack.logs, stack.pids):
        folder.mkdir(parents=True, exist_ok=True)
    config = stack.config() or Config(secret_key=secrets.token_urlsafe(50))
    for key, value in asked.items():
        if value is not None:
            setattr(config, key, value)
    stack.save(config)

    print(f"postgres: {stack.start_postgres(config)} (127.0.0.1:{config.pg_port})")
    print(f"redis:    {stack.start_redis(config)} (127.0.0.1:{config.redis_port})")
    stack.manage(config, "migrate", "--noinput")
    seeded = stack.manage(config, "seed_demo")
    # The production settings serve hashed, compressed files (WhiteNoise's manifest).
    stack.manage(config, "collectstatic", "--noinput")
    for name, what in stack.start_django(config).items():
        print(f"{name + ':':9} {what}")
    stack.wait_healthy(config)

    print()
    for port in config.web_ports():
        print(f"  http://127.0.0.1:{port}/")
    print("Each web process serves the same console; a real deployment puts a load balancer")
    print(
        "in front of them. The cluster is simulated: pods start "
        f"{config.start_delay:g} s after they are placed."
    )
    print(seeded.split("\n", 1)[-1].rstrip())  # seed_demo's list of logins
    print(f"Logs: {stack.logs}/   Stop: make down (the data in {stack.dir} stays)")
    return config


def down(stack: Stack) -> list[str]:
    """Stop every process of the stack, web first, servers last; the names that were running."""
    stopped = []
    names = sorted(stack.running(), key=lambda n: (not n.startswith("web"), n == "redis", n))
    for name in names:
        if stack.stop(name):
            stopped.append(name)
    if postgres_running(stack.pg_data):
        postgres_stop(stack.pg_data)
        stopped.append("postgres")
    return stopped


def status(stack: Stack) -> dict[str, object]:
    """What runs, with pids; PostgreSQL's state from pg_ctl."""
    config = stack.config()
    return {
        "dir": str(stack.dir),
        "processes": stack.running(),
        "postgres": postgres_running(stack.pg_data),
        "web": [f"http://127.0.0.1:{p}/" for p in (config.web_ports() if config else [])],
    }


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc), or None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == "Z":  # exited, not yet reaped
        return None
    return fields[19]


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the process group our process leads (it was started in a session of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _port_free(port: int, what: str, flag: str) -> None:
    """Refuse to start on a port something else already listens on."""
    if listening(port):
        raise SystemExit(f"Port {port} for {what} is taken by another program; choose {flag}.")


def _answers(port: int) -> bool:
    """GET /login/ on the port answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{HEALTH_PATH}", timeout=5) as r:
            return int(r.status) == 200
    except (OSError, urllib.error.URLError):
        return False


def log_tail(where: Path, lines: int = 30) -> str:
    """The end of a log, or a pointer to the folder."""
    if where.is_file():
        return "\n".join(where.read_text(errors="replace").splitlines()[-lines:])
    return f"(see the logs in {where})"


def main(argv: list[str] | None = None) -> int:
    """up, down or status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="data, logs and pids")
    parser.add_argument("--web", type=int, help="web processes (2)")
    parser.add_argument("--workers", type=int, help="Celery workers (2)")
    parser.add_argument("--port", type=int, help="first web port (8000); the next ones follow")
    parser.add_argument("--pg-port", type=int, help="PostgreSQL's port (15432)")
    parser.add_argument("--redis-port", type=int, help="Redis's port (16379)")
    parser.add_argument("--start-delay", type=float, help="simulated pod start delay, s (30)")
    args = parser.parse_args(argv)
    stack = Stack(args.dir)
    if args.command == "down":
        stopped = down(stack)
        print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
        print(f"The data stays in {stack.dir}; `make up` starts it again.")
        return 0
    if args.command == "status":
        print(json.dumps(status(stack), indent=2))
        return 0
    asked = {
        "web": args.web,
        "workers": args.workers,
        "port": args.port,
        "pg_port": args.pg_port,
        "redis_port": args.redis_port,
        "start_delay": args.start_delay,
    }
    try:
        up(stack, asked)
    except StackError as error:
        print(f"make up: {error}\n{log_tail(error.where)}", file=sys.stderr)
        print("What did start still runs: `make down` stops it.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
