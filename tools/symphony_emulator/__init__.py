"""symphony_emulator: a Redfish fleet emulator for tests, molecule, the demo and rehearsals.

Every node of a digital twin is served as its own stateful BMC (generated from twin + SKU
manifest), with seeded defects and fault injection; real captures are served read-only.
See README.md in this folder for the CLI, the defects and faults formats and the map file.
"""

from symphony_emulator.bmc import BMC
from symphony_emulator.firmware import demo_image_bytes
from symphony_emulator.replies import Reply
from symphony_emulator.capture import CaptureBMC
from symphony_emulator.config import DEFECT_KINDS, FAULT_DEFAULTS, load_defects, load_faults
from symphony_emulator.fleet import DEMO_PASSWORD, DEMO_USERNAME, CaptureServer, Fleet, NodeInfo

__all__ = ["BMC", "Reply", "CaptureBMC", "CaptureServer", "Fleet", "NodeInfo", "DEFECT_KINDS", "FAULT_DEFAULTS", "load_defects",
           "load_faults", "demo_image_bytes", "DEMO_USERNAME", "DEMO_PASSWORD"]
