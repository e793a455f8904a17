# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Launchers: how the controller runs a command on a node, or one job over several nodes.

A launcher turns "run argv on host" (and "run argv as one job over these hosts") into the command the
controller executes: ``ssh`` (OpenSSH client, BatchMode, host keys verified unless the operator's ssh_config
says otherwise), ``srun`` (Slurm) or ``mpirun`` (Open MPI); ``local`` runs on the controller itself (loopback
tests).  No home-made launcher: multi-node collectives need ``srun`` or ``mpirun``.

:func:`launcher_argument_spec` is the modules' argument spec for these options (doc fragment
``symphony.cluster.launcher``) and :func:`launcher_from_params` reads them back.
"""

from __future__ import annotations

import shlex
from typing import Any, Mapping, Sequence

from .._core.errors import ToolNotFoundError, ValidationError
from .process import which

LAUNCHERS = ("ssh", "srun", "mpirun", "local")


class Launcher:
    """Base launcher: ``wrap(host, argv)`` and ``group(hosts, tasks_per_node, argv, env)`` -> argv."""

    name = "base"
    binary: str | None = None

    def wrap(self, host: str, argv: Sequence[Any]) -> list[str]:
        raise NotImplementedError

    def group(self, hosts: Sequence[str], tasks_per_node: int, argv: Sequence[Any],
              env: Mapping[str, Any] | None = None) -> list[str]:
        raise ValidationError("the %s launcher cannot start a multi-node job; use srun or mpirun" % self.name,
                              where="launcher")

    def check(self) -> None:
        """Raise :class:`ToolNotFoundError` when the launcher's executable is absent on the controller."""
        if self.binary and which(self.binary) is None:
            raise ToolNotFoundError("%s not found on the controller's PATH" % self.binary, where="launcher")


class LocalLauncher(Launcher):
    """Runs on the controller itself (every "host" is this machine; loopback tests only)."""

    name = "local"

    def wrap(self, host: str, argv: Sequence[Any]) -> list[str]:
        return list(argv)


class SSHLauncher(Launcher):
    """OpenSSH client.  ``config_file``/``identity_file``/``user``/``port`` map to ``-F``/``-i``/``-l``/``-p``.

    BatchMode is always on (never a password prompt); ``ConnectTimeout`` is ``connect_timeout`` seconds.
    Host keys are verified as the ssh configuration says (``StrictHostKeyChecking`` is not touched).
    """

    name = "ssh"
    binary = "ssh"

    def __init__(self, config_file: str | None = None, identity_file: str | None = None, user: str | None = None,
                 port: int | None = None, connect_timeout: int = 10, options: Sequence[str] = (),
                 hosts: Mapping[str, str] | None = None) -> None:
        # node name -> SSH destination (management address); a node not in it is reached by its name.
        self.hosts = dict(hosts or {})
        self.config_file = config_file
        self.identity_file = identity_file
        self.user = user
        self.port = port
        self.connect_timeout = int(connect_timeout)
        self.options = list(options or ())

    def base(self) -> list[str]:
        argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=%d" % self.connect_timeout]
        if self.config_file:
            argv += ["-F", self.config_file]
        if self.identity_file:
            argv += ["-i", self.identity_file]
        if self.user:
            argv += ["-l", self.user]
        if self.port:
            argv += ["-p", str(self.port)]
        for opt in self.options:
            argv += ["-o", opt]
        return argv

    def wrap(self, host: str, argv: Sequence[Any]) -> list[str]:
        return self.base() + [self.hosts.get(host) or host, "--", shlex.join([str(a) for a in argv])]


