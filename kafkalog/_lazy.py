"""Package names that load on first access (PEP 562), so importing one module of kafkalog does not import the rest.

A package lists each module and the public names it defines, imports them under ``TYPE_CHECKING`` for type
checkers, and installs the ``__getattr__`` and ``__dir__`` made here. Importing ``kafkalog.records.varint`` then
runs ``kafkalog/__init__`` and ``kafkalog/records/__init__`` without importing numpy, the index or the log layer;
``from kafkalog import Log`` imports ``kafkalog.log.log`` when it runs. ``tests/test_lazy_exports.py`` checks that
each table matches its ``TYPE_CHECKING`` imports and that every name resolves.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
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
