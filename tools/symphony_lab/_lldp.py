"""The lab's cabled fabric: "switch" namespaces, one veth "cable" per lab host and rail, and lldpd everywhere.

Verified recipe (../shared/notes/lldp-in-netns.md): one lldpd per namespace with its own control socket and only
the interfaces it should speak on; every namespace shares the machine's host name, so each daemon is told its own
(``configure system hostname``), and switch ports are named by interface (``portidsubtype ifname``).  The settings
go in a per-daemon file given with ``-O``: lldpd reads it before it sends its first frame, so a switch port set
``rx-only`` (a switch that sends no LLDP) never leaks one frame that its neighbour would remember for the TTL.

Layout: leaf ``leafR`` (rail R-1) is namespace ``symsw-leafR``; lab host ``labI``'s interface ``railK`` is cabled to
``swpI`` of leaf ``K+1``.  A swapped host has its two rails' switch ends exchanged (rail0 on leaf2, rail1 on
leaf1); a silent switch port runs ``lldp status rx-only``.  The plan (what a twin would say) is always the
unswapped wiring.
"""

from __future__ import annotations

from ._errors import LabError

SWITCH_PREFIX = "symsw-"   # network namespace of a lab switch: symsw-leaf1
SOCKET = "/run/lldpd-%s.sock"  # one lldpd control socket per namespace (host or switch)


def fabric_plan(hosts, leaves=2, swap=(), silent=()):
    """The wiring: ``{"switches": [{name, netns, rail}], "cables": [{host, netns, iface, leaf, switch_port,
    planned_leaf, planned_port, rail}], "silent": [(leaf, swpN)]}``.

    ``swap``: host names whose first two rails are cabled to each other's leaf; ``silent``: ``(leaf name, host
    name)`` pairs whose switch port sends no LLDP.  Raises LabError for an unknown host or leaf, or a swap with
    fewer than two leaves.
    """
    if not 1 <= leaves <= 8:
        raise LabError("leaves must be 1..8, got %r" % (leaves,), where="leaves")
    names = {h["name"]: (index + 1, h) for index, h in enumerate(hosts)}
    switches = [{"name": "leaf%d" % (r + 1), "netns": SWITCH_PREFIX + "leaf%d" % (r + 1), "rail": r}
                for r in range(leaves)]
    for host in list(swap) + [h for _leaf, h in silent]:
        if host not in names:
            raise LabError("unknown lab host %r" % host, where="fabric")
    if swap and leaves < 2:
        raise LabError("a swap needs two leaves", where="fabric")
    cables = []
    for name, (index, h) in names.items():
        for r in range(leaves):
            wired = (1 - r) if name in swap and r < 2 else r
            cables.append({"host": name, "netns": h["netns"], "iface": "rail%d" % r, "rail": r,
                           "leaf": switches[wired]["name"], "switch_port": "swp%d" % index,
                           "planned_leaf": switches[r]["name"], "planned_port": index})
    quiet = []
    for leaf, host in silent:
        if leaf not in {s["name"] for s in switches}:
            raise LabError("unknown lab leaf %r" % leaf, where="fabric")
        quiet.append((leaf, "swp%d" % names[host][0]))
    return {"switches": switches, "cables": cables, "silent": quiet}


def up_commands(plan):
    """The ``ip`` argv lists that make the switch namespaces and the cables (veth pairs), all links up."""
    cmds = [["ip", "netns", "add", s["netns"]] for s in plan["switches"]]
    netns = {s["name"]: s["netns"] for s in plan["switches"]}
    for c in plan["cables"]:
        sw = netns[c["leaf"]]
        cmds += [["ip", "link", "add", c["iface"], "netns", c["netns"], "type", "veth", "peer", "name",
                  c["switch_port"], "netns", sw],
                 ["ip", "-n", c["netns"], "link", "set", c["iface"], "up"],
                 ["ip", "-n", sw, "link", "set", c["switch_port"], "up"]]
    return cmds


def daemon_config(name, silent_ports=()):
    """lldpd's ``-O`` file for namespace ``name``: its system name, interface-name port ids, a frame every second
    with a 4 s TTL (a recabled port forgets its old neighbour in seconds, not lldpd's default 120 s), silent ports."""
    lines = ["configure system hostname %s" % name, "configure lldp portidsubtype ifname",
             "configure lldp tx-interval 1", "configure lldp tx-hold 4"]
    lines += ["configure ports %s lldp status rx-only" % port for port in silent_ports]
    return "\n".join(lines) + "\n"


def daemons(plan, host_netns):
    """One lldpd per namespace: ``[{"name", "netns", "socket", "interfaces", "config"}]`` for the lab hosts
    (``host_netns``: ``{host name: netns}``, speaking on their rails) and the switches (on ``swp*``)."""
    rails = sorted({c["iface"] for c in plan["cables"]})
    out = [{"name": host, "netns": ns, "socket": SOCKET % host, "interfaces": ",".join(rails),
            "config": daemon_config(host)} for host, ns in host_netns.items()]
    for s in plan["switches"]:
        quiet = [port for leaf, port in plan["silent"] if leaf == s["name"]]
        out.append({"name": s["name"], "netns": s["netns"], "socket": SOCKET % s["name"], "interfaces": "swp*",
                    "config": daemon_config(s["name"], quiet)})
    return out


def lldpd_argv(lldpd, lldpcli, daemon, config_path):
    """argv of one foreground lldpd (``-d``: the lab records its pid and stops it at teardown)."""
    return [lldpd, "-d", "-u", daemon["socket"], "-I", daemon["interfaces"], "-L", lldpcli, "-O", str(config_path)]


def twin_fabric(plan, host):
    """The twin ``fabric`` entries of ``host`` as planned (the unswapped wiring): one Ethernet port per rail."""
    return [{"rail": c["rail"], "leaf": c["planned_leaf"], "port": c["planned_port"], "iface": c["iface"],
             "link_layer": "ethernet"} for c in plan["cables"] if c["host"] == host]


def swap_commands(plan, host):
    """The ``ip`` argv lists that exchange the cables of ``host``'s first two rails while the lab runs (a
    technician's swapped pair): both veth pairs are unplugged (deleted) and plugged in again, each host rail on the
    other's leaf port.  Moving the switch ends between namespaces instead would keep their names and ifindexes, and
    lldpd would go on sending on the departed device.  Returns ``(commands, new plan)``.  Raises LabError for a
    host without two rails."""
    mine = [c for c in plan["cables"] if c["host"] == host and c["rail"] in (0, 1)]
    if len(mine) != 2:
        raise LabError("lab host %r has no two rails to swap" % host, where="swap")
    netns = {s["name"]: s["netns"] for s in plan["switches"]}
    a, b = mine
    swapped = [dict(a, leaf=b["leaf"], switch_port=b["switch_port"]), dict(b, leaf=a["leaf"], switch_port=a["switch_port"])]
    cmds = [["ip", "-n", c["netns"], "link", "delete", c["iface"]] for c in mine]
    for c in swapped:
        cmds += [["ip", "link", "add", c["iface"], "netns", c["netns"], "type", "veth", "peer", "name",
                  c["switch_port"], "netns", netns[c["leaf"]]],
                 ["ip", "-n", c["netns"], "link", "set", c["iface"], "up"],
                 ["ip", "-n", netns[c["leaf"]], "link", "set", c["switch_port"], "up"]]
    cables = [swapped[0] if c is a else swapped[1] if c is b else c for c in plan["cables"]]
    return cmds, dict(plan, cables=cables)
