# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small, robust Redfish client on sushy's connector and auth classes: :class:`RedfishClient`.

What sushy (5.x) gives us and we use as is: the HTTP connector (``sushy.connector.Connector``:
requests session, ``OData-Version``/``Accept-Encoding: identity`` headers, weak->strong->no
ETag retry on 412 for PATCH, re-login once on 401 with a session), the auth classes
(``SessionAuth``, ``BasicAuth``, ``SessionOrBasicAuth``) and its exception classes
(``HTTPError`` with ``@Message.ExtendedInfo``).  What this package adds around it, by concern
(cases in ``shared/cases/redfish-cases.md``):

* :mod:`.transport`: retries, backoff and ``Retry-After``, TLS, non-JSON error bodies, HTTP
  status -> the typed errors of :mod:`.errors` with resolved ``@Message.ExtendedInfo``;
* :mod:`.session`: login (session, Basic, or session falling back to Basic), the session always
  DELETEd at close, a new login after a BMC reboot;
* :mod:`.paging`: ``Members@odata.nextLink`` paging, ``$expand``, parallel member GETs;
* :mod:`.writes`: PATCH with ETag/If-Match, POST, DELETE, multipart push;
* :mod:`.tasks`: task monitors and Task resources;
* :mod:`.settings`: the client's knobs (:class:`ClientSettings`); :mod:`.argspec`: the module options.

This module is the package's public face: other packages import the client, its errors and
``HAS_SUSHY`` from here.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional

from .._core.errors import RedfishError, ValidationError
from .argspec import PASSWORD_ENV, redfish_argument_spec
from .errors import (
    RedfishAuthError,
    RedfishConnectionError,
    RedfishHTTPError,
    RedfishIncomplete,
    RedfishInvalidResponse,
    RedfishTaskError,
    RedfishTimeout,
)
from .paging import Paging
from .registries import MessageRegistries
from .settings import ClientSettings
from .tasks import Tasks
from .transport import HAS_SUSHY, SERVICE_ROOT, SUSHY_IMPORT_ERROR, RedfishResponse, parse_retry_after
from .writes import Writes

__all__ = [
    "HAS_SUSHY", "SUSHY_IMPORT_ERROR", "SERVICE_ROOT", "ClientSettings", "RedfishClient", "RedfishResponse",
    "RedfishError", "RedfishAuthError", "RedfishConnectionError", "RedfishHTTPError", "RedfishIncomplete",
    "RedfishInvalidResponse", "RedfishTaskError", "RedfishTimeout", "client_from_params", "parse_retry_after",
    "redfish_argument_spec",
]


class RedfishClient(Paging, Writes, Tasks):
    """A Redfish client for one BMC.

    ``RedfishClient(base_url, username, password, *, registries=None, registry_dir=None,
    sleep=time.sleep, **settings)``; ``settings`` are the fields of :class:`ClientSettings`
    (``verify``, ``ca_path``, ``connect_timeout``, ``read_timeout`` (seconds), ``retries``,
    ``backoff_s``, ``max_backoff_s``, ``max_retry_after_s``, ``max_concurrency``, ``auth``,
    ``use_expand``, ``page_cap``, ``keep_alive``), with its defaults.

    * ``base_url``: ``https://host[:port]`` (a trailing ``/redfish/v1`` is accepted).
    * ``registries``: a :class:`MessageRegistries`; or ``registry_dir`` to load one.
    * ``sleep``: how the client waits between retries and polls (seconds).

    Use as a context manager (``with RedfishClient(...) as c:``): it logs in on entry and
    always DELETEs the session on exit.  :attr:`requests` counts HTTP requests sent,
    :attr:`warnings` collects non-fatal findings (strings, no secrets).

    Raises :class:`RedfishConnectionError`, :class:`RedfishTimeout`,
    :class:`RedfishAuthError`, :class:`RedfishHTTPError`, :class:`RedfishTaskError`,
    :class:`RedfishIncomplete` (all :class:`RedfishError`).
    """

    def __init__(self, base_url: str, username: Optional[str] = None, password: Optional[str] = None, *,
                 registries: Optional[MessageRegistries] = None, registry_dir: Optional[str] = None,
                 sleep: Callable[[float], Any] = time.sleep, **settings: Any) -> None:
        super().__init__(base_url, username, password, settings=ClientSettings(**settings),
                         registries=registries, registry_dir=registry_dir, sleep=sleep)

    def __enter__(self) -> RedfishClient:
        self.open()
        return self

    def load_registries(self, errors: Optional[list[dict[str, Any]]] = None) -> int:
        """Read the message registries the BMC serves under ``/redfish/v1/Registries`` into
        :attr:`registries` (OEM prefixes such as ``IDRAC``/``iLO`` included).  Returns how
        many were added; unreadable files are skipped (listed in ``errors`` if given)."""
        added = 0
        files = self.members(SERVICE_ROOT + "/Registries", errors=errors)
        for f in files:
            for loc in f.get("Location") or []:
                if loc.get("Language") not in (None, "en"):
                    continue
                uri = loc.get("Uri")
                if not uri:
                    continue
                try:
                    doc = self.get(uri)
                except RedfishError as exc:
                    if errors is not None:
                        errors.append({"uri": uri, "reason": str(exc)})
                    continue
                if self.registries.add(doc, source="%s%s" % (self.host, uri)):
                    added += 1
        return added


def client_from_params(params: Mapping[str, Any], registries: Optional[MessageRegistries] = None) -> RedfishClient:
    """A :class:`RedfishClient` (not opened) from the params of a module built on :func:`redfish_argument_spec`.

    Raises :class:`ValidationError` when ``username`` or ``password`` is missing (the spec leaves
    them optional because the fleet modules may read them from a BMC map).
    """
    missing = [name for name in ("username", "password") if not params.get(name)]
    if missing:
        raise ValidationError("missing required arguments: %s (the password may come from $%s)"
                              % (", ".join(missing), PASSWORD_ENV), where="redfish")
    return RedfishClient(
        params["bmc_url"], params["username"], params["password"], verify=params.get("validate_certs", True),
        ca_path=params.get("ca_path"), connect_timeout=params.get("connect_timeout", 5),
        read_timeout=params.get("read_timeout", 30), retries=params.get("retries", 2),
        max_concurrency=params.get("max_concurrency", 4), auth=params.get("auth", "auto"),
        registries=registries, registry_dir=params.get("registry_dir"))
