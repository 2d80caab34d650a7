"""A scan of the package's classes for "parts, not stacks" (issue 34, DESIGN.md).

A class that needs another's behaviour owns it as a part; it does not stack on it. The scan finds what a stack
leaves behind:

- an upward reference: a method of a class uses ``self.X`` that neither the class nor any class it extends
  defines (a method, a class attribute with a value, or ``self.X = ...`` in one of its methods), so only a class
  that extends it (or a sibling mixin) can provide it. An annotation without a value is a declaration, not a
  definition, except in record classes (dataclasses, pydantic models, named tuples, typed dicts, protocols, enums)
  where the framework makes it a field;
- a stub of another half: a method whose whole body raises ``NotImplementedError`` (or is ``...``) in a class that
  is neither a protocol nor abstract, or an ``if TYPE_CHECKING:`` block inside a class body;
- a private class (``_Name``) imported from another module.

It reads the source (ast) and imports the modules (for the bases' method resolution order); it runs nothing else.
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import pkgutil
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, is_dataclass
from functools import cache
from pathlib import Path

import console

PACKAGE = "console"
ROOT = Path(console.__file__).parent


@dataclass(frozen=True)
class Finding:
    where: str  # module:Class.method or module
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def modules() -> list[str]:
    names = [PACKAGE]
    for info in pkgutil.walk_packages([str(ROOT)], prefix=f"{PACKAGE}."):
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return sorted(names)


def package_classes() -> list[type]:
    found: dict[str, type] = {}
    for name in modules():
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and obj.__module__ == name:
                found[f"{name}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


def ours(cls: type) -> bool:
    return cls.__module__ == PACKAGE or cls.__module__.startswith(f"{PACKAGE}.")


class _Classes(ast.NodeVisitor):
    """Every class of a module's tree by its qualified name (the first of a name, as inspect.getsource finds it)."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.found: dict[str, ast.ClassDef] = {}

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack += [node.name, "<locals>"]
        self.generic_visit(node)
        del self.stack[-2:]

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.stack.append(node.name)
        self.found.setdefault(".".join(self.stack), node)
        self.generic_visit(node)
        self.stack.pop()


@cache
def _module_classes(module: str) -> dict[str, ast.ClassDef]:
    """The classes of ``module``'s source, its file parsed once: inspect.getsource parses the whole module again for
    each class (Python 3.11's class finder), which made most of the scan's time."""
    try:
        path = inspect.getsourcefile(sys.modules[module])
        tree = ast.parse(Path(path).read_text(encoding="utf-8")) if path else None
    except (KeyError, OSError, TypeError, SyntaxError):
        return {}
    if tree is None:
        return {}
    finder = _Classes()
    finder.visit(tree)
    return finder.found


@cache
def class_node(cls: type) -> ast.ClassDef | None:
    if (node := _module_classes(cls.__module__).get(cls.__qualname__)) is not None:
        return node
    try:  # not found so (a class made at run time): as inspect finds its source
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return None
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            return node
    return None


def _is_record(cls: type) -> bool:
    if is_dataclass(cls) or issubclass(cls, (tuple, dict, enum.Enum)):
        return True
    if getattr(cls, "_is_protocol", False):
        return True
    return any(base.__module__.startswith(("pydantic", "typing", "typing_extensions")) for base in cls.__mro__[1:])


def _methods(node: ast.ClassDef) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            yield item


