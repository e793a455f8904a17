# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Schema validation and YAML loading with errors that name the file and JSON path."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Type, Union

from .errors import SymphonyError

try:
    import jsonschema
    HAS_JSONSCHEMA = True
except ImportError:  # reported by the caller with missing_required_lib
    HAS_JSONSCHEMA = False

try:
    # Optional accelerator: compiles a schema to Python code, ~20x faster than jsonschema on 10,000-node
    # twins.  It only answers "valid?"; every error message still comes from jsonschema's best_match.
    import fastjsonschema
    HAS_FASTJSONSCHEMA = True
except ImportError:
    HAS_FASTJSONSCHEMA = False

try:
    import yaml
    HAS_YAML = True
    # libyaml's loader is ~10x faster on 10,000-node twins; same safe semantics.
    _SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
except ImportError:
    HAS_YAML = False

try:
    # Optional accelerator: a YAML parser in Rust (serde_yaml), ~20x faster than PyYAML's constructors on a
    # 10,000-node twin.  It reads YAML 1.2, PyYAML 1.1, so its result is used only where both read the same
    # values (_same_as_pyyaml); otherwise PyYAML loads the file, and PyYAML's errors are the ones reported.
    import ryaml
    HAS_RYAML = True
except ImportError:
    HAS_RYAML = False

_MERGE_TAG = "tag:yaml.org,2002:merge"
# Text the fast path leaves to PyYAML: merge keys, tags, a second document, and 1.2's 0o octal (an int whose
# parsed value no longer shows it was not 1.1's decimal).  A leading-zero number needs no rule here: ryaml
# keeps ``017`` a string, which PyYAML's resolvers then claim (below).
_FAST_PATH_UNSAFE = ("<<", "!", "\n---", "\n...", "0o")
# Every PyYAML implicit resolver (bool, int, float, null, timestamp, merge, value) as one regex: a string it
# matches is something else than a string to PyYAML.
_PYYAML_IMPLICIT: Any = None
_PYYAML_FIRST: frozenset = frozenset()  # the first characters PyYAML looks at (its resolvers are keyed by them)
if HAS_YAML:
    _PYYAML_FIRST = frozenset(k for k in yaml.resolver.Resolver.yaml_implicit_resolvers if k)
    _PYYAML_IMPLICIT = re.compile("|".join(sorted({"(?:%s)" % regexp.pattern
                                                   for resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.values()
                                                   for _tag, regexp in resolvers})), re.X)

if HAS_YAML:
    class _UniqueKeyLoader(_SAFE_LOADER):  # pylint: disable=too-many-ancestors
        """The safe loader, refusing a key given twice in one mapping.

        PyYAML keeps the last value silently: a second ``u:`` in a twin node would move its planned BMC
        address without a word.  A key after ``<<: *anchor`` still overrides the merged one (that is the
        point of a merge), only the mapping's own keys must differ.
        """

        def construct_mapping(self, node: Any, deep: bool = False) -> Dict[Any, Any]:
            own, merged = None, False
            if isinstance(node, yaml.MappingNode):
                own = [pair[0] for pair in node.value if pair[0].tag != _MERGE_TAG]
                merged = len(own) != len(node.value)
            mapping = super().construct_mapping(node, deep=deep)
            # fast path (every mapping of a 10,000-node twin): no merge and as many keys as entries
            if own is None or (not merged and len(mapping) == len(own)):
                return mapping
            first: Dict[Any, Any] = {}
            for key_node in own:
                key = self.construct_object(key_node, deep=deep)  # memoised by PyYAML: no second construction
                if key in first:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        "duplicate key %r (first at line %d)" % (key, first[key].start_mark.line + 1),
                        key_node.start_mark)
                first[key] = key_node
            return mapping


def _same_as_pyyaml(value: Any) -> bool:
    """True when PyYAML's safe loader would give ``value`` too: no float (1.1 needs a dot and a signed
    exponent, 1.2 does not), and no string, key or value, that PyYAML's implicit resolvers would read as
    something else (1.1's ``yes``/``on``, ``1_000``, ``017``, ``10:20`` base 60, dates)."""
    stack = [value]
    claimed = _PYYAML_IMPLICIT.match if _PYYAML_IMPLICIT is not None else None
    first = _PYYAML_FIRST
    keys_seen: Set[Any] = set()  # a twin repeats a few dozen keys 10,000 times: judge each key once
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str:
            # (an empty string came quoted: plain empty is null in both)
            if item and item[0] in first and claimed is not None and claimed(item) is not None:
                return False
        elif kind is dict:
            new_keys = item.keys() - keys_seen
            if new_keys:
                keys_seen |= new_keys
                extend(new_keys)
            extend(item.values())
        elif kind is list:
            extend(item)
        elif kind is float:
            return False
        elif kind not in (int, bool) and item is not None:
            return False  # not a JSON type: not something to vouch for
    return True


def _fast_yaml(text: str) -> Any:
    """``text`` parsed by ryaml where that provably equals PyYAML's safe load; None otherwise (and for any
    text ryaml refuses: PyYAML then reports the error with its line and column)."""
    if not (HAS_RYAML and HAS_YAML) or any(mark in text for mark in _FAST_PATH_UNSAFE):
        return None
    try:
        data = ryaml.loads(text)
    except Exception:  # pylint: disable=broad-exception-caught  # ryaml's own error class is private
        return None
    return data if _same_as_pyyaml(data) else None


class _DuplicateJSONKey(ValueError):
    """A JSON object repeats a key: the YAML loader then reports it with its line."""


