"""The emulated fleet: every twin node as its own BMC, served from one background event loop.

Python API for tests::

    with Fleet("inventories/demo/demo.twin.yml", "skus", defects="d.yml", http=True) as fleet:
        node = fleet.nodes["gpu-r01-u02"]          # .url .username .password .address .port
        fleet.stats("gpu-r01-u02")                 # {"GET": n, "POST": n, "PATCH": n, "DELETE": n, "writes": n, ...}
        fleet.state("gpu-r01-u02")                 # power, boot_state, firmware, bios, tasks, ...

The same data is served per BMC at ``/_emulator/state`` and ``/_emulator/stats`` for other processes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import secrets
import tempfile
import threading

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
from ansible_collections.symphony.cluster.plugins.module_utils._core import twin as _twin

from symphony_emulator import tls
from symphony_emulator.bmc import BMC
from symphony_emulator.capture import CaptureBMC
from symphony_emulator.config import load_defects, load_faults
from symphony_emulator.server import EmulatorServer, free_port
from symphony_emulator.tree import Spec
from symphony_emulator.vm import Guest, require_qemu

DEMO_USERNAME = "admin"
DEMO_PASSWORD = "symphony-demo-bmc"


def load_twin(path, known_skus=None):
    """Load a twin file, also when it is an inventory source (see :func:`_twin.load_twin`)."""
    return _twin.load_twin(str(path), known_skus)


class NodeInfo:
    """Where one emulated BMC answers and with which credentials."""

    __slots__ = ("hostname", "url", "username", "password", "address", "port", "reachable")

    def __init__(self, hostname, url, username, password, address, port, reachable=True):
        self.hostname, self.url, self.username, self.password = hostname, url, username, password
        self.address, self.port, self.reachable = address, port, reachable

    def as_dict(self):
        return {"url": self.url, "username": self.username, "password": self.password, "address": self.address,
                "port": self.port}

    def __repr__(self):   # never print the password
        return "NodeInfo(%s, %s)" % (self.hostname, self.url)


def write_json_0600(path, data):
    """Write ``data`` as JSON atomically with mode 0600 (the map file holds credentials)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".map-")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class _LoopThread:
    """Runs ``self._start()`` on a private event loop in a daemon thread until :meth:`stop`."""

    _loop = None
    _thread = None
    _server = None
    _tmp = None

    def start(self):
        ready = threading.Event()
        failure = []

        def run():
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._start())
            except BaseException as exc:   # reported to the caller of start()
                failure.append(exc)
                if self._server is not None:
                    loop.run_until_complete(self._server.close())
                loop.close()
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._server.close())
            loop.close()

        self._thread = threading.Thread(target=run, name="symphony-emulator", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            raise failure[0]
        return self

    def stop(self):
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _ssl(self, state_dir, addresses):
        if self.http:
            return None
        if state_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="symphony-emulator-")
            state_dir = self._tmp.name
        paths = tls.make_certificates(os.path.join(state_dir, "tls"), addresses)
        self.ca_bundle = paths["ca"]
        return tls.server_context(paths)


class CaptureServer(_LoopThread):
    """Serve real captures read-only: ``{name: mockup dir}``; ``urls[name]`` after start.

    One port per capture on ``host`` (``port`` for the first, then ``port + 1``...; 0 = any free).
    """

    def __init__(self, mockups, host="127.0.0.1", port=0, http=True, state_dir=None):
        if not isinstance(mockups, dict):
            mockups = {os.path.basename(str(mockups).rstrip("/")): mockups}
        self.bmcs = {name: CaptureBMC(path) for name, path in mockups.items()}
        self.host, self.port, self.http, self.state_dir = host, port, http, state_dir
        self.urls = {}
        self.ca_bundle = None

    async def _start(self):
        self._server = EmulatorServer(self._ssl(self.state_dir, [self.host]))
        for i, (name, bmc) in enumerate(self.bmcs.items()):
            port = await self._server.add(bmc, self.host, self.port + i if self.port else 0)
            self.urls[name] = "%s://%s:%d" % ("http" if self.http else "https", self.host, port)


