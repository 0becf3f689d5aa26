"""The one shape of every axis's registry (policies, executors, trainers, family procedures,
variance models, test shapes): entries by name, found in one package folder.

Every entry declares `name` (the value its setting takes) and `help` (its words in that
setting's help). Each module of the axis's folder is one entry (or, for a policy's shared base,
none) and registers it with the axis's `register`, a decorator for a class. The folder is
imported on the first lookup, so adding an entry is adding one file: no list names it, and no
module above imports it. The registry and the entries' type live below the folder, so an entry
module imports them without a cycle; a folder whose modules need torch is imported when a lookup
needs one, never for a setting's help unless the axis's settings list it.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """One axis: `package` the dotted name of its folder of entry modules; `default` the name its
    setting takes when none is given; `order` sorts the names (default: `default` first, then by
    name). As a setting's `choices` it is read when checked, so a test's entry is a valid value."""

    def __init__(self, package: str, default: str | None = None, order: Callable[[Any], Any] | None = None):
        self.package, self.default = package, default
        self._order = order or (lambda entry: (entry.name != default, entry.name))
        self._entries: dict[str, T] = {}
        self._loading = False

    def register(self, entry: T) -> T:
        """Make `entry` available by its `name`; the same object again (its module imported a
        second way) is no change, another of the same name an error."""
        name = getattr(entry, "name", "")
        if not name or self._entries.get(name, entry) is not entry:
            raise ValueError(f"{self.package}: entry name {name!r} is empty or registered twice")
        self._entries[name] = entry
        return entry

    def load(self) -> None:
        """Import every module of the folder, once (an entry module's own import of the registry
        while it loads finds it loading, not loaded twice)."""
        if self._loading:
            return
        self._loading = True
        folder = importlib.import_module(self.package)
        for module in pkgutil.iter_modules(folder.__path__):
            if not module.name.startswith("_"):
                importlib.import_module(f"{self.package}.{module.name}")

    def entries(self) -> dict[str, T]:
        self.load()
        return {name: self._entries[name] for name in self.names()}

    def names(self) -> list[str]:
        self.load()
        return sorted(self._entries, key=lambda name: self._order(self._entries[name]))

    def __getitem__(self, name: str) -> T:
        self.load()
        return self._entries[name]

    def get(self, name: str, default: Any = None) -> Any:
        self.load()
        return self._entries.get(name, default)

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def items(self) -> list[tuple[str, T]]:
        return list(self.entries().items())

    def values(self) -> list[T]:
        return list(self.entries().values())

    def problem(self, name: str) -> str | None:
        """For a setting's check: None for a registered name."""
        return None if name in self else f"must be one of: {', '.join(self.names())}"

    def help(self, lead: str) -> str:
        """A setting's help made of its entries' own: '<lead>: a (its help); b (its help). (default a)'."""
        listed = "; ".join(f"{name} ({entry.help})" for name, entry in self.items())
        return f"{lead}: {listed}." + (f" (default {self.default})" if self.default else "")

    def __setitem__(self, name: str, entry: T) -> None:
        """An entry by a name of the caller's: a test's, with `monkeypatch.setitem`, which takes
        it out again (`__delitem__`) or puts back the one it replaced."""
        self.load()
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        self.load()
        del self._entries[name]
