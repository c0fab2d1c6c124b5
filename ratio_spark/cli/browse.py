"""browse: a read-only web page over a release and its results — queries by split, move, marker and text, each
query with its gold and every system's top 10, the statistics as plots

    ratio-spark browse --release data/release/sample --results results/sample        # http://127.0.0.1:8766/

Plain Python (no JVM): FastAPI + uvicorn on 127.0.0.1, as the human-evaluation app. See docs/benchmark-tables.md.
"""

from __future__ import annotations

import argparse

from ratio_spark.cli.common import port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--release", required=True, help="the release folder (release.root, written by export)")
    parser.add_argument("--results", action="append", default=[], metavar="FOLDER",
                        help="a results folder of `ratio-spark evaluate` (its runs/ show on each query's page); repeatable")
    parser.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (anything else exposes the page to the network)")
    parser.add_argument("--port", type=port, default=8766, help="default 8766; 0 takes a free port")


def run(args: argparse.Namespace) -> int:
    from ratio_spark.browse.app import serve
    from ratio_spark.browse.data import load_benchmark

    benchmark = load_benchmark(args.release, args.results)
    print(f"browse: {len(benchmark.queries)} queries of {args.release}, {len(benchmark.systems)} system run(s)", flush=True)

    def ready(url: str) -> None:
        print(f"serving the benchmark browser at {url}/", flush=True)
        print("stop with Ctrl+C; nothing is written", flush=True)

    serve(benchmark, host=args.host, port=args.port, on_ready=ready)
    return 0
