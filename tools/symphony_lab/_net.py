"""Network side of the lab: host addressing, namespaces + bridge + veths, and link degradation with tc htb.

What works on these machines (../shared/notes/lab-hosts.md): veth pairs into a Linux bridge, ``tc`` with
``tbf`` and ``htb`` (no ``netem``/``fq``), ``u32`` filters on the peer's address for a single path.
"""

from __future__ import annotations

import ipaddress

from ._errors import LabError

MAX_HOSTS = 16  # the demo fleet uses 10 (8 nodes + 2 spares); slurmd + sshd per host are cheap
HOST_OFFSET = 10          # lab<i> gets the /24's address .(10 + i)
NS_IFACE = "eth0"         # the interface name inside each namespace
VETH_PREFIX = "symlab-"   # root-namespace end of each veth: symlab-lab1 (<= 15 chars)


def host_plan(n, subnet="10.77.0.0/24", prefix="lab"):
    """Return the lab's addressing: ``(bridge_address, [host dicts])``.

    Each host dict is ``{"name": "lab1", "address": "10.77.0.11", "netns": "lab1", "veth": "symlab-lab1"}``.
    Raises LabError when ``n`` is outside 1..8 or ``subnet`` is not an IPv4 /24 in private space.
    """
    if not isinstance(n, int) or not 1 <= n <= MAX_HOSTS:
        raise LabError("number of lab hosts must be 1..%d, got %r" % (MAX_HOSTS, n), where="n")
    try:
        net = ipaddress.IPv4Network(subnet)
    except ValueError as exc:
        raise LabError("not an IPv4 network: %s" % exc, where="subnet") from exc
    if net.prefixlen != 24 or not net.is_private:
        raise LabError("lab subnet must be a private /24, got %s" % subnet, where="subnet")
    bridge = str(net.network_address + 1)
    hosts = []
    for i in range(1, n + 1):
        name = "%s%d" % (prefix, i)
        hosts.append({"name": name, "address": str(net.network_address + HOST_OFFSET + i), "netns": name,
                      "veth": VETH_PREFIX + name})
    return bridge, hosts


def up_commands(hosts, bridge, bridge_address, prefixlen=24):
    """The ``ip`` commands (argv lists) that build the bridge and one namespace + veth per host."""
    cmds = [
        ["ip", "link", "add", bridge, "type", "bridge"],
        ["ip", "addr", "add", "%s/%d" % (bridge_address, prefixlen), "dev", bridge],
        ["ip", "link", "set", bridge, "up"],
    ]
    for h in hosts:
        ns, veth = h["netns"], h["veth"]
        cmds += [
            ["ip", "netns", "add", ns],
            ["ip", "link", "add", veth, "type", "veth", "peer", "name", NS_IFACE, "netns", ns],
            ["ip", "link", "set", veth, "master", bridge],
            ["ip", "link", "set", veth, "up"],
            ["ip", "-n", ns, "addr", "add", "%s/%d" % (h["address"], prefixlen), "dev", NS_IFACE],
            ["ip", "-n", ns, "link", "set", "lo", "up"],
            ["ip", "-n", ns, "link", "set", NS_IFACE, "up"],
            # A default route so in-band facts (ansible_default_ipv4) name the lab interface; the root
            # namespace does not forward, so nothing leaves the lab's /24.
            ["ip", "-n", ns, "route", "add", "default", "via", bridge_address],
        ]
    return cmds


def _rate(mbit):
    return "%smbit" % (int(mbit) if float(mbit).is_integer() else float(mbit))


def validate_rate(rate_mbit, where):
    """Return ``rate_mbit`` as a float after checking it is a positive number (Mbit/s)."""
    try:
        rate = float(rate_mbit)
    except (TypeError, ValueError) as exc:
        raise LabError("rate must be a number of Mbit/s, got %r" % (rate_mbit,), where=where) from exc
    if rate <= 0:
        raise LabError("rate must be > 0 Mbit/s, got %r" % (rate_mbit,), where=where)
    return rate


def shaping_plan(hosts, interfaces, links):
    """The ``tc`` commands that realise the wanted degradation, from nothing (pure function).

    ``interfaces``: ``{host name: rate in Mbit/s}`` - everything in and out of that host is limited.
    ``links``: ``[[a, b, rate in Mbit/s], ...]`` - only traffic between hosts a and b is limited.

    Egress from a host is shaped inside its namespace: an htb root whose unclassified traffic goes out
    unshaped (``default 0``) unless the interface is degraded, and one htb class per degraded peer selected
    by a ``u32`` filter on the peer's address (``min`` of link and interface rate). Ingress to a degraded
    interface is shaped on the bridge side of its veth. Returns a list of argv lists.
    """
    by_name = {h["name"]: h for h in hosts}
    peers = {name: {} for name in by_name}
    for entry in links:
        a, b, rate = entry
        for x, y in ((a, b), (b, a)):
            if x not in by_name:
                raise LabError("unknown lab host %r" % x, where="degrade_link")
            peers[x][y] = min(rate, peers[x].get(y, rate))
    for name in interfaces:
        if name not in by_name:
            raise LabError("unknown lab host %r" % name, where="degrade_interface")
    cmds = []
    for h in hosts:
        name = h["name"]
        iface_rate = interfaces.get(name)
        path = peers[name]
        if iface_rate is None and not path:
            continue
        tc = ["tc", "-n", h["netns"]]
        dev = ["dev", NS_IFACE]
        if iface_rate is not None:
            cmds.append(tc + ["qdisc", "replace"] + dev + ["root", "handle", "1:", "htb", "default", "10"])
            cmds.append(tc + ["class", "add"] + dev + ["parent", "1:", "classid", "1:1", "htb",
                                                      "rate", _rate(iface_rate), "ceil", _rate(iface_rate)])
            cmds.append(tc + ["class", "add"] + dev + ["parent", "1:1", "classid", "1:10", "htb",
                                                      "rate", _rate(iface_rate), "ceil", _rate(iface_rate)])
            parent = "1:1"
        else:
            cmds.append(tc + ["qdisc", "replace"] + dev + ["root", "handle", "1:", "htb", "default", "0"])
            parent = "1:"
        for idx, peer in enumerate(sorted(path, key=lambda p: by_name[p]["address"])):
            rate = path[peer] if iface_rate is None else min(path[peer], iface_rate)
            classid = "1:%d" % (20 + idx)
            cmds.append(tc + ["class", "add"] + dev + ["parent", parent, "classid", classid, "htb",
                                                      "rate", _rate(rate), "ceil", _rate(rate)])
            cmds.append(tc + ["filter", "add"] + dev + ["parent", "1:", "protocol", "ip", "prio", "1", "u32",
                                                       "match", "ip", "dst", by_name[peer]["address"] + "/32",
                                                       "flowid", classid])
        if iface_rate is not None:
            veth = ["dev", h["veth"]]
            cmds.append(["tc", "qdisc", "replace"] + veth + ["root", "handle", "1:", "htb", "default", "10"])
            cmds.append(["tc", "class", "add"] + veth + ["parent", "1:", "classid", "1:10", "htb",
                                                        "rate", _rate(iface_rate), "ceil", _rate(iface_rate)])
    return cmds


def clear_commands(hosts):
    """The ``tc`` commands removing every root qdisc the lab may have set (errors are to be ignored)."""
    cmds = []
    for h in hosts:
        cmds.append(["tc", "-n", h["netns"], "qdisc", "del", "dev", NS_IFACE, "root"])
        cmds.append(["tc", "qdisc", "del", "dev", h["veth"], "root"])
    return cmds
