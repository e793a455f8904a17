"""The lab: N test hosts in network namespaces on this machine, each with sshd and slurmd, degradable links.

Layout of what ``Lab.up()`` makes (all removed by ``Lab.down()``):

- a bridge ``symlab0`` in the root namespace holding the /24's ``.1`` (10.77.0.1 by default);
- per host ``labI``: network namespace ``labI`` (``ip netns``), a UTS namespace bound at
  ``/run/symlab/uts/labI`` (so ``hostname`` says ``labI`` inside), veth ``symlab-labI`` <-> ``eth0`` with address
  ``.(10+I)``, an sshd on port 22 and a ``slurmd -N labI``, both started with ``nsenter`` into both namespaces;
- munged (unless one already answers) and slurmctld in the root namespace, partition ``lab`` over lab1..labN;
- under ``root`` (``build/lab``): ``state.json``, ``calibration.json`` (this machine measured once, see
  ``_calibrate``), ``ssh/`` (lab host key, lab client key, known_hosts),
  ``ssh_config``, ``inventory.yml``, ``slurm/`` (slurm.conf, state, spool, logs), ``logs/``;
- ``/etc/slurm/slurm.conf`` as a symlink to ``build/lab/slurm/slurm.conf`` (only if that path is free or is
  already the lab's link), so ``sbatch``/``srun``/``scontrol`` work without ``SLURM_CONF``, in the root namespace
  and on every lab host (they share this machine's filesystem).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import pathlib
import random
import shutil
import socket
import subprocess
import time

from . import _calibrate, _lldp, _net, _proc, _slurm, _ssh
from ._errors import LabError

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
UTS_DIR = pathlib.Path("/run/symlab/uts")
LOCK_FILE = pathlib.Path("/run/lock/symphony-lab.lock")
ETC_SLURM_CONF = pathlib.Path("/etc/slurm/slurm.conf")
ETC_HOSTS = pathlib.Path("/etc/hosts")
ETC_HOSTS_MARKER = "# symphony-lab"


def _strip_etc_hosts():
    """Remove the lines the lab added to /etc/hosts (marked with ETC_HOSTS_MARKER), keeping the rest as it was."""
    try:
        text = ETC_HOSTS.read_text(encoding="utf-8")
    except FileNotFoundError:
        return
    kept = [line for line in text.splitlines(True) if not line.rstrip().endswith(ETC_HOSTS_MARKER)]
    if len(kept) != len(text.splitlines(True)):
        # /etc/hosts may be a bind mount (containers): rewrite in place rather than replace the file.
        with open(ETC_HOSTS, "w", encoding="utf-8") as handle:
            handle.write("".join(kept))
MUNGE_KEY = pathlib.Path("/etc/munge/munge.key")
MUNGE_RUN = pathlib.Path("/run/munge")
MUNGE_MARKER = "/run/munge/symlab-munged.pid"   # munged's --pid-file: how a crashed lab's munged is found

# executable -> Debian package that provides it (installed by `make debs`, or here when missing).
REQUIRED = {
    "ip": "iproute2", "tc": "iproute2", "nsenter": "util-linux", "unshare": "util-linux",
    "setpriv": "util-linux", "sshd": "openssh-server", "ssh": "openssh-client", "ssh-keygen": "openssh-client",
    "slurmctld": "slurm-wlm", "slurmd": "slurm-wlm", "sbatch": "slurm-wlm", "srun": "slurm-wlm",
    "sinfo": "slurm-wlm", "scontrol": "slurm-wlm", "munged": "munge", "munge": "munge", "unmunge": "munge",
    "mungekey": "munge", "iperf3": "iperf3", "lldpd": "lldpd", "lldpcli": "lldpd",
}
_SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _which(exe):
    return shutil.which(exe, path=os.environ.get("PATH", "") + ":" + _SBIN_PATH)


def ensure_packages():
    """Install the Debian packages the lab needs, only those whose executables are missing (needs root)."""
    missing = sorted({pkg for exe, pkg in REQUIRED.items() if _which(exe) is None})
    if not missing:
        return []
    if os.geteuid() != 0:
        raise LabError("missing Debian packages %s and not root to install them" % " ".join(missing),
                       where="apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _proc.run(["apt-get", "update", "-qq"], timeout=600, env=env)
    _proc.run(["apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-qq", "--no-install-recommends"]
              + missing, timeout=900, env=env)
    return missing


def _resolve(root):
    path = pathlib.Path(root)
    return path if path.is_absolute() else (REPO_ROOT / path)


def _tcp_open(address, port, timeout=0.3):
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _locked():
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class Lab:
    """The lab hosts (see module docstring).

    ``Lab(n=4, root="build/lab")``: ``n`` hosts (1..8), ``root`` relative to the repository root unless absolute.
    ``.up()`` / ``.down()`` need root. A later process finds a running lab with ``Lab.load()`` (reads
    ``<root>/state.json``). Every failure raises :class:`LabError` naming the host, file or command.
    """

    slurm = _slurm.PARTITION

    def __init__(self, n=4, root="build/lab", subnet="10.77.0.0/24", bridge="symlab0"):
        self.n = n
        self.root = _resolve(root)
        self.subnet = subnet
        self.bridge = bridge
        self.bridge_address, self._hosts = _net.host_plan(n, subnet)
        self.state_file = self.root / "state.json"
        self.ssh_dir = self.root / "ssh"
        self.client_key = self.ssh_dir / "id_ed25519"
        self.host_key = self.ssh_dir / "ssh_host_ed25519_key"
        self.known_hosts = self.ssh_dir / "known_hosts"
        self.authorized_keys = self.ssh_dir / "authorized_keys"
        self.sshd_config = self.ssh_dir / "sshd_config"
        self.ssh_config = self.root / "ssh_config"
        self.inventory = self.root / "inventory.yml"
        self.slurm_dir = self.root / "slurm"
        self.slurm_conf = self.slurm_dir / "slurm.conf"
        self.log_dir = self.root / "logs"
        self.calibration_file = self.root / "calibration.json"
        self._state = None

    # ------------------------------------------------------------------ public view
    @property
    def hosts(self):
        """``[{"name": "lab1", "address": "10.77.0.11", "netns": "lab1"}, ...]``."""
        return [{"name": h["name"], "address": h["address"], "netns": h["netns"]} for h in self._hosts]

    @property
    def names(self):
        return [h["name"] for h in self._hosts]

    @property
    def slurm_env(self):
        """Environment for Slurm clients: ``os.environ`` plus ``SLURM_CONF`` pointing at the lab's slurm.conf."""
        return dict(os.environ, SLURM_CONF=str(self.slurm_conf))

    @property
    def python(self):
        venv = REPO_ROOT / ".venv" / "bin" / "python"
        return venv if venv.exists() else pathlib.Path("/usr/bin/python3")

    def host(self, name):
        """The full record of lab host ``name`` (name, address, netns, veth); LabError if unknown."""
        for h in self._hosts:
            if h["name"] == name:
                return dict(h, uts=str(UTS_DIR / name))
        raise LabError("unknown lab host %r (lab has %s)" % (name, ", ".join(self.names)), where=name)

    # ------------------------------------------------------------------ state
    @classmethod
    def load(cls, root="build/lab"):
        """The running lab described by ``<root>/state.json``; LabError when there is none."""
        state_file = _resolve(root) / "state.json"
        try:
            state = json.loads(state_file.read_text())
        except FileNotFoundError as exc:
            raise LabError("no lab is up (run `make lab-up`)", where=str(state_file)) from exc
        except (OSError, ValueError) as exc:
            raise LabError("unreadable lab state: %s" % exc, where=str(state_file)) from exc
        lab = cls(n=state["n"], root=root, subnet=state["subnet"], bridge=state["bridge"])
        lab._state = state
        return lab

    @classmethod
    def ensure(cls, n=4, root="build/lab"):
        """Return ``(lab, started)``: the running lab if it is healthy and has at least ``n`` hosts, else a new one.

        ``started`` is True when this call brought the lab up (the caller then owns ``down()``).
        """
        try:
            lab = cls.load(root)
            if lab.is_up() and lab.n >= n:
                if lab.calibration is None:  # a lab brought up before calibration existed
                    lab.calibrate()
                return lab, False
        except LabError:
            pass
        return cls(n=n, root=root).up(), True

    def _read_state(self):
        try:
            self._state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            self._state = None
        return self._state

    def _write_state(self):
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._state, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.state_file)

    def _record_pid(self, role, pid, marker):
        self._state["pids"].append({"role": role, "pid": pid, "marker": marker})
        self._write_state()

    def is_up(self):
        """True when the state file says the lab is up and its namespaces and daemons are all alive."""
        state = self._read_state()
        if not state or state.get("phase") != "up":
            return False
        netns = set(_proc.run(["ip", "netns", "list"], check=False).stdout.split())
        if any(h["netns"] not in netns for h in state["hosts"]):
            return False
        return all(_proc.alive(p["pid"]) and (p["marker"] is None or any(
            p["marker"] in a for a in _proc.cmdline(p["pid"]))) for p in state["pids"])

    # ------------------------------------------------------------------ up / down
    def up(self, fresh=False):
        """Bring the lab up (cleaning up a crashed one first); reuse an identical healthy one unless ``fresh``.

        Returns self. Raises LabError (not root, missing packages, a step that failed, a daemon that did not
        come up within its timeout) after tearing down what it made.
        """
        if os.geteuid() != 0:
            raise LabError("the lab needs root (network namespaces, sshd, slurmd)", where="Lab.up")
        with _locked():
            if not fresh and self.is_up() and self._state.get("n") == self.n \
                    and self._state.get("subnet") == self.subnet:
                if self.calibration is None:  # a lab brought up before calibration existed
                    self.calibrate()
                return self
            ensure_packages()
            self._teardown()
            try:
                self._build()
            except BaseException:
                self._teardown()
                raise
        return self

    def down(self):
        """Stop every process, remove every namespace, link and file the lab made. Safe to call twice."""
        if os.geteuid() != 0:
            raise LabError("the lab needs root to be torn down", where="Lab.down")
        with _locked():
            self._teardown()

    def _build(self):
        t0 = time.monotonic()
        self._state = {
            "version": 1, "phase": "building", "n": self.n, "subnet": self.subnet, "bridge": self.bridge,
            "bridge_address": self.bridge_address, "root": str(self.root),
            "hosts": [dict(h, uts=str(UTS_DIR / h["name"])) for h in self._hosts],
            "pids": [], "munge": {"started": False, "key_created": False}, "etc_slurm_link": False,
            "degradations": {"interfaces": {}, "links": []},
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        for d in (self.root, self.ssh_dir, self.log_dir, self.slurm_dir / "state", self.slurm_dir / "log",
                  self.root / "run"):
            d.mkdir(parents=True, exist_ok=True)
        self._write_state()
        self._make_keys()
        self._make_network()
        self._write_etc_hosts()
        self._start_sshd()
        self._start_munge()
        self._start_slurm()
        self._write_client_files()
        self._check_ssh()
        self.calibrate()
        self._state["phase"] = "up"
        self._state["up_seconds"] = round(time.monotonic() - t0, 2)
        self._write_state()

    def _make_keys(self):
        for key, comment in ((self.host_key, "symphony-lab-host"), (self.client_key, "symphony-lab-client")):
            _proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)])
        pub = self.client_key.with_suffix(".pub").read_text().strip()
        self.authorized_keys.write_text('from="%s" %s\n' % (self.subnet, pub))
        self.known_hosts.write_text(_ssh.render_known_hosts(self._hosts,
                                                            self.host_key.with_suffix(".pub").read_text()))
        self.sshd_config.write_text(_ssh.render_sshd_config(self.host_key, self.authorized_keys))

    def _make_network(self):
        for argv in _net.up_commands(self._hosts, self.bridge, self.bridge_address):
            _proc.run(argv, where=argv[-1] if argv[1] == "netns" else None)
        UTS_DIR.mkdir(parents=True, exist_ok=True)
        for h in self._hosts:
            uts = UTS_DIR / h["name"]
            uts.touch()
            _proc.run(["unshare", "--uts=%s" % uts, "hostname", h["name"]], where=h["name"])

    def _write_etc_hosts(self):
        """Name the lab hosts in /etc/hosts (shared by every namespace): inside the namespaces no DNS server is
        reachable, so resolver look-ups of ``labN`` (torch's rendezvous, slurm) would each wait for a time-out."""
        _strip_etc_hosts()
        lines = ["%s %s %s" % (h["address"], h["name"], ETC_HOSTS_MARKER) for h in self._hosts]
        with open(ETC_HOSTS, "a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")

    def ns_argv(self, name):
        """argv prefix that runs a command inside lab host ``name`` (its network and UTS namespaces).

        Uses ``nsenter`` and not ``ip netns exec``: the latter remounts /sys and slurmd loses cgroup v1.
        """
        h = self.host(name)
        return ["nsenter", "--net=/run/netns/%s" % h["netns"], "--uts=%s" % h["uts"]]

    def _start_sshd(self):
        pathlib.Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        sshd = _which("sshd")
        for h in self._hosts:
            pidfile = self.root / "run" / ("sshd-%s.pid" % h["name"])
            pid = _proc.spawn(self.ns_argv(h["name"]) + [sshd, "-D", "-e", "-f", str(self.sshd_config),
                                                         "-o", "PidFile=%s" % pidfile],
                              self.log_dir / ("sshd-%s.log" % h["name"]))
            self._record_pid("sshd@%s" % h["name"], pid, str(self.sshd_config))
        for h in self._hosts:
            _proc.wait_for(lambda a=h["address"]: _tcp_open(a, 22), 10, what="sshd on %s:22" % h["address"])

    def _munge_works(self):
        if not _which("munge"):
            return False
        cred = _proc.run(["munge", "-n"], check=False, timeout=5)
        if cred.returncode != 0:
            return False
        return _proc.run(["unmunge"], check=False, timeout=5, input_text=cred.stdout).returncode == 0

    def _start_munge(self):
        if self._munge_works():
            return
        if not MUNGE_KEY.exists():
            _proc.run(["mungekey", "--create", "--keyfile", str(MUNGE_KEY)])
            shutil.chown(MUNGE_KEY, "munge", "munge")
            MUNGE_KEY.chmod(0o400)
            self._state["munge"]["key_created"] = True
            self._write_state()
        if not MUNGE_RUN.exists():
            MUNGE_RUN.mkdir(mode=0o755)
            self._state["munge"]["run_dir_created"] = True
        shutil.chown(MUNGE_RUN, "munge", "munge")
        pid = _proc.spawn(["setpriv", "--reuid=munge", "--regid=munge", "--init-groups", _which("munged"),
                           "--foreground", "--pid-file=%s" % MUNGE_MARKER], self.log_dir / "munged.log")
        self._state["munge"]["started"] = True
        self._record_pid("munged", pid, MUNGE_MARKER)
        _proc.wait_for(self._munge_works, 10, what="munged to answer (munge -n | unmunge)")

    def _start_slurm(self):
        hw = _slurm.parse_slurmd_c(_proc.run([_which("slurmd"), "-C"]).stdout)
        ctld_host = socket.gethostname().split(".")[0]
        self.slurm_conf.write_text(_slurm.render_conf(ctld_host, self.bridge_address, self._hosts, hw, self.root))
        (self.slurm_dir / "topology.conf").write_text(_slurm.render_flat_topology(self._hosts))
        for h in self._hosts:
            (self.slurm_dir / "spool" / h["name"]).mkdir(parents=True, exist_ok=True)
        self._link_etc_slurm()
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((self.bridge_address, 6817))
            except OSError as exc:
                raise LabError("port 6817 (slurmctld) is taken by another process: %s" % exc,
                               where="%s:6817" % self.bridge_address) from exc
        env = self.slurm_env
        pid = _proc.spawn([_which("slurmctld"), "-D", "-f", str(self.slurm_conf)],
                          self.log_dir / "slurmctld.out", env=env)
        self._record_pid("slurmctld", pid, str(self.slurm_conf))
        _proc.wait_for(lambda: _tcp_open(self.bridge_address, 6817) or not _proc.alive(pid), 20,
                       what="slurmctld on %s:6817" % self.bridge_address)
        if not _proc.alive(pid):
            raise LabError("slurmctld exited at start; see %s" % (self.slurm_dir / "log" / "slurmctld.log"),
                           where="slurmctld")
        slurmd = _which("slurmd")
        for h in self._hosts:
            pid = _proc.spawn(self.ns_argv(h["name"]) + [slurmd, "-D", "-N", h["name"], "-f", str(self.slurm_conf)],
                              self.log_dir / ("slurmd-%s.out" % h["name"]), env=env)
            self._record_pid("slurmd@%s" % h["name"], pid, str(self.slurm_conf))
        _proc.wait_for(lambda: all(s == "idle" for s in self._node_states_or_empty(len(self._hosts)).values()),
                       30, interval=0.25, what="slurmd on %s to register idle" % ",".join(self.names))

    def _node_states_or_empty(self, expect):
        try:
            states = self.node_states()
        except LabError:
            return {}
        return states if len(states) == expect else {}

    def _link_etc_slurm(self):
        if ETC_SLURM_CONF.is_symlink() or not ETC_SLURM_CONF.exists():
            if ETC_SLURM_CONF.is_symlink() and not str(os.readlink(ETC_SLURM_CONF)).endswith("slurm/slurm.conf"):
                return
            ETC_SLURM_CONF.parent.mkdir(parents=True, exist_ok=True)
            if ETC_SLURM_CONF.is_symlink():
                ETC_SLURM_CONF.unlink()
            ETC_SLURM_CONF.symlink_to(self.slurm_conf)
            self._state["etc_slurm_link"] = True
            self._write_state()

    def _write_client_files(self):
        self.ssh_config.write_text(_ssh.render_ssh_config(self._hosts, self.client_key, self.known_hosts))
        self.inventory.write_text(_ssh.render_inventory(self._hosts, self.client_key, self.ssh_config,
                                                        self.python, self.slurm, self.calibration_file))

    def _check_ssh(self):
        for h in self._hosts:
            out = self.ssh(h["name"], "hostname", timeout=15)
            if out.returncode != 0 or out.stdout.strip() != h["name"]:
                raise LabError("ssh root@%s failed (rc %d): %s" % (h["address"], out.returncode,
                                                                   (out.stderr or out.stdout).strip()),
                               where=h["name"])

    def _teardown(self):
        """Best effort, in order: processes, /etc/slurm link, tc, namespaces, bridge, UTS files, munge key, files."""
        state = self._read_state() or {}
        marker = str(self.root)
        for entry in reversed(state.get("pids", [])):
            _proc.stop_pid(entry["pid"], marker=entry.get("marker"))
        netns = set(_proc.run(["ip", "netns", "list"], check=False).stdout.split())
        names = {h["netns"] for h in state.get("hosts", [])} | {h["netns"] for h in _net.host_plan(_net.MAX_HOSTS)[1]}
        names |= {_lldp.SWITCH_PREFIX + "leaf%d" % i for i in range(1, 9)}  # the cabled fabric's switches
        ours = sorted(names & netns)
        for ns in ours:  # whatever still runs inside a lab namespace was started there by or through the lab
            for pid in _proc.run(["ip", "netns", "pids", ns], check=False).stdout.split():
                _proc.stop_pid(int(pid), timeout=2)
        for pid in _proc.pids_with_marker(marker):
            _proc.stop_pid(pid, marker=marker, timeout=2)
        for pid in _proc.pids_with_marker(MUNGE_MARKER):
            _proc.stop_pid(pid, marker=MUNGE_MARKER, timeout=2)
        if ETC_SLURM_CONF.is_symlink() and os.readlink(ETC_SLURM_CONF) == str(self.slurm_conf):
            ETC_SLURM_CONF.unlink()
        _strip_etc_hosts()
        for ns in ours:
            _proc.run(["ip", "netns", "delete", ns], check=False)
        links = _proc.run(["ip", "-o", "link", "show"], check=False).stdout
        for line in links.splitlines():
            name = line.split(":", 2)[1].strip().split("@")[0] if ":" in line else ""
            if name.startswith(_net.VETH_PREFIX) or name == state.get("bridge", self.bridge):
                _proc.run(["ip", "link", "delete", name], check=False)
        if UTS_DIR.exists():
            for uts in UTS_DIR.iterdir():
                subprocess.run(["umount", str(uts)], capture_output=True, check=False)
                uts.unlink(missing_ok=True)
            shutil.rmtree(UTS_DIR.parent, ignore_errors=True)
        if state.get("munge", {}).get("key_created") and MUNGE_KEY.exists():
            MUNGE_KEY.unlink()
        if state.get("munge", {}).get("run_dir_created"):
            shutil.rmtree(MUNGE_RUN, ignore_errors=True)
        if self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
        self._state = None

    # ------------------------------------------------------------------ using the lab
    def exec(self, name, argv, check=True, timeout=60, input_text=None):
        """Run ``argv`` inside lab host ``name``; return the CompletedProcess (LabError on failure when ``check``)."""
        return _proc.run(self.ns_argv(name) + list(argv), check=check, timeout=timeout, input_text=input_text,
                         where=name)

    def popen(self, name, argv, **kwargs):
        """Start ``argv`` inside lab host ``name``; return the subprocess.Popen (the caller stops it)."""
        return subprocess.Popen(self.ns_argv(name) + list(argv), **kwargs)

    def ssh(self, name, command, timeout=30):
        """Run shell ``command`` on lab host ``name`` over SSH as root with the lab key (CompletedProcess)."""
        return _proc.run(["ssh", "-F", str(self.ssh_config), name, command], check=False, timeout=timeout,
                         where=name)

    def iperf3(self, client, server, seconds=1, port=None):
        """Measure TCP throughput from ``client`` to ``server`` with iperf3; return Mbit/s received (float).

        Starts a one-shot ``iperf3 -s -1`` inside ``server`` on ``port`` (a random one in 20000-29999 unless given)
        and ``iperf3 -c <server address> -t <seconds> -J`` inside ``client``; ``seconds`` is a whole number >= 1
        (iperf3 reads ``-t`` as an integer, and 0 means "forever"). Raises LabError with iperf3's error text when
        no measurement comes back.
        """
        seconds = int(seconds)
        if seconds < 1:
            raise LabError("iperf3 needs a whole number of seconds >= 1, got %r" % seconds, where="iperf3")
        address = self.host(server)["address"]
        port = port or random.randint(20000, 29999)
        srv = self.popen(server, ["iperf3", "-s", "-1", "-B", address, "-p", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 5
            while True:
                out = self.exec(client, ["iperf3", "-c", address, "-p", str(port), "-t", str(seconds), "-J"],
                                check=False, timeout=seconds + 30)
                try:
                    doc = json.loads(out.stdout)
                except ValueError:
                    doc = {"error": (out.stderr or out.stdout).strip()}
                if "error" not in doc:
                    return doc["end"]["sum_received"]["bits_per_second"] / 1e6
                if srv.poll() is not None:
                    raise LabError("iperf3 server on %s:%d exited: %s" % (address, port, srv.stderr.read().strip()),
                                   where=server)
                if "refused" not in doc["error"] or time.monotonic() > deadline:
                    raise LabError("iperf3 %s -> %s: %s" % (client, server, doc["error"]), where=client)
                time.sleep(0.05)
        finally:
            if srv.poll() is None:
                srv.terminate()
            try:
                srv.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.communicate()

    # ------------------------------------------------------------------ degradation
    def degrade_interface(self, host, rate_mbit):
        """Limit everything in and out of ``host``'s interface to ``rate_mbit`` Mbit/s (tc htb)."""
        rate = _net.validate_rate(rate_mbit, where=host)
        self.host(host)
        with _locked():
            state = self._require_state()
            state["degradations"]["interfaces"][host] = rate
            self._apply_shaping(state)

    def degrade_link(self, a, b, rate_mbit):
        """Limit only the path between hosts ``a`` and ``b`` (both directions) to ``rate_mbit`` Mbit/s."""
        rate = _net.validate_rate(rate_mbit, where="%s-%s" % (a, b))
        self.host(a)
        self.host(b)
        if a == b:
            raise LabError("a link needs two different hosts", where=a)
        with _locked():
            state = self._require_state()
            links = [entry for entry in state["degradations"]["links"] if {entry[0], entry[1]} != {a, b}]
            state["degradations"]["links"] = links + [[a, b, rate]]
            self._apply_shaping(state)

    def restore(self):
        """Undo every degradation."""
        with _locked():
            state = self._require_state()
            state["degradations"] = {"interfaces": {}, "links": []}
            self._apply_shaping(state)

    @property
    def degradations(self):
        """``{"interfaces": {host: Mbit/s}, "links": [[a, b, Mbit/s]]}`` as recorded in the state file."""
        return self._require_state()["degradations"]

    # ------------------------------------------------------------------ cabled fabric (LLDP)
    def lldp_up(self, leaves=2, swap=(), silent=()):
        """Cable every lab host to ``leaves`` switch namespaces and run lldpd in each namespace (see ``_lldp``):
        ``swap`` hosts have their two rails' cables exchanged, ``silent`` ``(leaf, host)`` switch ports send no
        LLDP.  Waits until every daemon's socket answers; returns the wiring plan (also in the state file)."""
        state = self._require_state()
        if state.get("lldp"):
            raise LabError("the lab's fabric is already cabled; bring the lab down first", where="lldp_up")
        plan = _lldp.fabric_plan(self._hosts, leaves, swap, silent)
        self._state = state
        self._state["lldp"] = plan
        self._write_state()
        for argv in _lldp.up_commands(plan):
            _proc.run(argv, where="fabric")
        conf_dir = self.root / "lldp"
        conf_dir.mkdir(exist_ok=True)
        lldpd, lldpcli = _which("lldpd"), _which("lldpcli")
        running = _lldp.daemons(plan, {h["name"]: h["netns"] for h in self._hosts})
        for daemon in running:
            conf = conf_dir / ("%s.conf" % daemon["name"])
            conf.write_text(daemon["config"])
            pid = _proc.spawn(["nsenter", "--net=/run/netns/%s" % daemon["netns"]]
                              + _lldp.lldpd_argv(lldpd, lldpcli, daemon, conf),
                              self.log_dir / ("lldpd-%s.log" % daemon["name"]))
            # lldpd renames itself "lldpd: monitor.": the marker is what its command line still says
            self._record_pid("lldpd@%s" % daemon["name"], pid, "lldpd")
        for daemon in running:
            _proc.wait_for(lambda d=daemon: _proc.run([lldpcli, "-u", d["socket"], "show", "configuration"],
                                                      check=False, timeout=5).returncode == 0,
                           15, interval=0.2, what="lldpd of %s to answer" % daemon["name"])
        return plan

    def lldp_down(self):
        """Undo :meth:`lldp_up`: stop the lldpd daemons by their recorded pids, unplug every cable (its veth pair)
        and delete the switch namespaces.  A lab without a cabled fabric is left as it is."""
        state = self._require_state()
        plan = state.get("lldp")
        if not plan:
            return
        for entry in [p for p in state["pids"] if p["role"].startswith("lldpd@")]:
            _proc.stop_pid(entry["pid"], marker=entry["marker"])
        # the cables first, each from its host end: deleting a veth removes both ends at once, while a deleted
        # namespace's devices go away later (the kernel's netns cleanup is asynchronous), and an lldp_up right
        # after would find "rail0" still there
        for cable in plan["cables"]:
            _proc.run(["ip", "-n", cable["netns"], "link", "delete", cable["iface"]], check=False)
        for switch in plan["switches"]:
            _proc.run(["ip", "netns", "delete", switch["netns"]], check=False)
        state["pids"] = [p for p in state["pids"] if not p["role"].startswith("lldpd@")]
        state.pop("lldp")
        self._state = state
        self._write_state()

    def swap_cables(self, host):
        """Exchange the cables of lab host ``host``'s two rails while the lab runs (the demo's swapped pair:
        ``_lldp.swap_commands``); the old neighbours age out within lldpd's 4 s TTL.  Returns the new wiring."""
        state = self._require_state()
        if not state.get("lldp"):
            raise LabError("the lab's fabric is not cabled (Lab.lldp_up)", where="swap_cables")
        cmds, plan = _lldp.swap_commands(state["lldp"], host)
        for argv in cmds:
            _proc.run(argv, where="swap %s" % host)
        state["lldp"] = plan
        self._state = state
        self._write_state()
        return plan

    def lldp_neighbors(self, name):
        """``lldpcli -f json show neighbors`` as lab host (or switch) ``name``'s lldpd prints it (str)."""
        return _proc.run([_which("lldpcli"), "-u", _lldp.SOCKET % name, "-f", "json", "show", "neighbors"],
                         where=name).stdout

    def _require_state(self):
        state = self._read_state()
        if not state or state.get("phase") != "up":
            raise LabError("no lab is up (run `make lab-up`)", where=str(self.state_file))
        return state

    def _apply_shaping(self, state):
        for argv in _net.clear_commands(self._hosts):
            _proc.run(argv, check=False)
        deg = state["degradations"]
        for argv in _net.shaping_plan(self._hosts, deg["interfaces"], deg["links"]):
            _proc.run(argv)
        self._state = state
        self._write_state()

    # ------------------------------------------------------------------ slurm helpers
    def node_states(self):
        """``{node: sinfo short state}`` for the lab partition (e.g. ``{"lab1": "idle", "lab2": "drain"}``)."""
        out = _proc.run(["sinfo", "-h", "-N", "-p", self.slurm, "-o", "%N %t"], env=self.slurm_env, timeout=15,
                        where="sinfo")
        return _slurm.parse_sinfo(out.stdout)

    def drain(self, node, reason):
        """``scontrol update nodename=<node> state=DRAIN reason=<reason>``."""
        self.host(node)
        _proc.run(["scontrol", "update", "nodename=%s" % node, "state=DRAIN", "reason=%s" % reason],
                  env=self.slurm_env, where=node)

    def resume(self, node, timeout=15):
        """``scontrol update nodename=<node> state=RESUME``, then wait up to ``timeout`` seconds until slurmctld
        has heard from the node again (sinfo shows ``idle*`` - not responding - right after a resume)."""
        self.host(node)
        _proc.run(["scontrol", "update", "nodename=%s" % node, "state=RESUME"], env=self.slurm_env, where=node)
        _proc.wait_for(lambda: self.node_states().get(node) in ("idle", "mix", "alloc"), timeout, interval=0.2,
                       what="%s to respond after resume" % node)

    # ------------------------------------------------------------------ calibration
    def calibrate(self):
        """Measure this machine through the lab (``_calibrate.measure``), write ``calibration.json``, return it."""
        doc = _calibrate.measure(self)
        _calibrate.write(self.calibration_file, doc)
        return doc

    @property
    def calibration(self):
        """The calibration document (``calibration.json``), or None when the lab has not measured one."""
        return _calibrate.read(self.calibration_file)

    # ------------------------------------------------------------------ report
    def status(self):
        """A JSON-able summary: up or not, hosts, daemons alive, Slurm node states, degradations."""
        state = self._read_state()
        if not state:
            return {"up": False, "state_file": str(self.state_file)}
        daemons = {p["role"]: {"pid": p["pid"], "alive": _proc.alive(p["pid"])} for p in state["pids"]}
        try:
            nodes = self.node_states()
        except LabError as exc:
            nodes = {"error": str(exc)}
        return {"up": self.is_up(), "phase": state.get("phase"), "hosts": self.hosts,
                "bridge": "%s %s" % (state["bridge"], state["bridge_address"]), "daemons": daemons,
                "slurm_partition": self.slurm, "slurm_nodes": nodes, "degradations": state["degradations"],
                "ssh_config": str(self.ssh_config), "inventory": str(self.inventory),
                "slurm_conf": str(self.slurm_conf), "up_seconds": state.get("up_seconds"),
                "calibration": str(self.calibration_file) if self.calibration_file.exists() else None}
