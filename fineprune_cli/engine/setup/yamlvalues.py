"""YAML as people write settings: numbers read as Python reads them, and the YAML 1.1 readings
that silently change a value refused in one line.

PyYAML resolves plain scalars by YAML 1.1, where `1e-3` is text (a float needs a dot) so
`lr: 1e-3` was refused as "expected float", while `1:00` is the base-60 number 60 and `010`
the octal 8, so `epochs: 1:00` trained 60 epochs. Here a number is what `int()` / `float()`
make of it; `1:00` and `010` mean different things to YAML 1.1 and to a reader, so they are
refused (quoted, they stay text). `Dumper` quotes every string that this loader or YAML 1.1
would read as something else, so what `--print-config` writes reads back the same.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any

import yaml

from ...errors import ConfigError

_DIGITS = r"[0-9](?:_?[0-9])*"
INT = re.compile(r"[-+]?(?:0|[1-9](?:_?[0-9])*|0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+)$")
FLOAT = re.compile(
    rf"[-+]?(?:(?:{_DIGITS})?\.{_DIGITS}(?:[eE][-+]?{_DIGITS})?|{_DIGITS}\.?(?:[eE][-+]?{_DIGITS})?"
    rf"|{_DIGITS}\.)$|[-+]?\.(?:inf|Inf|INF)$|\.(?:nan|NaN|NAN)$"
)
AMBIGUOUS = re.compile(r"[-+]?(?:0[0-9_]+|[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?)$")
INT_TAG, FLOAT_TAG, AMBIGUOUS_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:fineprune,ambiguous"
STARTS = list("-+0123456789.")


def _number_resolvers(cls: type) -> None:
    """Replace the class's int and float resolvers by Python's readings (a copy per class:
    PyYAML's dict is shared with SafeLoader)."""
    cls.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in (INT_TAG, FLOAT_TAG)]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    # ambiguous first: '010' also matches the float pattern (Python reads it as 10.0)
    cls.add_implicit_resolver(AMBIGUOUS_TAG, AMBIGUOUS, STARTS)
    cls.add_implicit_resolver(INT_TAG, INT, STARTS)
    cls.add_implicit_resolver(FLOAT_TAG, FLOAT, STARTS)


MERGE_TAG = "tag:yaml.org,2002:merge"
MERGE_PROBLEMS = ("expected a mapping for merging", "expected a mapping or list of mappings for merging")


class Loader(yaml.SafeLoader):
    """safe_load with Python's numbers; a key given twice in one mapping is an error, not a
    silent last-one-wins. A merge key (`<<: *defaults`) merges as YAML says: the mapping's own
    keys override the merged ones, so only its own keys are checked for repeats."""

    def flatten_mapping(self, node: Any) -> None:
        """The merge as the spec has it: own keys first, then the mappings merged in the order
        listed. PyYAML's own lets a later mapping win whenever two equal keys are distinct
        string objects (`<<: [{epochs: 3}, {epochs: 5}]` read 5)."""
        own, merged = [], []
        for key_node, value_node in node.value:
            if key_node.tag != MERGE_TAG:
                own.append((key_node, value_node))
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark, MERGE_PROBLEMS[1], source.start_mark
                    )
                self.flatten_mapping(source)
                merged += source.value
        if not merged:
            return super().flatten_mapping(node)  # its handling of a '=' key, unchanged
        seen = {self._key(k) for k, _ in own}
        kept = []
        for key_node, value_node in merged:
            key = self._key(key_node)
            if key not in seen:
                seen.add(key)
                kept.append((key_node, value_node))
        node.value = kept + own
        return super().flatten_mapping(node)

    def _key(self, node: Any) -> Any:
        key = self.construct_object(node, deep=True)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(None, None, "found an unhashable key", node.start_mark)
        return key

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        own = [k for k, _ in node.value if not (isinstance(k, yaml.ScalarNode) and k.tag == MERGE_TAG)]
        keys = [self.construct_object(k, deep=deep) for k in own]
        for i, key in enumerate(keys):
            if key in keys[:i]:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", node.start_mark)
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node: Any) -> int:
        return int(node.value, 0 if node.value.lstrip("+-")[1:2].isalpha() else 10)

    def construct_yaml_float(self, node: Any) -> float:
        return float(
            node.value.replace(".inf", "inf")
            .replace(".Inf", "inf")
            .replace(".INF", "inf")
            .replace(".nan", "nan")
            .replace(".NaN", "nan")
            .replace(".NAN", "nan")
        )

    def construct_ambiguous(self, node: Any) -> Any:
        raise Ambiguous(None, None, ambiguity(node.value), node.start_mark)

    def construct_document(self, node: Any) -> Any:
        refuse_alias_bombs(node)
        return super().construct_document(node)


