"""CLI: ``python -m symphony_emulator serve|stop|capture`` (see README.md)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import SymphonyError


def _parser():
    p = argparse.ArgumentParser(prog="python -m symphony_emulator", description="Redfish fleet emulator")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="serve every twin node as its own BMC")
    s.add_argument("--twin", required=True, help="twin file (inventories/<site>/*.twin.yml)")
    s.add_argument("--skus", help="SKU manifest directory (default: the twin's sku_dir)")
    s.add_argument("--defects", help="defects YAML (defects: {host: [{kind: ...}]})")
    s.add_argument("--faults", help="faults YAML (faults: {host|'*': {...}})")
    bind = s.add_mutually_exclusive_group()
    bind.add_argument("--bind-base", help="first loopback address; one address per node (e.g. 127.31.0.1)")
    bind.add_argument("--port-base", type=int, help="first port; one port per node on 127.0.0.1 (0: any free port)")
    s.add_argument("--port", type=int, help="port with --bind-base (default 443, or 80 with --http)")
    s.add_argument("--map", default="build/emulator/bmcs.json", help="map file to write (mode 0600)")
    s.add_argument("--http", action="store_true", help="plain HTTP instead of HTTPS with a generated CA")
    s.add_argument("--credentials", choices=["generated", "demo"], default="generated",
                   help="a random password per node, or the fixed demo pair")
    s.add_argument("--state-dir", help="where the CA and certificates go (default: next to the map file)")
    s.add_argument("--hosts", help="comma-separated hostnames to serve (default: all, spares included)")
    s.add_argument("--capture", action="append", default=[], metavar="NAME=MOCKUP_DIR",
                   help="also serve a real capture as BMC NAME")
    s.add_argument("--vm-nodes", type=int, default=0, metavar="N",
                   help="back the first N served nodes with real QEMU guests (needs qemu-system-x86_64, qemu.qmp)")
    s.add_argument("--vm-dir", help="where the guests' disks, consoles and QMP sockets go (default: a temp dir)")
    _background_args(s)

    c = sub.add_parser("capture", help="serve one real capture read-only, byte-identical")
    c.add_argument("--mockup", required=True, help="capture folder holding redfish/v1 (fixtures/mockups/<name>)")
    c.add_argument("--host", default="127.0.0.1")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--https", action="store_true", help="HTTPS with a generated CA (written to --state-dir)")
    c.add_argument("--state-dir", default="build/emulator/capture")
    _background_args(c)

    t = sub.add_parser("stop", help="stop a background emulator")
    t.add_argument("--pidfile", required=True)
    t.add_argument("--timeout", type=float, default=15.0)
    return p


def _background_args(p):
    p.add_argument("--background", action="store_true", help="detach; --pidfile required")
    p.add_argument("--pidfile", help="where --background writes the server's pid")
    p.add_argument("--ready-file", help=argparse.SUPPRESS)


def _spawn_background(args, argv):
    """Re-run this command detached, wait until it serves, write the pidfile."""
    if not args.pidfile:
        raise SystemExit("--background needs --pidfile")
    pidfile = os.path.abspath(args.pidfile)
    os.makedirs(os.path.dirname(pidfile), exist_ok=True)
    ready = pidfile + ".ready"
    if os.path.exists(ready):
        os.unlink(ready)
    child_argv = [a for a in argv if a != "--background"] + ["--ready-file", ready]
    log_path = (pidfile[:-len(".pid")] if pidfile.endswith(".pid") else pidfile) + ".log"  # emulator.pid -> emulator.log
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "symphony_emulator"] + child_argv, stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=os.environ.copy())
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if os.path.exists(ready):
            with open(pidfile, "w") as handle:
                handle.write("%d\n" % proc.pid)
            print("emulator running in the background, pid %d (log %s)" % (proc.pid, log_path))
            return 0
        if proc.poll() is not None:
            with open(log_path, "rb") as handle:
                tail = handle.read()[-2000:].decode("utf-8", "replace")
            print("emulator failed to start (exit %s):\n%s" % (proc.returncode, tail), file=sys.stderr)
            return 1
        time.sleep(0.1)
    proc.terminate()
    print("emulator did not become ready within 300 s (log %s)" % log_path, file=sys.stderr)
    return 1


def _wait_for_signal():
    done = threading.Event()

    def stop(_signum, _frame):
        done.set()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not done.is_set():
        done.wait(1.0)


def _serve(args):
    from symphony_emulator.fleet import Fleet

    captures = {}
    for item in args.capture:
        name, _, directory = item.partition("=")
        if not name or not directory:
            raise SystemExit("--capture wants NAME=MOCKUP_DIR, got %r" % item)
        captures[name] = directory
    map_path = os.path.abspath(args.map)
    state_dir = args.state_dir or os.path.dirname(map_path)
    hosts = [h for h in args.hosts.split(",") if h] if args.hosts else None
    fleet = Fleet(args.twin, args.skus, defects=args.defects, faults=args.faults, http=args.http,
                  bind_base=args.bind_base, port=args.port, port_base=args.port_base, credentials=args.credentials,
                  map_path=map_path, state_dir=state_dir, hosts=hosts, captures=captures,
                  vm_nodes=args.vm_nodes, vm_dir=args.vm_dir and os.path.abspath(args.vm_dir))
    fleet.start()
    print("serving %d BMCs over %s; map: %s%s" % (len(fleet.nodes), "HTTP" if args.http else "HTTPS", map_path,
                                                  "; CA: %s" % fleet.ca_bundle if fleet.ca_bundle else ""),
          flush=True)
    _ready(args)
    try:
        _wait_for_signal()
    finally:
        fleet.stop()
        for path in (map_path, args.ready_file):
            if path and os.path.exists(path):
                os.unlink(path)
    return 0


def _capture(args):
    from symphony_emulator.fleet import CaptureServer

    server = CaptureServer({"capture": args.mockup}, host=args.host, port=args.port, http=not args.https,
                           state_dir=os.path.abspath(args.state_dir))
    server.start()
    print("serving capture %s at %s%s" % (args.mockup, server.urls["capture"],
                                          "; CA: %s" % server.ca_bundle if server.ca_bundle else ""), flush=True)
    _ready(args)
    try:
        _wait_for_signal()
    finally:
        server.stop()
        if args.ready_file and os.path.exists(args.ready_file):
            os.unlink(args.ready_file)
    return 0


def _ready(args):
    if args.ready_file:
        with open(args.ready_file, "w") as handle:
            handle.write("%d\n" % os.getpid())


def _stop(args):
    try:
        with open(args.pidfile) as handle:
            pid = int(handle.read().strip())
    except (OSError, ValueError) as exc:
        print("cannot read pidfile %s: %s" % (args.pidfile, exc), file=sys.stderr)
        return 1
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        print("emulator pid %d is not running" % pid)
        os.unlink(args.pidfile)
        return 0
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        print("emulator pid %d did not stop within %.0f s" % (pid, args.timeout), file=sys.stderr)
        return 1
    os.unlink(args.pidfile)
    print("emulator pid %d stopped" % pid)
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    try:
        if args.command == "stop":
            return _stop(args)
        if getattr(args, "background", False):
            return _spawn_background(args, argv)
        if args.command == "serve":
            return _serve(args)
        return _capture(args)
    except SymphonyError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    except OSError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
