"""YAML loading that refuses a key given twice in one mapping.

PyYAML keeps the last value of a repeated key and drops the other without a word (a recipe's second
``hyperparams:`` erased the first's keys; a world file's second ``capacity:`` won silently). The world's
config files and the training recipes are both read through :func:`safe_load_unique`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class DuplicateKeyError(yaml.YAMLError):
    """A mapping of the document holds a key twice; the message names the source, the dotted key and
    both line numbers."""


def safe_load_unique(text: str, source: str | Path) -> Any:
    """``yaml.safe_load(text)``, or :class:`DuplicateKeyError` (a ``yaml.YAMLError``) for the first
    mapping that holds a key twice. Merge keys (``<<: *base``) are not keys, and may be overridden."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is not None:
        _check_unique_keys(node, "", source, set())
    return yaml.safe_load(text)


def _check_unique_keys(node: yaml.Node, prefix: str, source: str | Path, visited: set[int]) -> None:
    if id(node) in visited:  # (an alias: its node was checked where it was anchored)
        return
    visited.add(id(node))
    if isinstance(node, yaml.MappingNode):
        lines: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                line = key.start_mark.line + 1
                first = lines.get((key.tag, key.value))
                if first is not None:
                    where = f"lines {first} and {line}" if first != line else f"line {line}"
                    raise DuplicateKeyError(f"{source}: key '{prefix}{key.value}' is given twice ({where}); YAML "
                                            "keeps only the last and drops the other without a word: remove one")
                lines[(key.tag, key.value)] = line
                _check_unique_keys(value, f"{prefix}{key.value}.", source, visited)
            else:
                _check_unique_keys(value, prefix, source, visited)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_unique_keys(item, f"{prefix.rstrip('.')}[{i}].", source, visited)
