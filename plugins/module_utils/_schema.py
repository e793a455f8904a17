# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Schema validation and YAML loading with errors that name the file and JSON path."""

from __future__ import annotations

import json

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
    _SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
except ImportError:
    HAS_YAML = False


def json_path(path_items):
    """``['nodes', 3, 'bmc_mac'] -> '$.nodes[3].bmc_mac'``."""
    out = "$"
    for item in path_items:
        out += "[%d]" % item if isinstance(item, int) else ".%s" % item
    return out


_FAST = {}


def _fast_validator(schema):
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


def validate_document(data, schema, where, error_class):
    """Validate ``data`` against ``schema``; raise ``error_class`` naming ``where`` and the JSON path.

    The error chosen is jsonschema's ``best_match`` so the message is the most
    specific one, e.g. ``skus/x.yml: $.bom.gpus.count: 'eight' is not of type 'integer'``.
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
        raise error_class("%s: %s" % (json_path(error.absolute_path), error.message), where=where)


def load_yaml_file(path, error_class):
    """Parse a YAML file with the safe loader; a missing or malformed file raises ``error_class``."""
    if not HAS_YAML:
        raise error_class("the PyYAML Python library is required", where=path)
    try:
        with open(path, "r", encoding="utf-8") as handle:
            text = handle.read()
        data = None
        if text.lstrip().startswith("{"):
            # JSON is YAML 1.2: a twin exported from a DCIM as JSON loads ~100x faster this way.
            try:
                data = json.loads(text)
            except ValueError:
                data = None
        if data is None:
            data = yaml.load(text, Loader=_SAFE_LOADER)  # nosec: safe loader (C or Python)
    except OSError as exc:
        raise error_class("cannot read file: %s" % exc.strerror, where=path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = " at line %d column %d" % (mark.line + 1, mark.column + 1) if mark else ""
        raise error_class("invalid YAML%s: %s" % (line, getattr(exc, "problem", exc)), where=path)
    if not isinstance(data, dict):
        raise error_class("top level must be a mapping", where=path)
    return data
