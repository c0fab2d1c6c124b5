"""The package layout keeps its promises: no import cycles, core/ at the bottom, and the Python half imports
without pyspark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ratio_spark

PACKAGE_ROOT = Path(ratio_spark.__file__).resolve().parent
# The plain-Python half (docs/architecture.md): it reads Delta tables with deltalake, never with a JVM. The
# command line and the stage declarations belong here too: `ratio-spark --help` must not start a JVM.
PYTHON_HALF = ("ratio_spark.core", "ratio_spark.evaluation", "ratio_spark.llm", "ratio_spark.silver",
               "ratio_spark.lexicon.loader", "ratio_spark.lexicon.matcher", "ratio_spark.lexicon.curation.llm",
               "ratio_spark.lexicon.curation.formats", "ratio_spark.lexicon.curation.build",
               "ratio_spark.lexicon.curation.patterns", "ratio_spark.cli", "ratio_spark.pipeline.stage", "ratio_spark.pipeline.stages",
               "ratio_spark.pipeline.settings", "ratio_spark.config",
               "ratio_spark.humaneval", "ratio_spark.browse",
               "ratio_spark.inspire", "ratio_spark.rerank", "ratio_spark.training")


def all_modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE_ROOT.rglob("*.py"):
        parts = ("ratio_spark", *path.relative_to(PACKAGE_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def import_graph(type_only_too: bool = False) -> dict[str, set[str]]:
    """Module -> project modules it imports anywhere in its code (top level or inside functions). Imports
    under ``if TYPE_CHECKING:`` are for annotations only and never run: left out, unless ``type_only_too``
    (a module that names another's type still depends on it, for a reader)."""
    modules = all_modules()
    return {name: imports_of(name, path.read_text(), modules, type_only_too) for name, path in modules.items()}


def imports_of(name: str, source: str, modules: dict[str, Path], type_only_too: bool = False) -> set[str]:
    """The project modules that the code ``source`` of module ``name`` imports (see ``import_graph``)."""
    tree = ast.parse(source, name)
    type_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                 and getattr(block.test, "id", None) == "TYPE_CHECKING" for n in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only and not type_only_too:
            continue
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                       for alias in node.names]
        found |= {target for target in targets if target in modules and target != name}
    return found


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


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Top-level package (``ratio_spark.cli``, ``ratio_spark.lexicon`` with ``lexicon.curation``, ...) -> the
    top-level packages its modules import: a cycle here means two packages that each need the other."""
    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    packages: dict[str, set[str]] = {top(name): set() for name in graph}
    for name, targets in graph.items():
        packages[top(name)].update(top(t) for t in targets if top(t) != top(name))
    return packages


def in_core(module: str) -> bool:
    return module == "ratio_spark.core" or module.startswith("ratio_spark.core.")


def upward_from_core(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each core/ module that imports a project module outside core/ (the package's root included) -> those."""
    upward = {name: sorted(t for t in targets if not in_core(t)) for name, targets in graph.items() if in_core(name)}
    return {name: targets for name, targets in upward.items() if targets}


def test_no_import_cycle():
    """Between modules, type-only imports included; between top-level packages."""
    graph = import_graph(type_only_too=True)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
    cycle = find_cycle(package_graph(graph))
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle)


def test_the_cycle_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    # Two packages whose modules import each other, though no module imports itself back.
    modules = {"ratio_spark.x.a": {"ratio_spark.y.b"}, "ratio_spark.y.c": {"ratio_spark.x.d"},
               "ratio_spark.y.b": set(), "ratio_spark.x.d": set()}
    assert find_cycle(modules) is None
    assert find_cycle(package_graph(modules)) == ["ratio_spark.x", "ratio_spark.y", "ratio_spark.x"]


def test_core_imports_nothing_above_it():
    """core/ is the ground floor: none of its modules imports another package of the project, at the top, inside
    a function or for a type only (``ratio_spark.config`` composes the packages' sections above them all)."""
    assert upward_from_core(import_graph(type_only_too=True)) == {}


