"""The house rules a reader of app/ relies on (docs/architecture.md): a module fits in one
sitting and a function on one screen, and no modules import each other. The import
layers are checked by `make lint` (lint-imports, the contracts in pyproject.toml)."""

import ast
import graphlib
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def _modules():
    return sorted(APP.rglob("*.py"))


def test_no_module_is_longer_than_a_sitting():
    long = {
        str(path.relative_to(APP.parent)): count
        for path in _modules()
        if (count := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"split these by subject (at most {MAX_MODULE_LINES} lines)"


def test_no_function_is_longer_than_a_screen():
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(APP.parent)}::{node.name}"] = length
    assert long == {}, f"split these (at most {MAX_FUNCTION_LINES} lines, def to end)"


def _module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, known: set[str]) -> set[str]:
    """Every app module `path` imports anywhere: at the top, inside a function, or under
    `if TYPE_CHECKING:` (a circle a type checker or a lazy import hides is still one)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def test_no_modules_import_each_other():
    """A circle, even one broken by a lazy import, means two modules are one subject."""
    paths = {_module_name(path): path for path in _modules()}
    known = set(paths)
    graph = {name: _imported_modules(path, known) - {name} for name, path in paths.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as circle:
        raise AssertionError(f"these modules import each other: {circle.args[1]}") from None
