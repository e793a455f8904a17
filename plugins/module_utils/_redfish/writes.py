# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writes of the Redfish client: PATCH with ETag/If-Match, POST, DELETE and multipart firmware push.

* PATCH with a fresh GET for ``If-Match`` and exactly one GET+retry on 428 (R-1, R-4; on 412
  sushy's connector retries a weak ETag as strong, then without If-Match);
* 2xx bodies carrying ``SystemResetRequired`` mean "pending reboot" (R-20);
* every write returns the same result dict (:func:`action_result`).
"""

from __future__ import annotations

import json
from typing import Any, Optional

from .errors import RedfishHTTPError
from .registries import message_key
from .session import Session
from .transport import RedfishResponse


def action_result(rsp: RedfishResponse, etag: Optional[str]) -> dict[str, Any]:
    """The result of a write: ``{"status", "location", "task_monitor", "retry_after_s" (seconds), "body",
    "extended_info", "pending_reboot", "etag"}``; ``task_monitor`` is the Location of a 202 answer."""
    pending = any(message_key(e.get("MessageId")) == "SystemResetRequired" for e in rsp.extended_info)
    return {
        "status": rsp.status,
        "location": rsp.location,
        "task_monitor": rsp.location if rsp.status == 202 else None,
        "retry_after_s": rsp.retry_after_s,
        "body": rsp.body,
        "extended_info": rsp.extended_info,
        "pending_reboot": pending,
        "etag": etag,
    }


class Writes(Session):
    """PATCH/POST/DELETE on top of the logged-in transport."""

    def etag_of(self, path: str) -> Optional[str]:
        """GET ``path`` and return its ETag (``ETag`` header, else ``@odata.etag``) or None."""
        rsp = self._send("GET", path, expect_json=True)
        return rsp.etag

    def patch(self, path: str, body: Any, etag: Optional[str] = "auto",
              headers: Optional[dict[str, str]] = None) -> dict[str, Any]:
        """PATCH ``path`` with ``body`` and an ``If-Match`` from a fresh GET.

        ``etag``: ``"auto"`` (GET first; ETag header or ``@odata.etag``), a string, or None
        (no If-Match).  On 428 Precondition Required: exactly one GET + retry with If-Match
        (R-1).  On 412 sushy retries a weak ETag as strong, then without If-Match (R-4).
        Returns ``{"status", "pending_reboot", "extended_info", "body", "etag", "location"}``;
        ``pending_reboot`` is True when a 2xx body carries ``SystemResetRequired`` (R-20).
        Raises :class:`RedfishHTTPError` (with every ExtendedInfo entry, R-21) and the rest.
        """
        if etag == "auto":
            etag = self.etag_of(path)
        try:
            rsp = self._send("PATCH", path, body=body, headers=headers, etag=etag)
        except RedfishHTTPError as exc:
            if exc.status != 428:
                raise
            fresh = self.etag_of(path)
            if not fresh:
                raise RedfishHTTPError(
                    str(exc.message) + "; the BMC requires If-Match but exposes no ETag on %s" % path,
                    where=exc.where, status=428, method="PATCH", path=path, extended_info=exc.extended_info) \
                    from None
            self._warn("%s PATCH %s: 428 Precondition Required; retried once with If-Match" % (self.host, path))
            etag = fresh
            rsp = self._send("PATCH", path, body=body, headers=headers, etag=etag)
        return action_result(rsp, etag)

    def post(self, path: str, body: Any = None, headers: Optional[dict[str, str]] = None) -> dict[str, Any]:
        """POST ``path`` -> ``{"status", "location", "task_monitor", "retry_after_s", "body",
        "extended_info", "pending_reboot"}``.  ``task_monitor`` is the absolute Location of a 202
        answer (pass it to ``wait_task``)."""
        rsp = self._send("POST", path, body=body, headers=headers)
        return action_result(rsp, None)

    def delete(self, path: str) -> dict[str, Any]:
        """DELETE ``path`` -> ``{"status", ...}`` (same shape as :meth:`post`)."""
        return action_result(self._send("DELETE", path), None)

    def multipart_push(self, uri: str, image_bytes: bytes, params: Optional[dict[str, Any]] = None,
                       filename: str = "image.bin") -> dict[str, Any]:
        """POST a firmware image to ``MultipartHttpPushUri`` (DSP0266 §12.2: parts
        ``UpdateParameters`` (JSON) and ``UpdateFile``).  Returns as :meth:`post`."""
        files = {
            "UpdateParameters": (None, json.dumps(params or {}), "application/json"),
            "UpdateFile": (filename, image_bytes, "application/octet-stream"),
        }
        rsp = self._send("POST", uri, files=files)
        return action_result(rsp, None)
