# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side batched work over many BMCs (DESIGN.md, "Scale").

One Ansible task hands the play's batch of hosts to :func:`run_batch`, which runs
``work(host, item)`` on a bounded pool of threads with a cap on how many items
may talk to one BMC at once, and gives every host its own :class:`HostOutcome`.
An exception in one host's work, including one we did not foresee, ends that
host only: it is reported for that host with its message, never raised, so one
bad BMC cannot crash the run for thousands of others.

Threads (not processes) because the work is network-bound: 1 000 BMCs at 100 ms
per request keep a few hundred requests in flight while the GIL is idle.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field

from .._core.errors import SymphonyError, ValidationError
from .._redfish.argspec import bmc_connection_argument_spec

DEFAULT_WORKERS = 64
DEFAULT_PER_BMC = 1


@dataclass
class HostOutcome:
    """What :func:`run_batch` returns per host.

    ``ok``: ``work`` returned; ``value``: its return value; ``error``: the error
    dict (``SymphonyError.to_dict()`` shape) when it raised; ``elapsed_s``:
    seconds in ``work``; ``waited_s``: seconds queued before it started.
    """

    host: str
    ok: bool
    value: object = None
    error: dict = field(default_factory=dict)
    elapsed_s: float = 0.0
    waited_s: float = 0.0


