# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in's BMC SEL scan: mark the SEL before the tiers, judge what the BMC logged during them.

Two reads over Redfish from the controller, one before the node's tiers (:func:`sel_mark`: per
LogService the newest entry id and time) and one after them and the fabric tier; :func:`judge_sel`
compares the two and judges only the entries that appeared in between (check ``bmc_sel_scan``):

* any entry with Redfish ``Severity`` ``Critical`` fails the check, the entries named in the reason;
* ``Warning`` entries pass, listed in the reason;
* a BMC that cannot be read before or after (connection refused, timeout, 401, a LogService that
  cannot be read) makes the check ``not_run`` with that reason, never ``pass``.

Which entries are new: entry ``Id``s are numeric and increasing on every BMC the captures cover
(Supermicro Systems/1 and Managers/1 Log1, the emulator), while ``Created`` times are not (the
Supermicro SEL's clock-sync pairs go backwards: entry 5 is older than entry 4), so ids decide.  A
log whose newest id went down, or whose marked entry now holds another time or message, was cleared
or wrapped during burn-in: all its entries count as new.  Logs with non-numeric ids are compared by
the set of ids.  A LogService absent at the mark counts whole.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from .._core.errors import SymphonyError, ValidationError
from .._core.gate import BLOCKED, NOT_RUN, Outcome, failed, not_run, passed
from .._core.secrets import scrub
from .._fleet.batch import default_processes, run_batch, worker_lost
from .._fleet.bmcmap import load_bmc_map, map_secrets
from .._fleet.client import bmc_client, close_quietly
from .._fleet.endpoint import resolve_endpoint
from .._fleet.settings import BmcFleetSettings, connection_kwargs
from .._redfish.model import NodeInventory
# The reader's LogService walk (which logs are SELs, how an entry becomes a SelEntry) is reused as is; only
# the tree walk is narrowed to Systems/Managers -> LogServices, so a scan costs a few requests, not an audit.
from .._redfish.read_base import link
from .._redfish.read_logs import LogReader

CHECK = "bmc_sel_scan"
REMEDIATION = ("read the SEL entries the BMC logged during burn-in, replace or reseat the part they name "
               "(GPU, PSU, fan, DIMM, NVSwitch), clear the SEL (LogService.ClearLog) and rerun burn-in")
NOT_CONFIGURED = "no BMC credentials given (set burn_in_bmc_map or burn_in_bmc_username/burn_in_bmc_password)"
# How many distinct messages a reason names before "and N more".
REASON_MESSAGES = 5
OBSERVED_ENTRIES = 20
WINDOW = "during burn-in"


def _iso(ts):
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _num(entry_id):
    try:
        return int(str(entry_id), 10)
    except (TypeError, ValueError):
        return None


def _by_log(entries):
    logs = {}
    for entry in entries:
        logs.setdefault(entry.log or "", []).append(entry)
    return logs


def _sel_gaps(inv):
    return [g for g in (inv.incomplete or []) if g.get("part") in ("sel", "service")]


def _describe_gaps(gaps):
    first = gaps[0]
    text = "%s: %s" % (first.get("uri") or "?", first.get("reason") or "unreadable")
    return text + (" (and %d more)" % (len(gaps) - 1) if len(gaps) > 1 else "")


def sel_mark(inv, now=None):
    """Where each SEL stood before burn-in.

    ``inv``: a :class:`NodeInventory` with ``sel`` entries (from :func:`read_sel` or
    ``read_inventory``).  Returns a JSON-safe dict ``{"marked_at": ISO time (controller clock),
    "logs": {LogService @odata.id: {"entries": n, "last_id": newest numeric id or None,
    "last_created": its Created, "last_message": its Message, "ids": [ids] (only for non-numeric
    ids)}}, "incomplete": "uri: reason" or absent}``.
    """
    now = time.time() if now is None else now
    logs = {}
    for log, entries in _by_log(inv.sel).items():
        numeric = [(_num(e.id), e) for e in entries]
        info = {"entries": len(entries), "last_id": None, "last_created": None, "last_message": None}
        if numeric and all(n is not None for n, _entry in numeric):
            last_n, last = max(numeric, key=lambda pair: pair[0])
            info.update(last_id=last_n, last_created=last.created, last_message=last.message)
        else:
            info["ids"] = sorted(str(e.id) for e in entries)
        logs[log] = info
    mark = {"marked_at": _iso(now), "logs": logs}
    gaps = _sel_gaps(inv)
    if gaps:
        mark["incomplete"] = _describe_gaps(gaps)
    return mark


def new_entries(mark, inv):
    """The SEL entries of ``inv`` that are not in ``mark`` (see the module docstring for the rules).

    Returns ``(entries, notes)``: :class:`SelEntry` list in log then id order, and notes (strings)
    such as "the SEL /redfish/v1/.../Log1 was cleared during burn-in".
    """
    out, notes = [], []
    marked_logs = mark.get("logs") or {}
    for log, entries in _by_log(inv.sel).items():
        before = marked_logs.get(log)
        if before is None:
            if mark.get("incomplete"):
                # The mark could not read this log: its entries cannot be told apart (the check is not_run).
                notes.append("LogService %s was not read before burn-in: its %d entries were not judged"
                             % (log or "(unnamed)", len(entries)))
                continue
            notes.append("LogService %s was not there before burn-in: all its %d entries count"
                         % (log or "(unnamed)", len(entries)))
            out.extend(entries)
            continue
        if before.get("last_id") is None and before.get("entries"):
            known = set(before.get("ids") or ())
            out.extend(e for e in entries if str(e.id) not in known)
            continue
        last_id = before.get("last_id")
        nums = [_num(e.id) for e in entries]
        if last_id is None or any(n is None for n in nums):
            out.extend(entries)   # empty before, or ids stopped being numbers: everything is new
            continue
        same = [e for e, n in zip(entries, nums) if n == last_id]
        cleared = max(nums) < last_id or (same and (same[0].created != before.get("last_created")
                                                    or same[0].message != before.get("last_message")))
        if cleared:
            notes.append("the SEL %s was cleared or wrapped during burn-in (newest id %d, %d before): all its "
                         "%d entries count" % (log, max(nums), last_id, len(entries)))
            out.extend(entries)
        else:
            out.extend(e for e, n in zip(entries, nums) if n > last_id)
    out.sort(key=lambda e: (e.log or "", _num(e.id) if _num(e.id) is not None else -1, str(e.id)))
    return out, notes


def _text(entry):
    return (entry.message or entry.message_id or "(no message)").strip()


def describe_entries(entries, limit=REASON_MESSAGES, injected=()):
    """``'msg' at T`` per distinct message (``'msg' x3 from T1 to T2`` when repeated), in time order,
    at most ``limit`` messages then ``and N more``; a message in ``injected`` is followed by ``[injected]``."""
    groups = {}
    for entry in entries:
        groups.setdefault(_text(entry), []).append(entry.created or "an unknown time")
    parts = []
    marks = set(injected or ())
    for message, times in groups.items():
        tag = " [injected]" if message in marks else ""
        if len(times) == 1:
            parts.append("'%s' at %s%s" % (message, times[0], tag))
        else:
            parts.append("'%s' x%d from %s to %s%s" % (message, len(times), min(times), max(times), tag))
    if len(parts) > limit:
        parts = parts[:limit] + ["and %d more" % (len(parts) - limit)]
    return ", ".join(parts)


def _plural(n, word):
    return "%d %s entr%s" % (n, word, "y" if n == 1 else "ies")


def _observed(entries, marks=frozenset()):
    out = [{"id": e.id, "log": e.log, "created": e.created, "severity": e.severity, "message": e.message,
            "message_id": e.message_id} for e in entries[:OBSERVED_ENTRIES]]
    for row, entry in zip(out, entries):
        if _text(entry) in marks:
            row["injected"] = True
    return out


def judge_sel(mark, inv, error=None, injected=(), window=WINDOW):
    """Judge the entries the BMC logged between ``mark`` and ``inv``: an :class:`Outcome`.

    ``mark``: :func:`sel_mark`'s dict, or ``{"error": reason}`` when the BMC could not be read
    before burn-in (None: never marked); ``inv``: the :class:`NodeInventory` read after burn-in, or
    None with ``error`` (why the BMC could not be read).  ``fail`` on any new ``Critical`` entry
    (even when part of the SEL could not be read), ``not_run`` when the BMC or part of its SEL
    could not be read before or after, else ``pass`` with the new ``Warning`` entries in the reason.
    Severity is Redfish ``LogEntry.Severity`` (DSP0268: OK, Warning, Critical).  ``injected``: the messages of
    entries a fault-injection exercise wrote (the ledger's ``fault_injected`` events): such an entry is judged like
    any other and marked ``[injected]`` in the reason, ``injected`` in ``observed``.  ``window``: the words for
    when the entries were logged (``during burn-in``; the fleet audit's ``since the previous audit``).
    """
    if not mark:
        return not_run("the SEL was not marked before burn-in, so entries written during it cannot be told "
                       "from older ones")
    if mark.get("error"):
        return not_run("BMC SEL not read before burn-in: %s" % mark["error"])
    if inv is None:
        return not_run("BMC SEL not read after burn-in: %s" % (error or "no answer"))
    entries, notes = new_entries(mark, inv)
    critical = [e for e in entries if e.severity == "Critical"]
    warning = [e for e in entries if e.severity == "Warning"]
    marks = frozenset(m for m in (injected or ()) if m)
    observed = {"new_entries": len(entries), "critical": len(critical), "warning": len(warning),
                "marked_at": mark.get("marked_at"), "entries": _observed(critical + warning, marks)}
    if marks:
        observed["injected"] = any(_text(e) in marks for e in critical + warning)
    if notes:
        observed["notes"] = notes
    gaps = _sel_gaps(inv)
    if critical:
        reason = "SEL: %s %s: %s" % (_plural(len(critical), "Critical"), window,
                                     describe_entries(critical, injected=marks))
        if gaps:
            reason += "; part of the SEL could not be read (%s)" % _describe_gaps(gaps)
        return failed(reason, REMEDIATION, observed=observed, expected={"critical": 0})
    if gaps:
        return not_run("BMC SEL could not be read completely after burn-in (%s)" % _describe_gaps(gaps))
    if mark.get("incomplete"):
        return not_run("BMC SEL could not be read completely before burn-in (%s)" % mark["incomplete"])
    if warning:
        reason = "SEL: no Critical entries %s; %s: %s" % (
            window, _plural(len(warning), "Warning"), describe_entries(warning, injected=marks))
    else:
        reason = "SEL: no Critical or Warning entries %s (%d new entr%s)" % (
            window, len(entries), "y" if len(entries) == 1 else "ies")
    if notes:
        reason += "; " + "; ".join(notes)
    return passed(observed=observed, expected={"critical": 0}, reason=reason)


def check_dict(outcome, required=True):
    """The ``gate_record`` check dict for an :class:`Outcome` (name :data:`CHECK`)."""
    return {"name": CHECK, "status": outcome.status, "reason": outcome.reason, "remediation": outcome.remediation,
            "expected": outcome.expected, "observed": outcome.observed, "required": required}


def not_configured():
    """The check dict when no BMC access was given: ``not_run``, not required by the gate."""
    return check_dict(not_run(NOT_CONFIGURED), required=False)


# --------------------------------------------------------------------------- reading over Redfish


def read_sel(client):
    """Read only the SELs: Systems/* and Managers/* LogServices and their entries.

    ``client``: an opened :class:`RedfishClient` (or one with its interface).  Returns a
    :class:`NodeInventory` whose ``sel`` holds the entries (same LogService choice and
    :class:`SelEntry` fields as ``read_inventory``) and whose ``incomplete`` names what could
    not be read.  Raises :class:`RedfishError` only when the service root cannot be read.
    """
    start = getattr(client, "requests", 0)
    inv = NodeInventory()
    reader = LogReader(client, inv, sections=("sel",))
    root = client.service_root or reader.get("service", "/redfish/v1") or {}
    for collection in ("Systems", "Managers"):
        uri = link(root, collection)
        if not uri:
            continue
        for member in reader.members("sel", uri):
            logs = link(member, "LogServices")
            if logs:
                reader.read_logs(logs)
    inv.requests = getattr(client, "requests", 0) - start
    return inv


def _endpoint(host, bmc_map, addresses):
    """``(url or None, map entry)``: the BMC map first, then ``addresses`` (the twin's, address or URL)."""
    endpoint, entry = resolve_endpoint(host, bmc_map, address=(addresses or {}).get(host))
    return (endpoint["url"] if endpoint else None), entry


def observe(host, url, entry, settings, client_factory=None):
    """Read one BMC's SEL; never raises for the BMC's own problems.

    ``settings``: dict with ``username``, ``password``, ``validate_certs``, ``ca_path``, ``auth``,
    ``connect_timeout``/``read_timeout`` (seconds), ``retries``.  Returns ``(inv, error)``:
    the :class:`NodeInventory` or None, and the reason (no secrets) when it could not be read.
    """
    if not url:
        return None, "no BMC address for %s (not in the BMC map, no bmc_address)" % host
    client = None
    try:
        client = bmc_client(url, entry, BmcFleetSettings(**connection_kwargs(settings)), client_factory,
                            keep_alive=True)
        client.open()
        return read_sel(client), None
    except SymphonyError as exc:
        return None, "%s at %s: %s" % (type(exc).__name__, url, exc)
    except Exception as exc:  # pylint: disable=broad-except
        # One BMC's odd answer must end its own check, not the batch.
        return None, "unexpected %s reading the SEL at %s: %s" % (type(exc).__name__, url, exc)
    finally:
        close_quietly(client)


def sel_scan(params, client_factory=None, now=None):
    """The ``bmc_sel_scan`` module's work: params dict in, result dict out.

    ``params``: ``mode`` (``mark``/``check``), ``hosts`` (names), ``bmc_map`` (path, see
    ``_fleet.bmcmap.load_bmc_map``), ``bmc_addresses`` ({host: address or URL}), ``username``,
    ``password``, ``validate_certs``, ``ca_path``, ``auth``, ``connect_timeout``, ``read_timeout``
    (seconds), ``retries``, ``workers``, ``marks`` ({host: mark}, for ``check``), ``injected`` ({host:
    [messages a fault-injection exercise wrote]}, for ``check``), ``window`` (the reason's words for when).
    Returns ``{"changed": False, "marks": {host: mark}}`` for ``mark`` (a mark is
    ``{"error": reason}`` for a BMC that could not be read), ``{"changed": False, "checks":
    {host: gate_record check dict}, "summary": {status: n}, "failed_hosts": [...]}`` for ``check``.
    Passwords never appear in it.  Raises :class:`ValidationError` for a bad map file or mode.
    """
    mode = params.get("mode")
    if mode not in ("mark", "check"):
        raise ValidationError("mode must be mark or check, not %r" % mode, where="mode")
    bmc_map = load_bmc_map(params["bmc_map"]) if params.get("bmc_map") else {}
    secrets = map_secrets(params.get("password"), bmc_map)
    hosts = list(dict.fromkeys(params.get("hosts") or []))
    items = []
    for host in hosts:
        url, entry = _endpoint(host, bmc_map, params.get("bmc_addresses"))
        items.append((host, {"url": url, "entry": entry}))

    def work(host, item):
        return observe(host, item["url"], item["entry"], params, client_factory)

    outcomes = run_batch(items, work, workers=max(1, min(int(params.get("workers") or 64), len(items) or 1)),
                         key=lambda item: item["url"] or id(item),
                         processes=int(params.get("processes") or default_processes()))
    now = time.time() if now is None else now
    marks = params.get("marks") or {}
    out_marks, checks, summary = {}, {}, {}
    for host in hosts:
        outcome = outcomes[host]
        if outcome.ok:
            inv, error = outcome.value
        else:
            inv, error = None, outcome.error.get("msg") or str(outcome.error)
        error = scrub(error, secrets)
        if mode == "mark":
            out_marks[host] = sel_mark(inv, now) if inv is not None else {"error": error, "marked_at": _iso(now)}
            continue
        # a node whose worker process died is blocked with the reason: nothing was read, nothing is judged
        result = check_dict(Outcome(BLOCKED, error) if worker_lost(outcome) else judge_sel(
            marks.get(host), inv, error, injected=(params.get("injected") or {}).get(host) or (),
            window=params.get("window") or WINDOW))
        result["reason"] = scrub(result["reason"], secrets)
        checks[host] = result
        summary[result["status"]] = summary.get(result["status"], 0) + 1
    if mode == "mark":
        return {"changed": False, "marks": out_marks}
    return {"changed": False, "checks": checks, "summary": summary,
            "failed_hosts": sorted(h for h, c in checks.items() if c["status"] not in ("pass", NOT_RUN))}
