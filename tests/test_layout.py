"""The package layout keeps its promises: no import cycles, and the Python half imports without pyspark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ratio_spark

PACKAGE_ROOT = Path(ratio_spark.__file__).resolve().parent
# The plain-Python half (docs/architecture.md): it reads Delta tables with deltalake, never with a JVM. The
# command line and the stage contracts belong here too: `ratio-spark --help` must not start a JVM.
PYTHON_HALF = ("ratio_spark.core", "ratio_spark.evaluation", "ratio_spark.llm", "ratio_spark.silver",
               "ratio_spark.lexicon.loader", "ratio_spark.lexicon.matcher", "ratio_spark.lexicon.curation.llm",
               "ratio_spark.lexicon.curation.formats", "ratio_spark.lexicon.curation.build",
               "ratio_spark.lexicon.curation.patterns", "ratio_spark.cli", "ratio_spark.pipeline.contracts",
               "ratio_spark.humaneval",
               "ratio_spark.inspire", "ratio_spark.rerank", "ratio_spark.training")


def all_modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE_ROOT.rglob("*.py"):
        parts = ("ratio_spark", *path.relative_to(PACKAGE_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Module -> project modules it imports anywhere in its code (top level or inside functions); imports
    under ``if TYPE_CHECKING:`` are for annotations only and never run, so they are left out."""
    modules = all_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        type_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                     and getattr(block.test, "id", None) == "TYPE_CHECKING" for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in type_only:
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                           for alias in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_python_half_imports_without_pyspark():
    modules = sorted(m for m in all_modules() if m.startswith(PYTHON_HALF))
    assert {"ratio_spark.evaluation.runner", "ratio_spark.llm.client", "ratio_spark.cli.main",
            "ratio_spark.cli.preflight"} <= set(modules)
    assert "ratio_spark.inspire.service" in modules
    code = (
        "import importlib, importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'pyspark' or name.startswith(('pyspark.', 'delta.', 'sparknlp')) or name in ('delta', 'sparknlp'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "assert not any(m == 'pyspark' or m.startswith('pyspark.') for m in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_pyspark_block_works():
    """The check above would pass vacuously if the block did not block: a Spark-half module must fail."""
    code = (
        "import importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'pyspark' or name.startswith('pyspark.'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import ratio_spark.pipeline.mine\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0 and "blocked: pyspark" in done.stderr


def test_the_architecture_page_names_every_module():
    """docs/architecture.md's tree ("  pkg/   mod · mod") lists exactly the package's modules."""
    text = (PACKAGE_ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    tree = text.split("```text\nratio_spark/\n", 1)[1].split("```", 1)[0]
    listed, parents = set(), {}
    for line in tree.splitlines():
        depth = (len(line) - len(line.lstrip())) // 2
        package, _, modules = line.strip().partition("/")
        path = "ratio_spark." + ".".join([*(parents[d] for d in range(1, depth)), package])
        parents[depth] = package
        listed |= {path} | {f"{path}.{m.strip()}" for m in modules.split("·") if m.strip()}
    assert listed == set(all_modules()) - {"ratio_spark"}
