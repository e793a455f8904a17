# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# Apache License 2.0 (see LICENSE)
"""Schema validation and YAML loading with errors that name the file and JSON path."""

from __future__ import annotations

try:
    import jsonschema
    HAS_JSONSCHEMA = True
except ImportError:  # reported by the caller with missing_required_lib
    HAS_JSONSCHEMA = False

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


def validate_document(data, schema, where, error_class):
    """Validate ``data`` against ``schema``; raise ``error_class`` naming ``where`` and the JSON path.

    The error chosen is jsonschema's ``best_match`` so the message is the most
    specific one, e.g. ``skus/x.yml: $.bom.gpus.count: 'eight' is not of type 'integer'``.
    """
    if not HAS_JSONSCHEMA:
        raise error_class("the jsonschema Python library is required", where=where)
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
            data = yaml.load(handle, Loader=_SAFE_LOADER)  # nosec: safe loader (C or Python)
    except OSError as exc:
        raise error_class("cannot read file: %s" % exc.strerror, where=path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = " at line %d column %d" % (mark.line + 1, mark.column + 1) if mark else ""
        raise error_class("invalid YAML%s: %s" % (line, getattr(exc, "problem", exc)), where=path)
    if not isinstance(data, dict):
        raise error_class("top level must be a mapping", where=path)
    return data
