"""What a Redfish answer is made of: the :class:`Reply` the server sends, JSON replies, Base registry errors.

Shared by the generated BMCs (``bmc``, ``actions``, ``firmware``) and the capture server (``capture``).
Error bodies follow DSP0266 §9.6 with the DMTF Base registry's message texts.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

try:
    import orjson  # the emulator shares the controller's cores in the benchmarks: a body serialised in C
except ImportError:
    orjson = None

JSON = "application/json"


def dumps_bytes(value):
    """A JSON body as bytes: orjson where installed (compact separators), else the json module's."""
    if orjson is not None:
        try:
            return orjson.dumps(value)
        except TypeError:   # what orjson will not encode (a key that is not a string): the json module's
            pass
    return json.dumps(value).encode()
BASE = "Base.1.22"

BASE_MESSAGES = {
    "GeneralError": "A general error has occurred.  See Resolution for information on how to resolve the error.",
    "PropertyUnknown": "The property %1 is not in the list of valid properties for the resource.",
    "PropertyValueNotInList": "The value '%1' for the property %2 is not in the list of acceptable values.",
    "PropertyValueTypeError": "The value '%1' for the property %2 is not a type that the property can accept.",
    "PropertyNotWritable": "The property %1 is a read-only property and cannot be assigned a value.",
    "PropertyMissing": "The property %1 is a required property and must be included in the request.",
    "ActionParameterMissing": "The action %1 requires the parameter %2 to be present in the request body.",
    "ActionParameterValueNotInList": "The value '%1' for the parameter %2 in the action %3 is not in the list of "
                                     "acceptable values.",
    "ActionParameterValueError": "The value for the parameter %1 in the action %2 is invalid.",
    "ActionNotSupported": "The action %1 is not supported by the resource.",
    "MalformedJSON": "The request body submitted was malformed JSON and could not be parsed by the receiving service.",
    "ResourceNotFound": "The requested resource of type %1 named '%2' was not found.",
    "ResourceInUse": "The change to the requested resource failed because the resource is in use or in transition.",
    "NoValidSession": "There is no valid session established with the implementation.",
    "SessionLimitExceeded": "The session establishment failed due to the number of simultaneous sessions exceeding "
                            "the limit of the implementation.",
    "PreconditionRequired": "A precondition header or annotation is required to change the resource.",
    "PreconditionFailed": "The ETag supplied did not match the ETag required to change this resource.",
    "OperationNotAllowed": "The HTTP method is not allowed on this resource.",
    "ServiceTemporarilyUnavailable": "The service is temporarily unavailable.  Retry in %1 seconds.",
    "MissingOrMalformedPart": "The multipart request did not contain all required parts or contained malformed "
                              "parts.",
    "QueryParameterOutOfRange": "The value '%1' for the query parameter %2 is out of range %3.",
    "QueryParameterValueFormatError": "The value '%1' for the parameter %2 is not a format that the parameter can "
                                      "accept.",
}


def fill_message(template, args):
    """``template`` with its ``%1``, ``%2``... replaced by ``args`` (Redfish message registry placeholders)."""
    for n, arg in enumerate(args, 1):
        template = template.replace("%%%d" % n, str(arg))
    return template


def error_body(message_id, *args, related=None, severity="Critical"):
    """A Redfish error payload with one ``@Message.ExtendedInfo`` entry (DSP0266 §9.6)."""
    info = {"MessageId": "%s.%s" % (BASE, message_id),
            "Message": fill_message(BASE_MESSAGES.get(message_id, message_id), args),
            "MessageArgs": [str(a) for a in args], "MessageSeverity": severity, "Resolution": "None."}
    if related:
        info["RelatedProperties"] = list(related)
    return {"error": {"code": "%s.%s" % (BASE, message_id), "message": info["Message"],
                      "@Message.ExtendedInfo": [info]}}


def now_iso(wall=None):
    """``wall`` (epoch seconds, default now) as a Redfish ``Edm.DateTimeOffset`` in UTC."""
    return datetime.fromtimestamp(wall if wall is not None else time.time(), timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S+00:00")


class Reply:
    """What the server sends back: ``status``, ``headers``, ``body`` (bytes), ``delay`` (s), ``abort``."""

    __slots__ = ("status", "headers", "body", "delay", "abort")

    def __init__(self, status=200, body=b"", headers=None, delay=0.0, abort=False):
        self.status = status
        self.body = body
        self.headers = headers if headers is not None else {"Content-Type": JSON}
        self.delay = delay
        self.abort = abort

    def json(self):
        return json.loads(self.body.decode()) if self.body else None


def jreply(status, payload, headers=None):
    """A :class:`Reply` with ``payload`` as its JSON body and ``headers`` over the JSON content type."""
    h = {"Content-Type": JSON}
    if headers:
        h.update(headers)
    return Reply(status, dumps_bytes(payload), h)


def json_object(body):
    """``(dict, None)`` from a request body (empty means ``{}``), or ``(None, 400 MalformedJSON reply)``."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return None, jreply(400, error_body("MalformedJSON"))
    if not isinstance(data, dict):
        return None, jreply(400, error_body("MalformedJSON"))
    return data, None
