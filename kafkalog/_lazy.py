"""Package names that load on first access (PEP 562), so importing one module of kafkalog does not import the rest.

A package lists each module and the public names it defines, imports them under ``TYPE_CHECKING`` for type
checkers, and installs the ``__getattr__`` and ``__dir__`` made here. Importing ``kafkalog.records.varint`` then
runs ``kafkalog/__init__`` and ``kafkalog/records/__init__`` without importing numpy, the index or the log layer;
``from kafkalog import Log`` imports ``kafkalog.log.log`` when it runs. ``tests/project/test_lazy_exports.py`` checks that
each table matches its ``TYPE_CHECKING`` imports and that every name resolves.

:func:`moved_modules` keeps a documented module path that moved importable as the very same module object (so a
``mock.patch`` or ``isinstance`` through the old path and the new one agree), without a file left at the old place.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, table: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``table`` maps a module to the names it defines (the name
    ``x`` of module ``<package>.x`` is that submodule itself). A name found is kept in the package's namespace,
    so it is looked up once. Other submodules also load on attribute access, as they did when the package
    imported them eagerly."""
    namespace = sys.modules[package].__dict__
    exports = {name: module for module, names in table.items() for name in names}

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            if name.startswith("__") or importlib.util.find_spec(f"{package}.{name}") is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            target = f"{package}.{name}"
        module = importlib.import_module(target)
        value = module if target == f"{package}.{name}" else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``old`` (and ``old.x``) as the module ``new`` (``new.x``): one module object under both names."""

    def __init__(self, moves: Mapping[str, str]) -> None:
        self.moves = dict(moves)
        self._specs: dict[str, Any] = {}

    def _target(self, name: str) -> str | None:
        for old, new in self.moves.items():
            if name == old or name.startswith(old + "."):
                return new + name[len(old):]
        return None

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        new = self._target(name)
        return None if new is None else importlib.util.spec_from_loader(name, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self._target(spec.name) or spec.name)
        self._specs[spec.name] = module.__spec__  # the import system stamps the alias spec on it next
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        for name, spec in list(self._specs.items()):
            if spec is not None and spec.name == module.__name__:
                module.__spec__ = self._specs.pop(name)


def moved_modules(moves: Mapping[str, str]) -> None:
    """Make each ``old`` module path in ``moves`` import the module at ``new`` (same object), once per process."""
    if not any(isinstance(f, _MovedModules) and f.moves == dict(moves) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedModules(moves))