class SrunLauncher(Launcher):
    """Slurm ``srun``: one task on one named node, or one job over several (``--ntasks-per-node``)."""

    name = "srun"
    binary = "srun"

    def __init__(self, partition: str | None = None, extra_args: Sequence[str] = ()) -> None:
        self.partition = partition
        self.extra_args = list(extra_args or ())

    def _common(self) -> list[str]:
        argv = ["srun"]
        if self.partition:
            argv += ["-p", self.partition]
        return argv + self.extra_args

    def wrap(self, host: str, argv: Sequence[Any]) -> list[str]:
        return self._common() + ["-N1", "-n1", "-w", host] + [str(a) for a in argv]

    def group(self, hosts: Sequence[str], tasks_per_node: int, argv: Sequence[Any],
              env: Mapping[str, Any] | None = None) -> list[str]:
        export = "ALL" + "".join(",%s=%s" % (k, v) for k, v in sorted((env or {}).items()))
        return self._common() + ["-N%d" % len(hosts), "-w", ",".join(hosts),
                                 "--ntasks-per-node=%d" % int(tasks_per_node), "--export=%s" % export] + \
            [str(a) for a in argv]


class MpirunLauncher(Launcher):
    """Open MPI ``mpirun`` with ``-H host:slots`` and ``-x NAME=VALUE`` for the NCCL environment."""

    name = "mpirun"
    binary = "mpirun"

    def __init__(self, extra_args: Sequence[str] = ()) -> None:
        self.extra_args = list(extra_args or ())

    def wrap(self, host: str, argv: Sequence[Any]) -> list[str]:
        return ["mpirun", "-np", "1", "-H", host] + self.extra_args + [str(a) for a in argv]

    def group(self, hosts: Sequence[str], tasks_per_node: int, argv: Sequence[Any],
              env: Mapping[str, Any] | None = None) -> list[str]:
        argv_env: list[str] = []
        for k, v in sorted((env or {}).items()):
            argv_env += ["-x", "%s=%s" % (k, v)]
        return ["mpirun", "-np", str(len(hosts) * int(tasks_per_node)),
                "-H", ",".join("%s:%d" % (h, int(tasks_per_node)) for h in hosts)] + \
            self.extra_args + argv_env + [str(a) for a in argv]


def make_launcher(name: str, **options: Any) -> Launcher:
    """Launcher by name (``ssh``, ``srun``, ``mpirun``, ``local``); unknown options are ignored."""
    if name == "ssh":
        keys = ("config_file", "identity_file", "user", "port", "connect_timeout", "options", "hosts")
        return SSHLauncher(**{k: options[k] for k in keys if options.get(k) is not None})
    if name == "srun":
        return SrunLauncher(options.get("partition"), options.get("extra_args") or ())
    if name == "mpirun":
        return MpirunLauncher(options.get("extra_args") or ())
    if name == "local":
        return LocalLauncher()
    raise ValidationError("unknown launcher %r (%s)" % (name, ", ".join(LAUNCHERS)), where="launcher")


def launcher_from_params(params: Mapping[str, Any]) -> Launcher:
    """The launcher a module's parameters (:func:`launcher_argument_spec`) describe (``ssh`` when unset)."""
    return make_launcher(params.get("launcher") or "ssh", config_file=params.get("ssh_config"),
                         identity_file=params.get("ssh_identity_file"), user=params.get("ssh_user"),
                         port=params.get("ssh_port"), connect_timeout=params.get("connect_timeout"),
                         hosts=params.get("ssh_hosts"),
                         partition=params.get("partition"), extra_args=params.get("launcher_args"))


def launcher_argument_spec(default: str = "ssh") -> dict[str, dict[str, Any]]:
    """The argument spec of the launcher options read by :func:`launcher_from_params` (doc fragment
    ``symphony.cluster.launcher``): a new dict, ``launcher`` defaulting to ``default``."""
    return {
        "launcher": {"type": "str", "default": default, "choices": list(LAUNCHERS)},
        "partition": {"type": "str"},
        "launcher_args": {"type": "list", "elements": "str", "default": []},
        "ssh_config": {"type": "path"},
        "ssh_hosts": {"type": "dict", "default": {}},
        "ssh_identity_file": {"type": "path"},
        "ssh_user": {"type": "str"},
        "ssh_port": {"type": "int"},
        "connect_timeout": {"type": "int", "default": 10},
    }
