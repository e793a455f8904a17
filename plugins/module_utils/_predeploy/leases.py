# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DHCP leases: the three lease files a BMC's address is found in, parsed each in its documented format.

Three lease sources are read, each in its own documented format:

* ISC dhcpd ``dhcpd.leases`` (dhcpd.leases(5)): ``lease <ip> { ... }`` stanzas,
  appended over time, so the *last* stanza for an address wins; ``binding state``,
  ``starts``/``ends`` (``<weekday> YYYY/MM/DD HH:MM:SS`` in UTC, or ``epoch <n>;``
  with ``db-time-format local``, or ``never``), ``hardware ethernet``,
  ``client-hostname``.
* Kea memfile ``kea-leases4.csv`` (Kea ARM, "Memfile - Basic Storage for Leases"):
  a header naming the columns (``address,hwaddr,client_id,valid_lifetime,expire,
  subnet_id,fqdn_fwd,fqdn_rev,hostname,state,user_context[,pool_id]``), rows
  appended; a later row for an address supersedes earlier ones, ``valid_lifetime``
  0 marks a deleted lease, ``state`` 0 = default (active), 1 = declined,
  2 = expired-reclaimed, 3 = released; ``expire`` is UNIX seconds; commas inside
  values are escaped as ``&#x2c``.
* dnsmasq ``dnsmasq.leases``: one line per lease,
  ``<expiry epoch> <mac> <ip> <hostname|*> <client-id|*>`` (expiry 0 = infinite);
  a ``duid`` line starts the DHCPv6 section, which is skipped.

MACs are normalised with netaddr (``3c:ec:ef:12:34:56``) so the twin's ``3C-EC-EF-..``
and a lease's ``3c:ec:ef:..`` compare equal.  :class:`LeaseIndex` answers which lease a MAC holds and who holds
an address.
"""

from __future__ import annotations

import calendar
import csv
import io
import re
import time
from dataclasses import dataclass, asdict
from typing import Any, Iterable, Optional

from .._core.errors import ParseError, ValidationError

try:
    import netaddr
    HAS_NETADDR = True
except ImportError:  # reported by the caller with missing_required_lib
    HAS_NETADDR = False

LEASE_FORMATS = ("isc", "kea", "dnsmasq")
KEA_STATES = {0: "active", 1: "declined", 2: "expired", 3: "released"}


@dataclass
class Lease:
    """One DHCPv4 lease as the server last wrote it.

    ``mac``: netaddr-normalised (``aa:bb:cc:dd:ee:ff``) or None; ``state``:
    ``active``/``free``/``expired``/``released``/``declined``/``abandoned``/``backup``;
    ``starts``/``ends``: UNIX seconds (UTC) or None (``ends`` None = never expires);
    ``line``: 1-based line in the file where the lease starts.
    """

    address: str
    mac: Optional[str] = None
    state: str = "active"
    starts: Optional[float] = None
    ends: Optional[float] = None
    hostname: Optional[str] = None
    subnet_id: Optional[int] = None
    source: str = ""
    line: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The lease as a JSON-ready dict (its fields)."""
        return asdict(self)

    def is_current(self, now: float) -> bool:
        """True when the lease is active and not past its end at ``now`` (UNIX seconds)."""
        return self.state == "active" and (self.ends is None or self.ends > now)


def normalise_mac(value: Any, where: str = "mac") -> str:
    """``'3C-EC-EF-12-34-56'`` -> ``'3c:ec:ef:12:34:56'``; raises :class:`ValidationError` when malformed."""
    if not HAS_NETADDR:
        raise ValidationError("the netaddr Python library is required", where=where)
    try:
        return str(netaddr.EUI(str(value).strip(), dialect=netaddr.mac_unix_expanded))
    except (netaddr.AddrFormatError, TypeError, ValueError):
        raise ValidationError("malformed MAC address %r" % (value,), where=where)


def _address(value, where):
    try:
        addr = netaddr.IPAddress(value)
    except (netaddr.AddrFormatError, TypeError, ValueError):
        raise ParseError("%r is not an IP address" % (value,), where=where)
    return str(addr)


# --------------------------------------------------------------------------- ISC dhcpd

_ISC_TIME = re.compile(r"^\d\s+(\d{4}/\d{1,2}/\d{1,2}\s+\d{1,2}:\d{2}:\d{2})$")


def _isc_time(value, where):
    value = value.strip()
    if value == "never":
        return None
    if value.startswith("epoch "):
        try:
            return float(value.split()[1])
        except (IndexError, ValueError):
            raise ParseError("bad epoch time %r" % value, where=where)
    match = _ISC_TIME.match(value)
    if not match:
        raise ParseError("bad lease time %r (expected '<weekday> YYYY/MM/DD HH:MM:SS')" % value, where=where)
    return float(calendar.timegm(time.strptime(match.group(1), "%Y/%m/%d %H:%M:%S")))