def test_the_core_check_finds_an_upward_import():
    """An import from core/ to a package above it fails the check, also when it hides inside a function."""
    modules = all_modules()
    source = ("from ratio_spark.core.errors import UserError\n\n"
              "def f():\n    from ratio_spark.pipeline.settings import MiningConfig\n")
    graph = {"ratio_spark.core.new": imports_of("ratio_spark.core.new", source, modules),
             "ratio_spark.core.errors": set(), "ratio_spark.pipeline.settings": {"ratio_spark.core.errors"}}
    assert upward_from_core(graph) == {"ratio_spark.core.new": ["ratio_spark.pipeline.settings"]}
    assert upward_from_core({"ratio_spark.core.new": {"ratio_spark.core.errors"}}) == {}
    assert upward_from_core({"ratio_spark.core.new": {"ratio_spark"}, "ratio_spark.corex": {"ratio_spark.cli"}}) == {
        "ratio_spark.core.new": ["ratio_spark"]}


def test_the_batch_runner_uses_only_the_public_surface_of_the_client():
    """llm/batch.py is handed the client that owns it; reaching into its private members would tie the two
    modules into one."""
    path = PACKAGE_ROOT / "llm" / "batch.py"
    private = sorted({f"{ast.unparse(node.value)}.{node.attr}" for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                      and ast.unparse(node.value) in ("client", "self.client")})
    assert private == []


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
    """docs/architecture.md's tree ("  pkg/   mod · mod", or "  mod.py" for a module beside the packages) lists
    exactly the package's modules."""
    text = (PACKAGE_ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    tree = text.split("```text\nratio_spark/\n", 1)[1].split("```", 1)[0]
    listed, parents = set(), {}
    for line in tree.splitlines():
        depth = (len(line) - len(line.lstrip())) // 2
        if line.strip().endswith(".py"):
            listed.add("ratio_spark." + ".".join([*(parents[d] for d in range(1, depth)), line.strip()[:-3]]))
            continue
        package, _, modules = line.strip().partition("/")
        path = "ratio_spark." + ".".join([*(parents[d] for d in range(1, depth)), package])
        parents[depth] = package
        listed |= {path} | {f"{path}.{m.strip()}" for m in modules.split("·") if m.strip()}
    assert listed == set(all_modules()) - {"ratio_spark"}


def test_markdown_tables_are_written_one_way():
    """Every Markdown table comes from core.markdown.markdown_table: no other module writes a |---| rule."""
    writers = {p.relative_to(PACKAGE_ROOT).as_posix() for p in PACKAGE_ROOT.rglob("*.py")
               if "---|" in p.read_text(encoding="utf-8")}
    assert writers == {"core/markdown.py"}


def test_every_declared_dependency_is_imported():
    """A runtime dependency of pyproject.toml that no module imports is dead weight in every install (nltk was:
    its tokenisers need data from a hub this project may not fetch, and PyStemmer, bm25s and pyinflect already do
    its stemming, stopwords and inflection)."""
    import re
    import tomllib
    from importlib.metadata import packages_distributions

    declared = tomllib.loads((PACKAGE_ROOT.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in declared}
    imported = set()
    for path in PACKAGE_ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    distributions = packages_distributions()
    used = {d.lower().replace("_", "-") for module in imported for d in distributions.get(module, [])}
    assert names - used == set()


def test_the_architecture_page_lists_every_drop_reason_of_segment_and_mine():
    """docs/architecture.md's table of drops names each reason of core.schema.Reason for the stages it lists in
    full (the others point to their reader or to docs/benchmark-tables.md), and no code that is not one."""
    import re

    from ratio_spark.core.schema import reasons_of

    text = (PACKAGE_ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): set(re.findall(r"`([a-z_]+)`", line.split("|")[3]))
            for line in text.splitlines() if line.startswith("| ") and line.count("|") == 4}
    for stage in ("segment", "mine"):
        assert rows[stage] == set(reasons_of(stage)), stage
