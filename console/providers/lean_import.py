"""Importing an SDK without the optional parts it would load for nothing.

The ``openai`` SDK imports ``aiohttp`` at its own import whenever aiohttp is installed, for an optional client
(``DefaultAioHttpClient``) this harness never uses; aiohttp is installed here (textual-serve and the kubernetes
client need it), so every runner paid for it: ~9 MB of resident memory and ~80 ms of CPU at its start
(benchmarks/fleet_scale.py counts memory per run). The SDK takes a missing aiohttp as its documented case (that
client then says to install the extra), so it is hidden from that one import, and only if nothing loaded it before.

The same SDK's ``openai.types`` package imports all of its ~470 modules (a pydantic model for every shape of every
endpoint: files, evals, graders, videos...) at its own import, to offer each name at the package's top; a runner
reads chat completions and uses some 55 of them: the rest cost ~10 MB of its memory and ~0.25 s of CPU at its start.
:func:`lazy_inits` imports such a package so that each name is imported when it is first asked for (PEP 562's module
``__getattr__``), from the very submodule its ``__init__`` would have taken it from: the same objects, later.
:func:`deferred` does the same for the parts a package's own ``__init__`` takes names from (the ``anthropic`` SDK's
other clouds' clients, which import all of its resources).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any


@contextlib.contextmanager
def without(*names: str) -> Iterator[None]:
    """Within the block, ``import NAME`` of each of ``names`` not already imported raises ImportError (a None in
    ``sys.modules``, as Python documents); after it, they import as ever. Meant for a module's own import, made
    once, before the process starts its threads."""
    hidden = [n for n in names if n not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


def exports(source: str) -> dict[str, tuple[str, str]] | None:
    """``{name: (submodule, its name there)}`` of a package ``__init__`` made only of ``from .sub import Name [as
    Alias]`` lines (a docstring and ``from __future__`` aside); None for any other (its import is left as it is: a
    statement of any other kind may do something a lazy import would not)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    out: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "__future__":
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
            return None
        for alias in node.names:
            if alias.name == "*":
                return None
            out[alias.asname or alias.name] = (node.module, alias.name)
    return out


class _LazyInit(importlib.abc.Loader):
    """Executes a package's ``__init__`` as :func:`exports` read it: each name imported at its first use."""

    def __init__(self, names: dict[str, tuple[str, str]]) -> None:
        self.names = names

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None  # the default module, with the spec's __path__, __file__ and __spec__

    def exec_module(self, module: types.ModuleType) -> None:
        names, package = self.names, module.__name__

        def __getattr__(name: str) -> Any:
            where = names.get(name)
            if where is None:  # a submodule not named in __init__: the import system imports it after this
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(f"{package}.{where[0]}"), where[1])
            setattr(module, name, value)  # asked once
            return value

        def __dir__() -> list[str]:
            return sorted(set(module.__dict__) | set(names))

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        module.__dir__ = __dir__  # type: ignore[method-assign]


class _LazyFinder(importlib.abc.MetaPathFinder):
    def __init__(self, prefixes: Sequence[str]) -> None:
        self.prefixes = tuple(prefixes)

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not any(fullname == p or fullname.startswith(p + ".") for p in self.prefixes):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.submodule_search_locations or not spec.origin or \
                not spec.origin.endswith("__init__.py"):
            return spec  # a module, or a package found another way: as ever
        try:
            with open(spec.origin, encoding="utf-8") as fh:
                names = exports(fh.read())
        except (OSError, UnicodeDecodeError):
            names = None
        if names is None:
            return spec
        spec.loader = _LazyInit(names)
        return spec


@contextlib.contextmanager
def lazy_inits(*prefixes: str) -> Iterator[None]:
    """Within the block, each package named ``prefixes`` (or beneath one) that is imported for the first time and
    whose ``__init__`` only gathers names from its submodules (:func:`exports`) is imported lazily: each name is
    imported from its submodule when first asked for (``from pkg import Name``, ``pkg.Name``). Other packages and
    modules import as ever, and so does everything after the block. Meant for a module's own import."""
    finder = _LazyFinder(prefixes)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


