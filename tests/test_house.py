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


MAX_CLASS_LINES = 300
MAX_CLASS_METHODS = 25
# Bases that give a class no attributes of their own to read (others, such as a model
# base or an exception, do: a class with one is not checked for undeclared reads).
PLAIN_BASES = {"object", "ABC"}


class _Class:
    """A class of app/ as the AST shows it: what it declares, assigns and reads of itself."""

    def __init__(self, path: Path, node: ast.ClassDef):
        self.name = f"{path.relative_to(APP.parent)}::{node.name}"
        self.node = node
        self.bases = [ast.unparse(base).split("[")[0].rpartition(".")[2] for base in node.bases]
        self.methods = [
            n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        self.body_names = {method.name for method in self.methods} | {
            target.id
            for statement in node.body
            if isinstance(statement, ast.Assign | ast.AnnAssign)
            for target in (
                statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            )
            if isinstance(target, ast.Name)
        }
        self.assigned: set[str] = set()
        self.read: set[str] = set()
        # Declared for the class's subclasses too: named in its body, set in its __init__.
        self.initialised = set(self.body_names)
        for method in self.methods:
            if method.name in ("__init__", "__post_init__"):
                self.initialised |= _stored_on_self(method)
            for found in ast.walk(method):
                if (
                    isinstance(found, ast.Attribute)
                    and isinstance(found.value, ast.Name)
                    and found.value.id == "self"
                ):
                    (self.read if isinstance(found.ctx, ast.Load) else self.assigned).add(
                        found.attr
                    )

    @property
    def declared(self) -> set[str]:
        """Assigned in its own methods, or named in its body (annotated, a method)."""
        return self.assigned | self.body_names


def _stored_on_self(method: ast.AST) -> set[str]:
    return {
        found.attr
        for found in ast.walk(method)
        if isinstance(found, ast.Attribute)
        and isinstance(found.value, ast.Name)
        and found.value.id == "self"
        and not isinstance(found.ctx, ast.Load)
    }


def _classes() -> dict[str, list[_Class]]:
    """Every class of app/, by its bare name (a base is found by that name)."""
    found: dict[str, list[_Class]] = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(_Class(path, node))
    return found


def _lineage(cls: _Class, classes: dict[str, list[_Class]]) -> list[_Class] | None:
    """The class and its bases in app/, or None when a base is not a plain one of app/
    (a library's or a name that two classes share)."""
    lineage = [cls]
    for base in cls.bases:
        if base in PLAIN_BASES:
            continue
        if len(classes.get(base, [])) != 1:
            return None
        above = _lineage(classes[base][0], classes)
        if above is None:
            return None
        lineage += above
    return lineage


def test_no_class_is_bigger_than_a_subject():
    """Counted with the bases of app/ it is made of: mixins are one class in pieces."""
    classes = _classes()
    big = {}
    for same in classes.values():
        for cls in same:
            lineage = _lineage(cls, classes) or [cls]
            lines = sum(c.node.end_lineno - c.node.lineno + 1 for c in lineage)
            methods = len({m.name for c in lineage for m in c.methods})
            if lines > MAX_CLASS_LINES or methods > MAX_CLASS_METHODS:
                big[cls.name] = (lines, methods)
    assert big == {}, (
        f"split these (at most {MAX_CLASS_LINES} lines, {MAX_CLASS_METHODS} methods): "
        "(lines, methods)"
    )


def _shared_state(lineage: list[_Class], classes: dict[str, list[_Class]]) -> dict[str, list]:
    """Attributes two classes of one lineage both set (or one sets and the other names),
    unless one is a base of the other that declares them for it (body or `__init__`)."""
    found = {}
    for one in lineage:
        for other in lineage:
            if other is one:
                continue
            both = one.assigned & (other.assigned | other.body_names)
            if other in (_lineage(one, classes) or []):
                both -= other.initialised
            if one in (_lineage(other, classes) or []):
                both -= one.initialised
            if both:
                found[f"{one.name} sets what {other.name} does"] = sorted(both)
    return found


def test_a_class_owns_the_attributes_it_sets_and_reads():
    """A class sets only what it declares, or what a base declares for it (in its body or
    its `__init__`), and reads only what it or its bases declare: no mixins sharing state
    that a subclass sets up for them."""
    classes = _classes()
    shared, undeclared = {}, {}
    for same in classes.values():
        for cls in same:
            lineage = _lineage(cls, classes)
            shared.update(_shared_state(lineage or [cls], classes))
            if lineage is not None:
                missing = sorted(cls.read - set().union(*(c.declared for c in lineage)))
                if missing:
                    undeclared[cls.name] = missing
    assert shared == {}, "set each attribute in the one class that declares it"
    assert undeclared == {}, "declare these in the class (or a base) that reads them"