class Fleet(_LoopThread):
    """Serve every node of ``twin`` (path or loaded Twin) as a BMC.

    Binding: ``bind_base`` (first loopback address; one address per node on ``port``, default 443
    for HTTPS, 80 for HTTP), else ``port_base`` (one port per node on 127.0.0.1; 0 = any free
    port, the default).  ``credentials``: ``"generated"`` (a random password per node) or
    ``"demo"`` (one fixed pair).  ``http=False`` serves HTTPS with a CA generated into
    ``state_dir`` (its path is :attr:`ca_bundle`).  ``hosts``: serve only these hostnames.
    ``captures``: ``{name: mockup dir}`` served alongside as read-only BMCs.
    ``vm_nodes``: hostnames (or a count: the first N served) whose System is a real QEMU guest (``vm.py``), its
    files under ``vm_dir``; ``vm_disk_seeds``: ``{hostname: image}`` a guest's disk starts as.  Missing QEMU or
    qemu.qmp raises :class:`ValidationError` here, never a silent fallback to a field-flipping System.
    Raises :class:`ValidationError` (bad twin/SKU/defects/faults) or ``OSError`` (cannot bind).
    """

    def __init__(self, twin, skus_dir=None, defects=None, faults=None, http=False, bind_base=None, port=None,
                 port_base=None, credentials="generated", map_path=None, state_dir=None, hosts=None,
                 captures=None, vm_nodes=None, vm_dir=None, vm_disk_seeds=None, vm_memory_mib=2048):
        if isinstance(twin, _twin.Twin):
            self.twin = twin
            skus_dir = skus_dir or twin.sku_dir
            self.skus = load_skus(skus_dir)
        else:
            probe = load_twin(str(twin))
            skus_dir = skus_dir or probe.sku_dir
            if not skus_dir:
                raise ValidationError("no SKU directory: pass skus_dir or set sku_dir in the twin", where=str(twin))
            self.skus = load_skus(str(skus_dir))
            self.twin = load_twin(str(twin), self.skus.keys())
        names = list(self.twin.nodes) if hosts is None else list(hosts)
        for name in names:
            if name not in self.twin.nodes:
                raise ValidationError("host %r is not in the twin" % name, where=self.twin.path)
        self.defects = load_defects(defects, self.twin.nodes, self.skus)
        self.faults = load_faults(faults)
        self.http = http
        self.credentials = credentials
        self.map_path = map_path
        self.state_dir = state_dir
        self.captures = dict(captures or {})
        self.bind_base = bind_base
        self.port = port if port is not None else (80 if http else 443)
        self.port_base = port_base if port_base is not None else 0
        self.names = names
        self.vm_nodes = names[:vm_nodes] if isinstance(vm_nodes, int) else list(vm_nodes or [])
        if self.vm_nodes:
            require_qemu()
        self.vm_dir = vm_dir
        self.vm_disk_seeds = dict(vm_disk_seeds or {})
        self.vm_memory_mib = vm_memory_mib
        self._vm_tmp = None
        self.bmcs = {}
        self.nodes = {}
        self.ca_bundle = None

    # ------------------------------------------------------------------ build and bind
    def _build(self):
        for name in self.names:
            node = self.twin.nodes[name]
            spec = Spec(node, self.skus[node["sku"]], self.defects.get(name, []))
            if self.credentials == "demo":
                user, password = DEMO_USERNAME, DEMO_PASSWORD
            else:
                user, password = DEMO_USERNAME, secrets.token_urlsafe(12)
            real_password = password + "-rotated" if spec.defect("wrong_credentials") else password
            bmc = BMC(spec, user, real_password, self.faults)
            bmc.map_password = password
            if name in self.vm_nodes:
                if self._vm_tmp is None and not self.vm_dir:
                    self._vm_tmp = tempfile.TemporaryDirectory(prefix="symphony-vm-")
                bmc.attach_vm(Guest(name, os.path.join(self.vm_dir or self._vm_tmp.name, name),
                                    memory_mib=self.vm_memory_mib, disk_seed=self.vm_disk_seeds.get(name)))
            self.bmcs[name] = bmc
        for name, directory in self.captures.items():
            self.bmcs[name] = CaptureBMC(directory)

    def _addresses(self):
        out = {}
        names = list(self.bmcs)
        if self.bind_base:
            base = ipaddress.ip_address(self.bind_base)
            for i, name in enumerate(names):
                addr = base + i
                if not addr.is_loopback:
                    raise ValidationError("bind address %s is not loopback (127.0.0.0/8)" % addr, where="bind_base")
                out[name] = (str(addr), self.port)
        else:
            for i, name in enumerate(names):
                out[name] = ("127.0.0.1", self.port_base + i if self.port_base else 0)
        return out

    async def _start(self):
        addresses = self._addresses()
        self._server = EmulatorServer(self._ssl(self.state_dir, {a for a, _ in addresses.values()}))
        scheme = "http" if self.http else "https"
        for name, (addr, port) in addresses.items():
            bmc = self.bmcs[name]
            reachable = bmc.reachable() if isinstance(bmc, BMC) else True
            if reachable:
                port = await self._server.add(bmc, addr, port)
            elif port == 0:
                port = free_port(addr)   # nothing listens: connection refused (bmc_unreachable)
            user = getattr(bmc, "username", DEMO_USERNAME)
            password = getattr(bmc, "map_password", "")
            self.nodes[name] = NodeInfo(name, "%s://%s:%d" % (scheme, addr, port), user, password, addr, port,
                                        reachable)

    def start(self):
        """Build every BMC, bind, and serve from a background thread; returns self."""
        self._build()
        _LoopThread.start(self)
        if self.map_path:
            self.write_map(self.map_path)
        return self

    # ------------------------------------------------------------------ observing
    def _call(self, fn):
        if self._loop is None or not self._thread.is_alive():
            return fn()

        async def wrapper():
            return fn()
        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(timeout=30)

    def bmc(self, hostname):
        """The BMC object itself (mutate it only through :meth:`call`)."""
        return self.bmcs[hostname]

    def call(self, fn):
        """Run ``fn()`` on the emulator's event loop thread and return its result."""
        return self._call(fn)

    def stats(self, hostname):
        """``{"GET": n, "HEAD": n, "POST": n, "PATCH": n, "PUT": n, "DELETE": n, "writes": n, ...}``.

        ``writes`` counts POST/PATCH/PUT/DELETE except session login/logout."""
        return self._call(lambda: json.loads(json.dumps(self.bmcs[hostname].stats)))

    def reset_stats(self, hostname=None):
        names = [hostname] if hostname else list(self.bmcs)
        self._call(lambda: [self.bmcs[n].reset_stats() for n in names if hasattr(self.bmcs[n], "reset_stats")])

    def state(self, hostname):
        """Power, boot state, firmware versions, BIOS current/pending, tasks (see README)."""
        return self._call(lambda: self.bmcs[hostname].describe())

    def set_faults(self, hostname, values):
        """Replace one node's fault overrides at run time; returns the effective faults."""
        return self._call(lambda: self.bmcs[hostname].set_faults(values))

    def inject_sel(self, hostname, message, severity="Critical", sensor_type="Critical Interrupt"):
        """Append one SEL entry to ``hostname``'s BMC, marked injected (as ``POST /_emulator/sel``); returns it."""
        values = {"message": message, "severity": severity, "sensor_type": sensor_type}
        return self._call(lambda: self.bmcs[hostname].inject_sel(values))

    def stop(self):
        """Stop serving (so no request starts a guest again), then every QEMU guest: a guest never outlives its
        emulator."""
        try:
            _LoopThread.stop(self)
        finally:
            for bmc in self.bmcs.values():
                if getattr(bmc, "vm", None) is not None:
                    bmc.vm.close()
            if self._vm_tmp is not None:
                self._vm_tmp.cleanup()
                self._vm_tmp = None

    def map_data(self):
        nodes = {n: i.as_dict() for n, i in self.nodes.items()}
        for name in self.vm_nodes:   # the guest's sshd, forwarded from 127.0.0.1 (user-mode networking)
            vm = self.bmcs[name].vm
            nodes[name]["inband"] = {"address": "127.0.0.1", "port": vm.ssh_port, "console": vm.serial}
        return {"ca_bundle": self.ca_bundle, "nodes": nodes}

    def write_map(self, path):
        """Write the node -> BMC URL and credentials map, mode 0600."""
        write_json_0600(path, self.map_data())
        return path
