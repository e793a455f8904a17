# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The settings of one ``RedfishClient`` (timeouts, retries, TLS, concurrency, auth mode), one dataclass.

The client's keyword arguments are these fields; callers that build clients from module
parameters (``argspec.client_from_params``, ``_fleet``) pass them by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .._core.errors import RedfishError

AUTH_MODES = ("session", "basic", "auto")
# The ONE default of re-sends after a transient fault (the client's, the connection spec's, the fleet settings').
# 3 re-sends with backoff 0.5, 1, 2 s: at the chaos suite's 30 % 5xx a request fails for good 0.8 % of the time.
DEFAULT_RETRIES = 3
# How long a BMC may take to come back from a reboot (``bmc_reboot_timeout_s``, seconds; the modules' default): the
# entry check waits this long for a BMC still rebooting, provisioning for one rebooting after its own update.
# shared/cases/redfish-cases.md R-18 times a BMC's own update at 180 s of refused/reset connections then 60 s of
# 503; 900 s was provisioning's value before the option was shared, kept so a slow BMC is not cut short.
DEFAULT_REBOOT_TIMEOUT_S = 900.0


@dataclass
class ClientSettings:
    """How a ``RedfishClient`` talks to its BMC; every field has the client's default.

    * ``verify``/``ca_path``: TLS verification is on by default; ``ca_path`` is a CA bundle
      file or directory; ``verify=False`` adds a warning to the client's ``warnings``.
    * ``connect_timeout``/``read_timeout``: seconds, per request.
    * ``retries``: re-sends after the first attempt; backoff ``backoff_s * 2**n`` seconds
      capped at ``max_backoff_s``, or the server's ``Retry-After`` (seconds, capped at
      ``max_retry_after_s``).
    * ``reboot_wait_s``: how long :meth:`Session.open` waits for a BMC whose service root answers like one
      still rebooting (connection reset, 503), in seconds; 0 (the library's default) does not wait.
    * ``max_concurrency``: at most this many requests in flight to this BMC at once.
    * ``auth``: ``session`` (X-Auth-Token, DELETEd at close), ``basic``, or ``auto``
      (session, falling back to Basic if a session cannot be created).
    * ``use_expand``: use ``$expand`` where the service advertises it; ``page_cap``: most
      ``Members@odata.nextLink`` pages read per collection.
    * ``keep_alive``: reuse HTTP connections (up to ``max_concurrency`` per BMC) for the
      client's lifetime instead of sushy's ``Connection: close`` per request; meant for
      bursts of reads (an audit lasts seconds).  Off by default: some older BMCs (HPE iLO)
      choke on long-lived connections (reference/numbers.md, "Round-trips").

    Out-of-range counts are clamped as the client always did (``retries`` >= 0,
    ``max_concurrency`` and ``page_cap`` >= 1).
    """

    verify: bool = True
    ca_path: Optional[str] = None
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    retries: int = DEFAULT_RETRIES
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 120.0
    max_concurrency: int = 4
    auth: str = "auto"
    use_expand: bool = True
    page_cap: int = 100
    keep_alive: bool = False
    reboot_wait_s: float = 0.0

    def __post_init__(self) -> None:
        if self.auth not in AUTH_MODES:
            raise RedfishError("auth must be session, basic or auto, not %r" % (self.auth,), where="auth")
        self.connect_timeout = float(self.connect_timeout)
        self.read_timeout = float(self.read_timeout)
        self.retries = max(0, int(self.retries))
        self.backoff_s = float(self.backoff_s)
        self.max_backoff_s = float(self.max_backoff_s)
        self.max_retry_after_s = float(self.max_retry_after_s)
        self.max_concurrency = max(1, int(self.max_concurrency))
        self.use_expand = bool(self.use_expand)
        self.page_cap = max(1, int(self.page_cap))
        self.keep_alive = bool(self.keep_alive)
        self.reboot_wait_s = max(0.0, float(self.reboot_wait_s))