def run_batch(items, work, workers=DEFAULT_WORKERS, per_key=DEFAULT_PER_BMC, key=None, on_done=None,
              clock=time.monotonic):
    """Run ``work(host, item)`` for each ``(host, item)`` in ``items``; return ``{host: HostOutcome}``.

    ``workers``: threads (bounded, at least 1, at most the number of items);
    ``per_key``: at most this many items with the same ``key(item)`` run at once
    (the per-BMC cap: two hosts behind one BMC endpoint never overload it);
    ``key``: ``callable(item) -> hashable`` (default: each item is its own key);
    ``on_done``: ``callable(HostOutcome)`` called as each host finishes (from a
    worker thread; keep it short and thread-safe).
    Items are started in the given order as far as the per-key cap allows.
    Raises :class:`ValidationError` on duplicate hosts or non-positive limits.
    """
    items = list(items)
    if workers < 1 or per_key < 1:
        raise ValidationError("workers (%r) and per-BMC cap (%r) must be at least 1" % (workers, per_key),
                              where="fleet")
    hosts = [pair[0] for pair in items]
    if len(set(hosts)) != len(hosts):
        dup = sorted({h for h in hosts if hosts.count(h) > 1})
        raise ValidationError("hosts listed twice: %s" % ", ".join(dup[:10]), where="fleet")
    key = key or id
    pending = deque((host, item, key(item)) for host, item in items)
    running = {}
    results = {}
    lock = threading.Condition()
    start = clock()

    def take():
        # Caller holds the lock.  First pending item whose BMC has room.
        for index, (host, item, k) in enumerate(pending):
            if running.get(k, 0) < per_key:
                del pending[index]
                running[k] = running.get(k, 0) + 1
                return host, item, k
        return None

    def worker():
        while True:
            with lock:
                job = take()
                while job is None:
                    if not pending:
                        return
                    lock.wait()
                    job = take()
            host, item, k = job
            began = clock()
            try:
                outcome = HostOutcome(host, True, work(host, item))
            except SymphonyError as exc:
                outcome = HostOutcome(host, False, error=exc.to_dict())
            except Exception as exc:  # pylint: disable=broad-except
                # A bug for this host must not end the run for the others; it is reported as one.
                outcome = HostOutcome(host, False, error={
                    "error": type(exc).__name__, "msg": "internal error: %s: %s" % (type(exc).__name__, exc),
                    "where": host, "details": {"traceback": traceback.format_exc(limit=6)}})
            outcome.elapsed_s = clock() - began
            outcome.waited_s = began - start
            with lock:
                results[host] = outcome
                running[k] -= 1
                lock.notify_all()
            if on_done is not None:
                on_done(outcome)

    count = max(1, min(int(workers), len(items)))
    threads = [threading.Thread(target=worker, name="symphony-fleet-%d" % i, daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {host: results[host] for host in hosts}


# The modules' side: the fleet options documented in doc_fragments/fleet.py, on top of _redfish.argspec's.
_TWIN_BATCH_SPEC = {
    "nodes": {"type": "list", "elements": "dict"},
    "twin": {"type": "path"},
    "hosts": {"type": "list", "elements": "str"},
    "sku_dir": {"type": "path", "required": True},
    "max_concurrency": {"type": "int", "default": 4},
    "per_bmc": {"type": "int", "default": DEFAULT_PER_BMC},
    "registry_dir": {"type": "path"},
}

# AnsibleModule keyword arguments of the twin-batch modules: nodes from O(nodes) or from O(twin), not both.
TWIN_BATCH_MODULE_KWARGS = {"mutually_exclusive": [("nodes", "twin")], "required_one_of": [("nodes", "twin")]}


def fleet_argument_spec(options=None, twin_batch=False, workers=DEFAULT_WORKERS):
    """The argument spec of a controller-side fleet module (doc fragments ``symphony.cluster.redfish`` and
    ``symphony.cluster.fleet``).

    Returns a new dict: the one BMC connection spec (``_redfish.argspec.bmc_connection_argument_spec``),
    ``bmc_map`` and ``workers`` (default ``workers`` threads), with ``twin_batch`` also
    ``nodes``/``twin``/``hosts``/``sku_dir``/``max_concurrency``/``per_bmc``/``registry_dir`` (fragment
    ``symphony.cluster.fleet.TWIN_BATCH``), then the module's own ``options`` (name -> spec), which may
    not redefine a shared one.  Raises :class:`ValueError` if one does.
    """
    spec = bmc_connection_argument_spec()
    spec["bmc_map"] = {"type": "path"}
    spec["workers"] = {"type": "int", "default": workers}
    if twin_batch:
        spec.update((name, dict(option)) for name, option in _TWIN_BATCH_SPEC.items())
    options = options or {}
    clash = sorted(set(spec) & set(options))
    if clash:
        raise ValueError("module options redefine shared fleet options: %s" % ", ".join(clash))
    spec.update(options)
    return spec


# The module_utils' side: settings, clients and nodes of the stages that work through a batch of BMCs.
@dataclass
class BmcFleetSettings:
    """How a controller-side stage reaches its BMCs (fields shared by the stages' settings).

    ``connect_timeout``/``read_timeout`` in seconds (per request); ``retries``: re-sends after
    connection errors, timeouts, 408/429/5xx; ``workers``: threads of the controller-side pool;
    ``per_bmc``: nodes handled at once behind one BMC endpoint; ``max_concurrency``: Redfish
    requests in flight to one BMC; ``bmc_map``: path of a map file (per-node url/credentials/CA,
    see ``_predeploy.load_bmc_map``); ``ledger``: ledger path or None (nothing written);
    ``optional``: checks the gate does not require; ``registry_dir``: Redfish message registries.
    """

    username: str = None
    password: str = None
    validate_certs: bool = True
    ca_path: str = None
    auth: str = "auto"
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    retries: int = 2
    workers: int = DEFAULT_WORKERS
    per_bmc: int = DEFAULT_PER_BMC
    max_concurrency: int = 4
    bmc_map: str = None
    ledger: str = None
    optional: tuple = ()
    registry_dir: str = None


def _count(params, name, default):
    """A pool size from ``params``: missing takes ``default``; below 1 is an error (a pool of 0 would hang or, with
    ``or default``, silently become the default)."""
    value = params.get(name)
    if value is None:
        return default
    if int(value) < 1:
        raise ValidationError("%s must be at least 1, got %r" % (name, value), where=name)
    return int(value)


def fleet_settings_kwargs(params, workers=DEFAULT_WORKERS):
    """The :class:`BmcFleetSettings` fields but ``ledger`` from module params (``fleet_argument_spec``
    names), a missing or empty value taking the default (``workers`` threads).  Returns a dict.
    Raises :class:`ValidationError` naming the option when ``workers``, ``per_bmc`` or ``max_concurrency`` is
    below 1."""
    return {
        "username": params.get("username"), "password": params.get("password"),
        "validate_certs": params.get("validate_certs", True), "ca_path": params.get("ca_path"),
        "auth": params.get("auth") or "auto", "connect_timeout": params.get("connect_timeout") or 5.0,
        "read_timeout": params.get("read_timeout") or 30.0, "retries": params.get("retries", 2),
        "workers": _count(params, "workers", workers), "per_bmc": _count(params, "per_bmc", DEFAULT_PER_BMC),
        "max_concurrency": _count(params, "max_concurrency", 4), "bmc_map": params.get("bmc_map"),
        "optional": tuple(params.get("optional") or ()), "registry_dir": params.get("registry_dir"),
    }


def require_credentials(settings, where):
    """Raise :class:`ValidationError` (at ``where``) unless ``settings`` has a BMC map or a user and password."""
    if not settings.bmc_map and not (settings.username and settings.password):
        raise ValidationError("give username and password (vault/AWX credential) or a bmc_map with credentials",
                              where=where)


def bmc_client(factory, url, entry, settings, **kwargs):
    """A Redfish client for one BMC: ``factory(url, ...)`` (``RedfishClient``'s signature).

    ``entry``: the node's BMC map entry (``username``/``password``/``ca_path``/``validate_certs``
    override ``settings``, a :class:`BmcFleetSettings`); ``kwargs`` are passed on (``registries``,
    ``keep_alive``).  The client is not opened.
    """
    verify = settings.validate_certs if entry.get("validate_certs") is None else bool(entry["validate_certs"])
    return factory(url, username=entry.get("username") or settings.username,
                   password=entry.get("password") or settings.password, verify=verify,
                   ca_path=entry.get("ca_path") or settings.ca_path, connect_timeout=settings.connect_timeout,
                   read_timeout=settings.read_timeout, retries=settings.retries,
                   max_concurrency=settings.max_concurrency, auth=settings.auth, **kwargs)


def twin_nodes_from_params(params, manifests, required=("sku",)):
    """``{hostname: twin node}`` from ``params["nodes"]`` (twin node dicts) or ``params["twin"]`` (+ ``hosts``).

    ``manifests``: ``{sku: manifest}`` (the twin's SKUs must be among them); ``required``: keys
    every given node must have besides ``hostname``.  Raises :class:`ValidationError` naming the
    node index and key, the hosts not in the twin, or neither source given.
    """
    from .._core.twin import load_twin

    if params.get("nodes"):
        nodes = {}
        for i, node in enumerate(params["nodes"]):
            if not isinstance(node, dict) or not node.get("hostname"):
                raise ValidationError("nodes[%d] is not a twin node (no hostname)" % i, where="nodes")
            for key in required:
                if not node.get(key):
                    raise ValidationError("nodes[%d] (%s) has no %s" % (i, node["hostname"], key), where="nodes")
            nodes[node["hostname"]] = node
        return nodes
    if params.get("twin"):
        twin = load_twin(params["twin"], manifests.keys())
        wanted = params.get("hosts") or list(twin.nodes)
        unknown = [h for h in wanted if h not in twin.nodes]
        if unknown:
            raise ValidationError("hosts not in the twin: %s" % ", ".join(unknown[:10]), where=params["twin"])
        return {h: twin.nodes[h] for h in wanted}
    raise ValidationError("give nodes (twin node dicts) or twin (a twin file)", where="nodes")
