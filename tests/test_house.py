"""The house rules a reader of app/ relies on (docs/architecture.md): a module fits in one
sitting and a function on one screen. The import layers are checked by `make lint`
(lint-imports, the contracts in pyproject.toml)."""

import ast
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