class Ambiguous(yaml.constructor.ConstructorError):
    """A number YAML 1.1 reads otherwise than Python and people do."""


class Repeated(yaml.constructor.ConstructorError):
    """Aliases that repeat more of the document than settings need, or that hold themselves."""


MAX_REPEATED = 10_000  # nodes aliases may add: a config shares a few settings, not millions


def refuse_alias_bombs(root: Any) -> None:
    """Nine nested aliases of nine items each read as 9^9 strings: cheap to load (shared
    objects) but expanded by every copy, comparison or dump of the settings. So the document is
    measured as it would expand, each node once per time it is reached, before it is built."""
    sizes: dict[int, int] = {}  # id(node) -> the node's expanded size

    def size(node: Any, holding: set[int]) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in holding:
            raise Repeated(None, None, "an alias refers to a value that holds it", node.start_mark)
        children = node.value if isinstance(node, yaml.SequenceNode) else []
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        holding.add(id(node))
        sizes[id(node)] = 1 + sum(size(child, holding) for child in children)
        holding.discard(id(node))
        return sizes[id(node)]

    repeated = size(root, set()) - len(sizes)
    if repeated > MAX_REPEATED:
        raise Repeated(
            None,
            None,
            f"its aliases repeat {repeated:,} values, more than the {MAX_REPEATED:,} settings can need; "
            "write the values out",
            root.start_mark,
        )


_number_resolvers(Loader)
Loader.add_constructor(INT_TAG, Loader.construct_yaml_int)
Loader.add_constructor(FLOAT_TAG, Loader.construct_yaml_float)
Loader.add_constructor(AMBIGUOUS_TAG, Loader.construct_ambiguous)


def ambiguity(text: str) -> str:
    """Why `text` is refused: YAML 1.1 and a reader (or Python) read it differently."""
    yaml11 = yaml.safe_load(text)
    if ":" in text:
        return f"'{text}' is a base-60 number to YAML 1.1 ({yaml11!r}); write the number itself, or quote it for text"
    return (
        f"'{text}' has a leading 0: YAML 1.1 reads it as {yaml11!r}, Python as {int(text.replace('_', ''))}; "
        "write it without the 0 (0o... for octal), or quote it for text"
    )


class Dumper(yaml.SafeDumper):
    """safe_dump that quotes a string whenever YAML 1.1 or `Loader` would read it as another type."""


Dumper.add_implicit_resolver(AMBIGUOUS_TAG, AMBIGUOUS, STARTS)
Dumper.add_implicit_resolver(INT_TAG, INT, STARTS)
Dumper.add_implicit_resolver(FLOAT_TAG, FLOAT, STARTS)


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=Dumper, sort_keys=False)


def load(text: str) -> Any:
    """Raises yaml.YAMLError (its `problem` says why for an ambiguous value) or RecursionError."""
    return yaml.load(text, Loader=Loader)


def problem_of(exc: yaml.YAMLError) -> str:
    """The part of a load error worth one line: a duplicate key, an ambiguous number or a merge
    key (`<<`) given other than mappings."""
    problem = getattr(exc, "problem", "") or ""
    if problem.startswith(MERGE_PROBLEMS):
        return "a merge key (<<) takes a mapping or a list of mappings"
    return problem if problem.startswith("duplicate key") or isinstance(exc, (Ambiguous, Repeated)) else ""


def comment_in(text: str) -> bool:
    """Whether YAML would drop part of `text` as a comment: a '#' outside every token
    (`a #b` reads as `a`; in quotes, or as in `a#b`, it stays)."""
    if "#" not in text:
        return False
    try:
        spans = [(t.start_mark.index, t.end_mark.index) for t in yaml.scan(text)]
    except yaml.YAMLError:
        return False  # not valid YAML: the load says so
    return any(ch == "#" and not any(a <= i < b for a, b in spans) for i, ch in enumerate(text))


def setting_value(key: str, text: str) -> Any:
    """A `--set key=value` value: YAML read as above; a comment or a value YAML cannot read
    is refused, since the user typed exactly this."""
    try:
        if comment_in(text):
            raise ConfigError(
                f"--set {key}: '{text}' holds ' #', which YAML reads as the start of a "
                f"comment; quote the value ({key}=\"'{text}'\") to keep it whole"
            )
        return load(text)
    except yaml.YAMLError as exc:
        why = problem_of(exc)
        raise ConfigError(f"--set {key}: {why}" if why else f"--set {key}: '{text}' is not a valid value") from None
    except RecursionError:
        raise ConfigError(f"--set {key}: the value is nested too deeply") from None
