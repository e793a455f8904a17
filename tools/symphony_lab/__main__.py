"""``python -m symphony_lab up|down|status|calibrate|degrade|restore|inventory`` (needs root for up/down/degrade/restore)."""

from __future__ import annotations

import argparse
import json
import sys

from . import _calibrate
from ._errors import LabError
from ._lab import Lab


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m symphony_lab", description=__doc__)
    parser.add_argument("--root", default="build/lab", help="lab folder (relative to the repository root)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="bring N lab hosts up (cleans up a crashed lab first)")
    up.add_argument("-n", type=int, default=4, help="number of lab hosts, 1..8 (default 4)")
    up.add_argument("--fresh", action="store_true", help="rebuild even if an identical lab is up")
    sub.add_parser("down", help="stop and remove everything the lab made")
    sub.add_parser("status", help="print the lab's state as JSON")
    sub.add_parser("calibrate", help="measure this machine again (fio, iperf3, stress-ng) into calibration.json")
    deg = sub.add_parser("degrade", help="rate-limit one host's interface or the path between two hosts")
    group = deg.add_mutually_exclusive_group(required=True)
    group.add_argument("--host", help="lab host whose interface is limited")
    group.add_argument("--link", nargs=2, metavar=("A", "B"), help="limit only the path between A and B")
    deg.add_argument("--rate", type=float, required=True, help="Mbit/s")
    sub.add_parser("restore", help="undo every degradation")
    sub.add_parser("inventory", help="print the Ansible inventory fragment")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "up":
            lab = Lab(n=args.n, root=args.root).up(fresh=args.fresh)
            print("lab up: %s (inventory %s, ssh -F %s, partition %s)" % (
                ", ".join("%s=%s" % (h["name"], h["address"]) for h in lab.hosts), lab.inventory,
                lab.ssh_config, lab.slurm))
            print("calibration %s: %s" % (lab.calibration_file, _calibrate.summary(lab.calibration)))
        elif args.cmd == "down":
            try:
                lab = Lab.load(args.root)
            except LabError:
                lab = Lab(root=args.root)
            lab.down()
            print("lab down")
        elif args.cmd == "status":
            try:
                print(json.dumps(Lab.load(args.root).status(), indent=2))
            except LabError:
                print(json.dumps({"up": False}))
                return 1
        elif args.cmd == "calibrate":
            lab = Lab.load(args.root)
            print("calibration %s: %s" % (lab.calibration_file, _calibrate.summary(lab.calibrate())))
        elif args.cmd == "degrade":
            lab = Lab.load(args.root)
            if args.host:
                lab.degrade_interface(args.host, args.rate)
            else:
                lab.degrade_link(args.link[0], args.link[1], args.rate)
            print(json.dumps(lab.degradations))
        elif args.cmd == "restore":
            Lab.load(args.root).restore()
            print("degradations removed")
        elif args.cmd == "inventory":
            sys.stdout.write(Lab.load(args.root).inventory.read_text())
    except LabError as exc:
        print("symphony_lab: %s" % exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
