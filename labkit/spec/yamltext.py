"""YAML text read strictly: what PyYAML's safe loader accepts silently or dies on becomes one
`SpecError` naming the line (duplicate keys, nesting too deep, alias bombs, integers too long)."""

from __future__ import annotations

from typing import Any

import yaml

from ..errors import SpecError

MAX_DEPTH = 64
"""Deepest YAML nesting accepted (a scenario nests about 10 deep; 2,000 would exhaust Python's stack)."""
MAX_ALIASED_NODES = 1_000_000
"""How many YAML nodes aliases (`*name`) may add beyond the document's own: anchors that share a
resources block are fine, a "billion laughs" alias bomb of 1 KB is refused before it is expanded."""


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing what it would otherwise accept silently or die on: a key given
    twice in one mapping (the last would win), nesting deeper than `MAX_DEPTH` (RecursionError) and
    aliases that expand to more than `MAX_ALIASED_NODES` extra nodes (an alias bomb)."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):  # type: ignore[override]
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else id(key_node)
                if key in seen and key_node.tag != "tag:yaml.org,2002:merge":
                    raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice",
                                                            key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


def _expanded_size(root: yaml.Node) -> tuple[int, int]:
    """(nodes as written, nodes once every alias is expanded), without expanding anything."""
    size: dict[int, int] = {}
    order, stack = [], [root]
    while stack:  # post-order without recursion: children sized before their parent
        node = stack.pop()
        if id(node) in size:
            continue
        size[id(node)] = -1
        order.append(node)
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
    for node in reversed(order):
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        size[id(node)] = min(1 + sum(size[id(c)] for c in children), 2**62)
    return len(order), size[id(root)]


def parse_yaml(text: str, source: str = "<text>") -> Any:
    """YAML text as plain data, every problem one SpecError naming the line: syntax, duplicate keys,
    nesting deeper than `MAX_DEPTH`, alias bombs, integers too long to convert."""
    loader = None
    try:
        loader = _StrictLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        written, expanded = _expanded_size(node)
        if expanded - written > MAX_ALIASED_NODES:
            raise yaml.composer.ComposerError(None, None, f"aliases expand to {expanded:,} nodes "
                                              f"(at most {MAX_ALIASED_NODES:,} more than written)", node.start_mark)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise SpecError("", f"{source}:{where}: not valid YAML: {problem}") from None
    except ValueError as err:  # int() of more than 4,300 digits, a date out of range
        raise SpecError("", f"{source}: not valid YAML: {str(err).splitlines()[0][:120]}") from None
    finally:
        if loader is not None:
            loader.dispose()
