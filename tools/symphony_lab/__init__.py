"""symphony_lab: the project's own test hosts in network namespaces on this machine (sshd, Slurm, degradable links).

    from symphony_lab import Lab
    lab = Lab(n=4).up()            # needs root; reuses an identical lab that is already up
    lab.hosts                      # [{"name": "lab1", "address": "10.77.0.11", "netns": "lab1"}, ...]
    lab.inventory, lab.ssh_config  # Ansible inventory fragment, ssh -F file
    lab.degrade_link("lab1", "lab2", 200); lab.restore()
    Lab.load().down()              # from another process, via build/lab/state.json

CLI: ``python -m symphony_lab up|down|status|degrade|restore|inventory`` (``make lab-up`` / ``make lab-down``).
"""

from ._errors import LabError
from ._lab import Lab, ensure_packages

__all__ = ["Lab", "LabError", "ensure_packages"]
