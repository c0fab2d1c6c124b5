"""Memory and latency of the bundled local LLM server with and without ``--logits_all`` (docs/llm.md).

llama-cpp-python's server keeps the logits of every prompt token by default: with gemma's 262,144-token
vocabulary that is n_ctx x 1 MB of resident memory and an output projection per prompt token.
``LocalLlamaServer`` passes ``--logits_all False``; this script measures one long request (a listwise-rerank
sized prompt) against a server started each way, ``--repeat`` times, and prints medians.

    PYTHONPATH=. .venv/bin/python benchmarks/local_server_logits.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import urllib.request

import ratio_spark.llm.local_server as local_server


def one_request(base_url: str, candidates: int) -> tuple[float, int]:
    prompt = "Rank these candidates.\n" + "\n".join(
        f"[{i}] The proposed method improves parsing accuracy on long sentences with a neural model number {i} "
        "trained on the treebank data." for i in range(1, candidates + 1))
    body = {"model": "gemma-3-270m", "messages": [{"role": "user", "content": prompt}], "max_tokens": 8,
            "temperature": 0}
    request = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    answer = json.loads(urllib.request.urlopen(request, timeout=1800).read())
    return time.perf_counter() - started, answer["usage"]["prompt_tokens"]


def measure(logits_all: bool, n_ctx: int, candidates: int) -> dict:
    """Start a server with --logits_all <logits_all> (appended after the class's own flags), time one request."""
    original = local_server.subprocess.Popen

    def popen(cmd, *args, **kwargs):
        return original([*cmd, "--logits_all", str(logits_all)], *args, **kwargs)

    local_server.subprocess.Popen = popen
    server = local_server.LocalLlamaServer(n_ctx=n_ctx)
    try:
        server.start()
        seconds, tokens = one_request(server.base_url, candidates)
        with open(f"/proc/{server.process.pid}/status") as status:
            rss_kb = int(next(line for line in status if line.startswith("VmRSS:")).split()[1])
    finally:
        server.stop()
        local_server.subprocess.Popen = original
    return {"seconds": seconds, "prompt_tokens": tokens, "rss_mb": rss_kb / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--candidates", type=int, default=60)
    args = parser.parse_args()
    results: dict[str, list[dict]] = {"True": [], "False": []}
    for _ in range(args.repeat):
        for flag in (True, False):  # interleaved, so both see the same load
            results[str(flag)].append(measure(flag, args.n_ctx, args.candidates))
    print(f"load average at the end: {os.getloadavg()}")
    for flag, runs in results.items():
        seconds = ", ".join("%.1f" % r["seconds"] for r in runs)
        print(f"--logits_all {flag}: median {statistics.median(r['seconds'] for r in runs):.1f} s, "
              f"{runs[0]['prompt_tokens']} prompt tokens, median RSS {statistics.median(r['rss_mb'] for r in runs):.0f} MB "
              f"(runs: {seconds} s)")


if __name__ == "__main__":
    main()