def _isc_tokens(text):
    """Yield ``(line, statement-or-brace)`` with comments and quoted strings handled."""
    line, buf, start_line, i, n = 1, [], 1, 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                if text[j] == "\\":
                    j += 1
                j += 1
            if not buf:
                start_line = line
            buf.append(text[i:j + 1])
            line += text[i:j + 1].count("\n")
            i = j + 1
            continue
        if ch in "{};":
            stmt = "".join(buf).strip()
            yield start_line, stmt, ch
            buf = []
            i += 1
            continue
        if ch == "\n":
            line += 1
        if not buf:
            if ch.isspace():
                i += 1
                continue
            start_line = line
        buf.append(ch)
        i += 1
    if "".join(buf).strip():
        yield start_line, "".join(buf).strip(), ""


def parse_isc_leases(text: str, where: str = "dhcpd.leases") -> list[Lease]:
    """Parse an ISC dhcpd leases file into a list of :class:`Lease` (file order, duplicates kept).

    Only ``lease <ip> { }`` stanzas are leases; ``host``, ``server-duid``,
    ``failover peer`` and ``authoring-byte-order`` statements are skipped.
    Raises :class:`ParseError` naming ``where`` and the line on an unbalanced brace,
    a bad address or a bad time.
    """
    leases, depth, current, skip_depth = [], 0, None, None
    for line, stmt, term in _isc_tokens(text):
        loc = "%s:%d" % (where, line)
        if term == "{":
            depth += 1
            if depth == 1 and stmt.startswith("lease "):
                parts = stmt.split()
                if len(parts) != 2:
                    raise ParseError("bad lease header %r" % stmt, where=loc)
                current = Lease(address=_address(parts[1], loc), state="active", source="isc", line=line)
            elif current is None and skip_depth is None:
                skip_depth = depth
            continue
        if term == "}":
            if stmt:
                raise ParseError("statement %r is missing its ';'" % stmt, where=loc)
            if depth == 0:
                raise ParseError("unbalanced '}'", where=loc)
            if current is not None and depth == 1:
                leases.append(current)
                current = None
            if skip_depth is not None and depth == skip_depth:
                skip_depth = None
            depth -= 1
            continue
        if term == "":
            raise ParseError("unterminated statement %r at end of file" % stmt, where=loc)
        if current is None or depth != 1 or not stmt:
            continue
        words = stmt.split(None, 1)
        key, rest = words[0], words[1] if len(words) > 1 else ""
        if key == "starts":
            current.starts = _isc_time(rest, loc)
        elif key == "ends":
            current.ends = _isc_time(rest, loc)
        elif key == "binding" and rest.startswith("state "):
            current.state = rest.split()[1]
        elif key == "hardware":
            hw = rest.split()
            if len(hw) == 2 and hw[0] == "ethernet":
                current.mac = normalise_mac(hw[1], loc)
        elif key == "client-hostname":
            current.hostname = rest.strip().strip('"')
    if depth != 0:
        raise ParseError("unbalanced '{' (file ends inside a stanza)", where=where)
    return leases


# --------------------------------------------------------------------------- Kea

def parse_kea_csv(text: str, where: str = "kea-leases4.csv") -> list[Lease]:
    """Parse a Kea memfile lease4 CSV into a list of :class:`Lease` (file order, duplicates kept).

    Columns are found by the header's names (they vary by Kea version).  A row
    with ``valid_lifetime`` 0 is a deletion marker and becomes state ``deleted``.
    Raises :class:`ParseError` naming ``where`` and the line when the header lacks
    ``address``/``hwaddr``/``expire``/``state`` or a row is malformed.
    """
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise ParseError("empty file (no header)", where=where)
    header = [h.strip() for h in header]
    for column in ("address", "hwaddr", "expire", "state"):
        if column not in header:
            raise ParseError("header has no %r column (is this a Kea lease4 CSV?)" % column, where=where + ":1")
    idx = {name: i for i, name in enumerate(header)}
    leases = []
    for row in reader:
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()) or row[0].startswith("#"):
            continue
        loc = "%s:%d" % (where, line)
        if len(row) < len(header) - 2:  # newer columns may be absent in old rows
            raise ParseError("row has %d fields, header has %d" % (len(row), len(header)), where=loc)

        def col(name, default=""):
            i = idx.get(name)
            if i is None or i >= len(row):
                return default
            return row[i].replace("&#x2c", ",").strip()

        try:
            expire = float(col("expire") or 0)
            lifetime = float(col("valid_lifetime") or 0) if "valid_lifetime" in idx else None
            state_code = int(col("state") or 0)
            subnet = int(col("subnet_id")) if col("subnet_id") else None
        except ValueError as exc:
            raise ParseError("bad number in row: %s" % exc, where=loc)
        state = KEA_STATES.get(state_code, "unknown(%d)" % state_code)
        if lifetime == 0:
            state = "deleted"
        hw = col("hwaddr")
        leases.append(Lease(
            address=_address(col("address"), loc),
            mac=normalise_mac(hw, loc) if hw else None,
            state=state,
            starts=(expire - lifetime) if lifetime else None,
            ends=expire,
            hostname=col("hostname").rstrip(".") or None,
            subnet_id=subnet, source="kea", line=line,
        ))
    return leases