def _unique_pairs(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        raise _DuplicateJSONKey()
    return mapping


def json_path(path_items: Sequence[Union[str, int]], data: Any = None, label_key: Optional[str] = None) -> str:
    """``['nodes', 3, 'bmc_mac'] -> '$.nodes[3].bmc_mac'``.

    With ``data`` and ``label_key``, a mapping along the path that holds a string ``label_key`` is named
    after its path, as the twin's own errors do: ``$.nodes[3] (gpu-r01-u18).bmc_mac``.
    """
    out = "$"
    for item in path_items:
        out += "[%d]" % item if isinstance(item, int) else ".%s" % item
        if label_key is None:
            continue
        try:
            data = data[item]
        except (KeyError, IndexError, TypeError):
            data, label_key = None, None  # the path left the document: name nothing further
            continue
        if isinstance(data, dict) and isinstance(data.get(label_key), str):
            out += " (%s)" % data[label_key]
    return out


_FAST: Dict[str, Optional[Callable[[Any], Any]]] = {}


def _fast_validator(schema: Dict[str, Any]) -> Optional[Callable[[Any], Any]]:
    """A compiled fastjsonschema validator for ``schema`` (cached by its ``$id``/title), or None.

    The collection's schemas use only keywords whose meaning is the same in draft-07, which fastjsonschema
    implements, and draft 2020-12 (type, properties, required, additionalProperties, enum, const, pattern,
    minimum, maximum, items, minItems, minLength); the unit tests check both agree on bad documents.
    """
    if not HAS_FASTJSONSCHEMA:
        return None
    key = schema.get("$id") or schema.get("title")
    if key is None:
        return None
    if key not in _FAST:
        draft7 = dict(schema, **{"$schema": "http://json-schema.org/draft-07/schema#"})
        draft7.pop("$id", None)
        try:
            _FAST[key] = fastjsonschema.compile(draft7)
        except fastjsonschema.JsonSchemaDefinitionException:
            _FAST[key] = None
    return _FAST[key]


def validate_document(data: Any, schema: Dict[str, Any], where: str, error_class: Type[SymphonyError],
                      label_key: Optional[str] = None) -> None:
    """Validate ``data`` against ``schema``; raise ``error_class`` naming ``where`` and the JSON path.

    The error chosen is jsonschema's ``best_match`` so the message is the most
    specific one, e.g. ``skus/x.yml: $.bom.gpus.count: 'eight' is not of type 'integer'``.
    ``label_key`` (e.g. ``"hostname"``): name the item the error is in, see :func:`json_path`.
    """
    if not HAS_JSONSCHEMA:
        raise error_class("the jsonschema Python library is required", where=where)
    fast = _fast_validator(schema)
    if fast is not None:
        try:
            fast(data)
            return
        except fastjsonschema.JsonSchemaException:
            pass  # fall through: jsonschema names the error
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        raise error_class("%s: %s" % (json_path(error.absolute_path, data, label_key), error.message), where=where)


def _at(mark: Any) -> str:
    # PyYAML's marks count from 0; editors from 1
    return " at line %d column %d" % (mark.line + 1, mark.column + 1) if mark is not None else ""


def _yaml_problem(exc: Exception, text: str) -> str:
    """`` at line 8 column 11: did not find expected '-' indicator (while parsing ... at line 7 column 11)``."""
    if isinstance(exc, yaml.reader.ReaderError) and isinstance(exc.character, int):
        # a control character: no mark, only an offset (in UTF-8 bytes for libyaml, characters for PyYAML)
        libyaml = _SAFE_LOADER is getattr(yaml, "CSafeLoader", None)
        before = text.encode("utf-8")[:exc.position].decode("utf-8", "ignore") if libyaml else text[:exc.position]
        line, column = before.count("\n") + 1, len(before.rsplit("\n", 1)[-1]) + 1
        return " at line %d column %d: %s #x%04x" % (line, column, exc.reason, exc.character)
    problem = getattr(exc, "problem", None)
    if problem is None:  # an error without marks: its own text says what it can
        return ": %s" % exc
    out = "%s: %s" % (_at(getattr(exc, "problem_mark", None)), problem)
    context = getattr(exc, "context", None)
    if context:
        out += " (%s%s)" % (context, _at(getattr(exc, "context_mark", None)))
    return out


def load_yaml_file(path: str, error_class: Type[SymphonyError]) -> Dict[str, Any]:
    """Parse a YAML file with the safe loader; a missing or malformed file raises ``error_class``.

    The error names the file, the line and column, and (for a key given twice in one mapping, which PyYAML
    would silently resolve to the last value) the key and the line of its first occurrence.
    """
    if not HAS_YAML:
        raise error_class("the PyYAML Python library is required", where=path)
    text = ""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            text = handle.read()
        data = None
        if text.lstrip().startswith("{"):
            # JSON is YAML 1.2: a twin exported from a DCIM as JSON loads ~100x faster this way.
            try:
                data = json.loads(text, object_pairs_hook=_unique_pairs)
            except ValueError:
                data = None  # not JSON, or a repeated key: the YAML loader below says where
        if data is None:
            data = _fast_yaml(text)
        if data is None:
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # nosec: safe loader (C or Python)
    except OSError as exc:
        raise error_class("cannot read file: %s" % exc.strerror, where=path)
    except UnicodeDecodeError as exc:
        raise error_class("not UTF-8 text: %s (byte 0x%02x)" % (exc.reason, exc.object[exc.start]), where=path)
    except yaml.YAMLError as exc:
        raise error_class("invalid YAML%s" % _yaml_problem(exc, text), where=path)
    if not isinstance(data, dict):
        raise error_class("top level must be a mapping", where=path)
    return data