def _self_targets(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        yield target.attr
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _self_targets(element)
    elif isinstance(target, ast.Starred):
        yield from _self_targets(target.value)


@cache
def definitions(cls: type) -> frozenset[str]:
    """What the class itself defines (not its bases)."""
    names: set[str] = set(vars(cls))  # methods, class attributes with a value, properties, nested classes
    record = _is_record(cls)
    if record:
        names |= set(getattr(cls, "__annotations__", {}))
        names |= set(getattr(cls, "model_fields", {}) or {})
    else:
        # An annotation without a value lands in __annotations__ only, never in vars(cls): a declaration.
        pass
    node = class_node(cls)
    if node is not None:
        for method in _methods(node):
            for sub in ast.walk(method):
                if isinstance(sub, ast.Assign):
                    for target in sub.targets:
                        names.update(_self_targets(target))
                elif isinstance(sub, ast.AnnAssign | ast.AugAssign) and (sub.value is not None or
                                                                        isinstance(sub, ast.AugAssign)):
                    names.update(_self_targets(sub.target))
                elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "setattr" \
                        and sub.args and isinstance(sub.args[0], ast.Name) and sub.args[0].id == "self" \
                        and len(sub.args) > 1 and isinstance(sub.args[1], ast.Constant):
                    names.add(str(sub.args[1].value))
    elif not ours(cls):
        names |= set(getattr(cls, "__annotations__", {}))
    return frozenset(names)


@cache
def _foreign_instance_names(cls: type) -> frozenset[str] | None:
    """A library base's instance attributes (``self.X = ...`` in its source); None when its source is not readable."""
    if class_node(cls) is None:
        return None
    return definitions(cls)


def resolvable(cls: type, name: str) -> bool:
    for klass in cls.__mro__:
        if klass is object:
            continue
        if ours(klass):
            if name in definitions(klass):
                return True
            continue
        if hasattr(klass, name):
            return True
        foreign = _foreign_instance_names(klass)
        if foreign is None or name in foreign:
            return True
    return hasattr(object, name)


def _uses(node: ast.ClassDef) -> Iterator[tuple[str, str]]:
    for method in _methods(node):
        for sub in ast.walk(method):
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self" \
                    and isinstance(sub.ctx, ast.Load):
                yield method.name, sub.attr


def upward_references(cls: type) -> list[Finding]:
    node = class_node(cls)
    if node is None:
        return []
    seen: set[tuple[str, str]] = set()
    found = []
    for method, name in _uses(node):
        if (method, name) in seen or resolvable(cls, name):
            continue
        seen.add((method, name))
        found.append(Finding(f"{cls.__module__}:{cls.__qualname__}.{method}", f"self.{name} is defined by no class "
                                                                                f"it extends"))
    return found


def _only_raises_not_implemented(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A body that is only ``raise NotImplementedError`` (without a message: one with a message says why the method
    is refused, as a list's ``insert`` on an append-only conversation). An empty body is a no-op, not a stub."""
    body = [s for s in method.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    if isinstance(exc, ast.Call) and exc.args:
        return False
    target = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(target, ast.Name) and target.id == "NotImplementedError"


def stubs(cls: type) -> list[Finding]:
    node = class_node(cls)
    if node is None or getattr(cls, "_is_protocol", False) or inspect.isabstract(cls):
        return []
    found = []
    for item in node.body:
        if isinstance(item, ast.If) and "TYPE_CHECKING" in ast.unparse(item.test):
            found.append(Finding(f"{cls.__module__}:{cls.__qualname__}", "an `if TYPE_CHECKING:` block in a class "
                                                                          "body"))
    for method in _methods(node):
        decorators = {ast.unparse(d) for d in method.decorator_list}
        if decorators & {"abstractmethod", "abc.abstractmethod", "overload", "typing.overload"}:
            continue
        if _only_raises_not_implemented(method):
            found.append(Finding(f"{cls.__module__}:{cls.__qualname__}.{method.name}",
                                 "a stub (only raises NotImplementedError) in a concrete class"))
    return found


def private_class_imports() -> list[Finding]:
    found = []
    for name in modules():
        module = importlib.import_module(name)
        path = Path(inspect.getfile(module))
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.module is None or node.level:
                continue
            for alias in node.names:
                if not alias.name.startswith("_") or alias.name.startswith("__"):
                    continue
                source = importlib.import_module(node.module) if node.module.startswith(PACKAGE) else None
                if source is not None and inspect.isclass(getattr(source, alias.name, None)):
                    found.append(Finding(name, f"imports the private class {node.module}.{alias.name}"))
    return found


def class_lines(cls: type) -> int:
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return 0
    return len(lines)


def bases_of_ours(cls: type) -> list[type]:
    return [klass for klass in cls.__mro__[1:] if ours(klass)]


def parts_of(cls: type) -> list[tuple[str, type, bool]]:
    """The parts a facade builds in its ``__init__``: ``self.name = Part(...)`` where Part is one of ours, with
    whether the facade hands itself to the part (``Part(self)``, ``Part(owner=self)``: a back-reference)."""
    node = class_node(cls)
    module = importlib.import_module(cls.__module__)
    found = []
    for method in _methods(node) if node is not None else ():
        if method.name != "__init__":
            continue
        for sub in ast.walk(method):
            if not (isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call)):
                continue
            func = sub.value.func
            name = func.id if isinstance(func, ast.Name) else None
            part = getattr(module, name, None) if name else None
            if not (inspect.isclass(part) and (ours(part) or part.__module__ == cls.__module__)):
                continue
            handed = [*sub.value.args, *(k.value for k in sub.value.keywords)]
            back = any(isinstance(a, ast.Name) and a.id == "self" for a in handed)
            for target in sub.targets:
                for attr in _self_targets(target):
                    found.append((attr, part, back))
    return found


def report() -> str:
    classes = package_classes()
    upward = [f for cls in classes for f in upward_references(cls)]
    stub = [f for cls in classes for f in stubs(cls)]
    private = private_class_imports()
    big = sorted(((class_lines(c), f"{c.__module__}:{c.__qualname__}") for c in classes), reverse=True)[:15]
    out = [f"{len(classes)} classes; {len(upward)} upward references; {len(stub)} stubs; "
           f"{len(private)} private class imports"]
    out += [f"  {f}" for f in upward + stub + private]
    out += ["largest classes (lines):"] + [f"  {n:4d} {name}" for n, name in big]
    return "\n".join(out)


if __name__ == "__main__":
    print(report())