# --------------------------------------------------------------------------- dnsmasq

def parse_dnsmasq_leases(text: str, where: str = "dnsmasq.leases") -> list[Lease]:
    """Parse a dnsmasq leases file into a list of :class:`Lease` (IPv4 part only).

    Raises :class:`ParseError` naming ``where`` and the line on a short line or bad value.
    """
    leases = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        loc = "%s:%d" % (where, number)
        fields = line.split()
        if fields[0] == "duid":
            break  # the DHCPv6 section follows; BMC discovery is DHCPv4
        if len(fields) < 4:
            raise ParseError("expected '<expiry> <mac> <ip> <hostname> [<client-id>]', got %r" % line, where=loc)
        try:
            expiry = float(fields[0])
        except ValueError:
            raise ParseError("bad expiry %r" % fields[0], where=loc)
        mac = fields[1]
        # dnsmasq writes non-Ethernet hardware as "<hwtype>-<mac>"; Ethernet as a plain MAC.
        if re.match(r"^\d+-", mac):
            mac = mac.split("-", 1)[1]
        leases.append(Lease(
            address=_address(fields[2], loc),
            mac=normalise_mac(mac, loc),
            state="active",
            ends=None if expiry == 0 else expiry,
            hostname=None if fields[3] == "*" else fields[3],
            source="dnsmasq", line=number,
        ))
    return leases


_PARSERS = {"isc": parse_isc_leases, "kea": parse_kea_csv, "dnsmasq": parse_dnsmasq_leases}


def read_leases(path: str, fmt: str) -> list[Lease]:
    """Read and parse the lease file at ``path`` in format ``fmt`` (``isc``/``kea``/``dnsmasq``).

    Raises :class:`ValidationError` on an unknown format, :class:`ParseError` when
    the file is unreadable or malformed (naming the file and line).
    """
    if fmt not in _PARSERS:
        raise ValidationError("unknown lease format %r (one of %s)" % (fmt, ", ".join(LEASE_FORMATS)),
                              where="lease_format")
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as exc:
        raise ParseError("cannot read lease file: %s" % exc.strerror, where=path)
    return _PARSERS[fmt](text, where=path)


class LeaseIndex:
    """The current view of a lease file: latest lease per address, looked up by MAC.

    Later records supersede earlier ones for the same address (all three servers
    append).  ``now`` (UNIX seconds) decides which leases have ended.
    """

    def __init__(self, leases: Iterable[Lease], now: Optional[float] = None) -> None:
        self.now = time.time() if now is None else now
        latest = {}
        for lease in leases:
            latest[lease.address] = lease
        self.by_address = latest
        self.by_mac = {}
        for lease in latest.values():
            if lease.mac:
                self.by_mac.setdefault(lease.mac, []).append(lease)

    def find(self, mac: Any) -> tuple[Optional[Lease], str]:
        """Return ``(lease, note)`` for ``mac``.

        ``lease`` is the current lease with the latest start (None when there is
        none); ``note`` says, in words, why there is none (``"no lease for
        3c:ec:..:56"``, ``"lease of 10.0.0.7 for 3c:..:56 ended 2024-05-02T22:11:12Z
        (state free)"``).
        """
        mac = normalise_mac(mac)
        candidates = self.by_mac.get(mac, [])
        current = [le for le in candidates if le.is_current(self.now)]
        if current:
            best = max(current, key=lambda le: (le.starts or 0, le.ends or float("inf")))
            return best, ""
        if not candidates:
            return None, "no DHCP lease for BMC MAC %s" % mac
        last = max(candidates, key=lambda le: (le.ends or 0))
        ended = (" ended %s" % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(last.ends))
                 if last.ends is not None else "")
        return None, "only a stale lease for BMC MAC %s: %s%s (state %s)" % (mac, last.address, ended, last.state)

    def holder(self, address: str) -> Optional[Lease]:
        """The current lease of ``address`` (any MAC), or None."""
        lease = self.by_address.get(str(address))
        return lease if lease is not None and lease.is_current(self.now) else None
