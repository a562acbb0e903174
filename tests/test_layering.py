"""The package's architecture as a test: stages import only from earlier stages, no import cycle,
and imports at module level unless a comment says why not (the rule of ``negutils/__init__.py``)."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import negutils

PACKAGE = Path(negutils.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def stage(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    if top not in negutils.STAGES:
        raise AssertionError(f"{module} belongs to no stage of negutils.STAGES {negutils.STAGES}")
    return negutils.STAGES.index(top)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.body:
                lines.update(range(child.lineno, child.end_lineno + 1))
    return lines


def imports(path: Path, me: str | None = None) -> list[tuple[str, int, bool]]:
    """(imported negutils module, line, at module level) for every import in the file ``path``,
    module ``me`` (by default its place in the package), except those under ``if TYPE_CHECKING``
    (annotations only, never executed)."""
    tree = ast.parse(path.read_text())
    me = me or module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    top_level = {id(node) for node in tree.body}
    skip = _type_checking_lines(tree)
    found = []
    for node in ast.walk(tree):
        if not hasattr(node, "lineno") or node.lineno in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "negutils":
                origin = node.module
            else:
                continue
            for alias in node.names:   # `from . import x` names a module, `from .x import f` a symbol
                candidate = f"{origin}.{alias.name}"
                target = candidate if (PACKAGE.parent / (candidate.replace(".", "/") + ".py")).exists() \
                    or (PACKAGE.parent / candidate.replace(".", "/")).is_dir() else origin
                found.append((target, node.lineno, id(node) in top_level))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "negutils":
                    found.append((alias.name, node.lineno, id(node) in top_level))
    return found


MODULE_FILES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_belongs_to_a_stage():
    for path in MODULE_FILES:
        if path.parent != PACKAGE or path.name != "__init__.py":
            stage(module_name(path))


def upward_imports(path: Path, me: str | None = None) -> list[str]:
    me = me or module_name(path)
    return [f"line {line}: {target}" for target, line, _ in imports(path, me)
            if target != "negutils" and stage(target) > stage(me)]


@pytest.mark.parametrize("path", [p for p in MODULE_FILES if p != PACKAGE / "__init__.py"],
                         ids=lambda p: module_name(p))
def test_imports_point_to_earlier_stages(path):
    me = module_name(path)
    upward = upward_imports(path)
    assert not upward, f"{me} ({negutils.STAGES[stage(me)]}) imports from a later stage: {upward}"


def test_no_import_cycle():
    graph = {module_name(p): {t for t, _, _ in imports(p) if t != module_name(p)} for p in MODULE_FILES}
    state: dict[str, int] = {}

    def visit(node, trail):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_function_level_imports_say_why():
    unexplained = []
    for path in MODULE_FILES:
        lines = path.read_text().splitlines()
        for target, line, at_top in imports(path):
            if not at_top and "#" not in lines[line - 1]:
                unexplained.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not unexplained, "imports inside functions need a comment saying why:\n" + "\n".join(unexplained)


def test_the_layering_check_catches_an_upward_import_and_reads_relative_levels(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from ..methods.ktn import KtnScorer\nfrom . import cache\n"
                     "def f():\n    from ..world.coco import CocoSplit\n")
    me = "negutils.core.probe"
    assert imports(probe, me) == [("negutils.methods.ktn", 1, True), ("negutils.core.cache", 2, True),
                                  ("negutils.world.coco", 4, False)]
    assert upward_imports(probe, me) == ["line 1: negutils.methods.ktn", "line 4: negutils.world.coco"]


def negutils_imports(text: str) -> dict[str, list[str]]:
    """{``negutils`` or ``negutils.<module>``: the names a chapter's code imports from it}."""
    found: dict[str, list[str]] = {}
    for module, names in re.findall(r"^from (negutils\S*) import (\([^)]*\)|[^\n]*)", text, re.M):
        found.setdefault(module, []).extend(n.strip() for n in names.strip("()").split(",") if n.strip())
    return found


def test_every_chapter_imports_a_few_negutils_namespaces_not_dozens_of_names():
    """A chapter reads like d2l's: ``from negutils import methods, plots, report`` and calls through them;
    the only names it imports from a module are the session's and an aliased module."""
    stages = set(negutils.STAGES)
    for notebook in sorted((PACKAGE.parent / "notebooks").glob("[0-9][0-9]_*.md")):
        imports = negutils_imports(notebook.read_text())
        namespaces = imports.pop("negutils", [])
        assert namespaces and set(namespaces) <= stages, (notebook.name, namespaces)
        names = [n for found in imports.values() for n in found]
        assert sum(map(len, (namespaces, names))) <= 7, (notebook.name, imports)
        assert set(imports) <= {"negutils.session", "negutils.diagnosis"}, (notebook.name, sorted(imports))


def test_the_namespace_check_reads_each_import_form():
    text = ("from negutils import methods, plots\nfrom negutils.session import (open_session,\n"
            "    write_results)\nfrom negutils.diagnosis import bag_of_concepts as boc\n")
    assert negutils_imports(text) == {"negutils": ["methods", "plots"],
                                      "negutils.session": ["open_session", "write_results"],
                                      "negutils.diagnosis": ["bag_of_concepts as boc"]}


def test_a_stage_package_exports_only_what_the_chapters_use():
    """``negutils.<stage>``'s ``__all__`` is the set of names the chapters call through it, no more."""
    used: dict[str, set[str]] = {}
    for notebook in sorted((PACKAGE.parent / "notebooks").glob("[0-9][0-9]_*.md")):
        text = notebook.read_text()
        for stage_name in negutils_imports(text).get("negutils", []):
            code = "\n".join(re.findall(r"```\{code-cell\}[^\n]*\n(.*?)\n```", text, re.S))
            used.setdefault(stage_name, set()).update(re.findall(rf"(?<![\w.]){stage_name}\.(\w+)", code))
    for stage_name in negutils.STAGES:
        package = PACKAGE / stage_name / "__init__.py"
        if not package.exists():
            continue
        exported = set(importlib.import_module(f"negutils.{stage_name}").__all__)
        assert exported == used.get(stage_name, set()), (stage_name, sorted(exported ^ used.get(stage_name, set())))
