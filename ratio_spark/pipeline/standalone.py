"""A Spark standalone cluster on this machine: one master and N workers started from the installed pyspark
(``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), bound to 127.0.0.1 on free
ports, each worker with its own cores and memory. The tests run the pipeline and kill workers on it
(tests/end_to_end/test_standalone.py), the scale benchmark measures it, and

    python -m ratio_spark.pipeline.standalone [--workers 2 --cores 1 --memory 1536m] -- \\
        spark-submit ... jobs/run.py --conf conf/sample.yaml

runs a command against it (``{master}`` in the command becomes the master's URL) and stops it afterwards.

Each daemon runs in its own process group, so stopping (or SIGKILLing) a worker takes its executor and the
executor's Python workers with it: nothing is left behind.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from ratio_spark.core.errors import RunFailure

_DAEMON_MEMORY = "256m"  # the master and worker JVMs only schedule; executors get the worker's --memory


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise RunFailure("pyspark is not installed: the standalone cluster starts from its spark-class")
    return Path(spec.origin).parent


@dataclass
class Daemon:
    name: str
    args: list[str]
    log: Path
    process: subprocess.Popen | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal_group(self, sig: int) -> None:
        if self.process is not None:
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass


@dataclass
class StandaloneCluster:
    """``start()`` returns once every worker is registered ALIVE with the master; ``stop()`` ends them all.
    The daemons' environment has no PYTHONPATH: executors get the package as a cluster's do (``--py-files``)."""

    workers: int = 2
    cores: int = 1
    memory: str = "1536m"
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ratio-spark-standalone-")))
    port: int = 0
    ui_port: int = 0
    daemons: dict[str, Daemon] = field(default_factory=dict)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
        return {**env, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": _DAEMON_MEMORY, "SPARK_NO_DAEMONIZE": "1",
                "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}

    def _launch(self, daemon: Daemon) -> None:
        command = [str(spark_home() / "bin" / "spark-class"), *daemon.args]
        with daemon.log.open("ab") as log:
            daemon.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self._env(),
                                              start_new_session=True, stdin=subprocess.DEVNULL)

    def start(self, timeout: float = 120) -> "StandaloneCluster":
        self.root.mkdir(parents=True, exist_ok=True)
        self.port, self.ui_port = self.port or free_port(), self.ui_port or free_port()
        master = Daemon("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                                   str(self.port), "--webui-port", str(self.ui_port)], self.root / "master.log")
        self.daemons["master"] = master
        self._launch(master)
        for i in range(1, self.workers + 1):
            self.launch_worker(f"worker-{i}")
        try:
            self.wait_for_workers(self.workers, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def launch_worker(self, name: str) -> None:
        """Start (or start again, on fresh ports) the worker ``name``; ``wait_for_workers`` sees it register."""
        work = self.root / name
        work.mkdir(exist_ok=True)
        worker = Daemon(name, [
            "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
            "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", str(self.cores),
            "--memory", self.memory, "--work-dir", str(work)], self.root / f"{name}.log")
        self.daemons[name] = worker
        self._launch(worker)

    def state(self) -> dict:
        """The master's JSON status (its web UI's ``/json``): workers, their state, cores, applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as response:
            return json.load(response)

    def alive_workers(self) -> list[dict]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def wait_for_workers(self, count: int, timeout: float = 120) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not self.daemons["master"].alive:
                raise RunFailure(f"the standalone master exited at start: see {self.daemons['master'].log}")
            try:
                if len(self.alive_workers()) >= count:
                    return
            except OSError:
                pass  # the master's web UI is not up yet
            time.sleep(0.5)
        raise RunFailure(f"{count} standalone worker(s) did not register with {self.master_url} within {timeout:.0f} s: "
                         f"see the logs in {self.root}")

    def kill_worker(self, name: str) -> None:
        """SIGKILL the worker and everything in its process group: its executor and the executor's Python workers."""
        daemon = self.daemons[name]
        daemon.signal_group(signal.SIGKILL)
        daemon.process.wait()

    def stop(self) -> None:
        """SIGTERM every daemon's process group (workers first), then SIGKILL what is still there after 20 s."""
        order = sorted(self.daemons.values(), key=lambda d: d.name == "master")
        for daemon in order:
            daemon.signal_group(signal.SIGTERM)
        deadline = time.time() + 20
        for daemon in order:
            if daemon.process is None:
                continue
            try:
                daemon.process.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
            daemon.signal_group(signal.SIGKILL)  # the group may outlive its leader (an executor, a Python worker)
            daemon.process.wait()

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ratio_spark.pipeline.standalone",
        description="Start a local Spark standalone cluster, run a command against it ({master} in the command "
                    "becomes spark://127.0.0.1:<port>), stop the cluster.")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="1536m", help="memory per worker (its executors')")
    parser.add_argument("--keep", action="store_true", help="keep the daemons' logs and work folders afterwards")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command, e.g. spark-submit ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    with StandaloneCluster(args.workers, args.cores, args.memory) as cluster:
        print(f"standalone cluster: {cluster.master_url} ({args.workers} x {args.cores} core(s), {args.memory}); "
              f"master UI http://127.0.0.1:{cluster.ui_port}, logs in {cluster.root}", flush=True)
        command = [part.replace("{master}", cluster.master_url) for part in command]
        code = subprocess.call(command, env={**os.environ, "RATIO_SPARK_MASTER": cluster.master_url})
    if not args.keep:  # each executor's folder holds a copy of every jar (~280 MB)
        shutil.rmtree(cluster.root, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
