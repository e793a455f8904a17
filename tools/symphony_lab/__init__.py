"""symphony_lab: the project's own test hosts in network namespaces on this machine (sshd, Slurm, degradable links).

    from symphony_lab import Lab
    lab = Lab(n=4).up()            # needs root; reuses an identical lab that is already up
    lab.hosts                      # [{"name": "lab1", "address": "10.77.0.11", "netns": "lab1"}, ...]
    lab.inventory, lab.ssh_config  # Ansible inventory fragment, ssh -F file
    lab.calibration                # build/lab/calibration.json: this machine measured at lab-up (fio, iperf3, stress-ng)
    lab.degrade_link("lab1", "lab2", 200); lab.restore()
    Lab.load().down()              # from another process, via build/lab/state.json

CLI: ``python -m symphony_lab up|down|status|calibrate|degrade|restore|inventory`` (``make lab-up`` / ``make lab-down``).
"""

import contextlib

from ._calibrate import HEALTHY_PAIR_FRACTION, pair_floor_gbps
from ._errors import LabError
from ._lab import Lab, ensure_packages

__all__ = ["HEALTHY_PAIR_FRACTION", "Lab", "LabError", "ensure_packages", "pair_floor_gbps", "running"]


@contextlib.contextmanager
def running(n=4, root="build/lab"):
    """Yield a running lab with at least ``n`` hosts; tear it down at exit only if this call brought it up.

    For test fixtures: ``with symphony_lab.running(4) as lab: ...`` (needs root; LabError otherwise).
    """
    lab, started = Lab.ensure(n=n, root=root)
    try:
        yield lab
    finally:
        if started:
            lab.down()