class _Pending:
    """A name of a deferred part while its package's ``__init__`` runs (:func:`deferred`); never handed out after
    it (each is replaced by the part's own object, imported when first asked for). No ``__dict__``: the SDK's
    ``obj.__module__ = ...`` on each of its names raises AttributeError here, which it passes over."""

    __slots__ = ("name", "part")

    def __init__(self, part: str, name: str) -> None:
        self.part, self.name = part, name

    def __repr__(self) -> str:
        return f"<deferred {self.part}.{self.name}>"


def _package_dir(package: str) -> str | None:
    """Where a top-level package's files are, found without importing it (a submodule's spec would)."""
    spec = importlib.machinery.PathFinder.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(next(iter(spec.submodule_search_locations)))


def _part_names(root: str, part: str) -> dict[str, str] | None:
    """The names the package's ``__init__`` takes from the part (dotted from the package: "lib.vertex"), read
    without running either: ``from .lib.aws import A as B`` gives B; ``from .lib.vertex import *`` the names the
    part's own ``__init__`` gives (:func:`exports`: only such lines). None when they cannot be known so."""
    try:
        with open(os.path.join(root, "__init__.py"), encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module == part):
            continue
        for alias in node.names:
            if alias.name != "*":
                out[alias.asname or alias.name] = alias.name
                continue
            try:
                with open(os.path.join(root, *part.split("."), "__init__.py"), encoding="utf-8") as fh:
                    given = exports(fh.read())
            except (OSError, UnicodeDecodeError):
                given = None
            if given is None:
                return None
            out.update({name: name for name in given if not name.startswith("_")})
    return out or None


@contextlib.contextmanager
def deferred(package: str, parts: Sequence[str]) -> Iterator[None]:
    """Within the block, ``package``'s own import leaves its subpackages ``parts`` (dotted from it: "lib.vertex")
    unimported: the names its ``__init__`` takes from them (``from .lib.vertex import *``, ``from .lib.aws import
    AnthropicAWS``) are each imported from the part when first asked for (``package.Name``: PEP 562's module
    ``__getattr__``), the same objects, later. For an SDK's optional parts this harness never uses (the ``anthropic``
    SDK's other clouds' clients, which import every one of its resources: ~30 MB and ~0.4 s a runner). A part taken
    whole (``*``) whose ``__init__`` is not only such lines (its names cannot be known without running it), or any
    part when the package is imported already, is left as ever; after the block every import is as ever (``import
    package.lib.vertex`` imports it)."""
    root = _package_dir(package) if package not in sys.modules else None
    placed: dict[str, types.ModuleType] = {}
    for part in parts if root is not None else ():
        full = f"{package}.{part}"
        names = None if full in sys.modules else _part_names(root or "", part)
        if names is None:
            continue
        stub = types.ModuleType(full)
        stub.__dict__["__all__"] = sorted(set(names.values()))  # a star import's names
        for there in names.values():  # as the part names them (`from .part import A as B` asks the part for A)
            setattr(stub, there, _Pending(full, there))
        sys.modules[full] = stub
        placed[full] = stub
    try:
        yield
    finally:
        for full, stub in placed.items():
            if sys.modules.get(full) is stub:
                del sys.modules[full]
        if placed:
            _settle(package)


def _settle(package: str) -> None:
    """Each name a deferred part gave while ``package`` was imported: the package's own looked up when first asked
    for; any other module's (none is expected) imported now, so that no placeholder is ever handed out."""
    pending: dict[str, _Pending] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == package or name.startswith(package + ".")):
            continue
        for attr, value in list(vars(module).items()):
            # type(), not isinstance: an SDK's lazy proxy answers isinstance's __class__ by importing what it
            # stands for (the anthropic SDK's ``resources``: all of it).
            if type(value) is not _Pending:
                continue
            if name == package:
                pending[attr] = value
                delattr(module, attr)
            else:
                setattr(module, attr, getattr(importlib.import_module(value.part), value.name))
    top = sys.modules.get(package)
    if top is None or not pending:
        return
    before = getattr(top, "__getattr__", None)

    def __getattr__(name: str) -> Any:
        found = pending.get(name)
        if found is None:
            if before is not None:
                return before(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(found.part), found.name)
        setattr(top, name, value)  # asked once
        return value

    top.__getattr__ = __getattr__  # type: ignore[method-assign]
