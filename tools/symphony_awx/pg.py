"""A throw-away PostgreSQL server for the ledger tests, the slicing rehearsal and the bench (issue 19).

What an AWX site runs as its shared ledger, on this machine: Debian's ``postgresql`` (``/usr/lib/postgresql/<v>/bin``),
a cluster initdb'ed under ``build/pg/<name>``, listening on a unix socket and on 127.0.0.1 with TLS (a CA and a
server certificate for ``127.0.0.1`` made here with ``openssl``, so clients connect with ``sslmode=verify-full``, as
the README recommends) and a scram-sha-256 password.  PostgreSQL refuses to run as root: as root, the cluster
directory is chowned to ``postgres`` and initdb/pg_ctl run through ``runuser -u postgres --``.

    server = PgServer("build/pg/test").start()
    server.url(schema="t1")      # postgresql://symphony@127.0.0.1:PORT/symphony?sslmode=verify-full&...
    server.env                   # {"SYMPHONY_LEDGER_PASSWORD": ...}: what the AWX credential would inject
    server.stop()

CLI: ``python -m symphony_awx.pg up|down|url [--root build/pg/make]`` (``make pg-up`` / ``make pg-down``).
"""

import argparse
import glob
import hashlib
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import urllib.parse

import psycopg

USER = "symphony"
DATABASE = "symphony"


class PgError(RuntimeError):
    """The throw-away server could not be set up or started (the message says which step and its output)."""


def bindir():
    """The newest ``/usr/lib/postgresql/<v>/bin`` holding ``pg_ctl`` (Debian's layout), else raises PgError."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise PgError("PostgreSQL is not installed (Debian package postgresql; make debs installs it)")
    return os.path.dirname(found[-1])


def _others_can_enter(path):
    """Whether every existing directory from ``/`` down to ``path`` is searchable by other users (mode o+x)."""
    path = os.path.abspath(path)
    while True:
        if os.path.exists(path) and not os.stat(path).st_mode & 0o001:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PgServer:
    """One cluster under ``root``; :meth:`start` creates it on first use, :meth:`stop` stops it (``remove``: and
    deletes it).  State (port, password) is kept in ``root/state.json`` so another process can :meth:`load` it."""

    def __init__(self, root, port=None):
        self.root = os.path.abspath(root)
        if os.geteuid() == 0 and not _others_can_enter(os.path.dirname(self.root)):
            # a checkout under a private home (/root is 0700): the postgres user cannot reach build/pg there
            self.root = os.path.join("/tmp", "symphony-pg-%s" % hashlib.sha256(self.root.encode()).hexdigest()[:12])
        self.data = os.path.join(self.root, "data")
        # a unix socket path is limited to 107 bytes: a deep checkout gets its socket directory under /tmp
        self.sock = os.path.join(self.root, "sock")
        if len(self.sock) > 80:
            self.sock = "/tmp/symphony-pg-%s" % secrets.token_hex(4)
        self.port = port or _free_port()
        self.password = secrets.token_urlsafe(18)
        self.ca = os.path.join(self.root, "ca.pem")

    @classmethod
    def load(cls, root):
        """The server a previous :meth:`start` left under ``root`` (raises PgError when there is none)."""
        server = cls(root)
        path = os.path.join(server.root, "state.json")
        if not os.path.exists(path):
            raise PgError("no PostgreSQL server state at %s (python -m symphony_awx.pg up)" % path)
        with open(path) as fh:
            state = json.load(fh)
        server.port, server.password, server.sock = state["port"], state["password"], state["sock"]
        return server

    @property
    def env(self):
        """The environment a client needs for the password (never part of the URL)."""
        return {"SYMPHONY_LEDGER_PASSWORD": self.password}

    def url(self, schema=None, database=DATABASE, settings=None):
        """The ledger URL over TCP with TLS verified against this server's CA; ``schema``: its search_path;
        ``settings``: more session settings (``{"synchronous_commit": "off"}``), through libpq's ``options``."""
        query = [("sslmode", "verify-full"), ("sslrootcert", self.ca)]
        options = dict({"search_path": schema} if schema else {}, **(settings or {}))
        if options:
            query.append(("options", " ".join("-c%s=%s" % kv for kv in options.items())))
        encoded = urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        return "postgresql://%s@127.0.0.1:%d/%s?%s" % (USER, self.port, database, encoded)

    def _as_postgres(self, argv, what):
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--"] + argv
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode:
            raise PgError("%s failed (rc %d): %s%s" % (what, proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:]))
        return proc.stdout

    def _certificates(self):
        # A CA and a server certificate whose subjectAltName is 127.0.0.1 (libpq's verify-full checks IP SANs).
        key, csr, crt = (os.path.join(self.data, n) for n in ("server.key", "server.csr", "server.crt"))
        cakey = os.path.join(self.root, "ca.key")
        steps = [
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30",
             "-subj", "/CN=symphony-test-ca",
             "-keyout", cakey, "-out", self.ca],
            ["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", csr],
            ["openssl", "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", cakey, "-CAcreateserial", "-days", "30",
             "-extfile", "/dev/stdin", "-out", crt],
        ]
        for step in steps:
            ext = "subjectAltName=IP:127.0.0.1\n" if "-extfile" in step else None
            proc = subprocess.run(step, input=ext, capture_output=True, text=True, timeout=60, check=False)
            if proc.returncode:
                raise PgError("openssl failed: %s" % proc.stderr[-2000:])
        os.chmod(key, 0o600)

    def _initdb(self):
        os.makedirs(self.root, exist_ok=True)
        pwfile = os.path.join(self.root, "pwfile")
        with open(os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as fh:
            fh.write(self.password + "\n")
        self._chown()
        try:
            self._as_postgres([os.path.join(bindir(), "initdb"), "-D", self.data, "-U", USER, "--pwfile", pwfile,
                               "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"], "initdb")
        finally:
            os.unlink(pwfile)
        self._certificates()
        with open(os.path.join(self.data, "pg_hba.conf"), "w") as fh:
            # unix socket: trust (the fixture's own set-up); TCP: TLS and a password, nothing else
            fh.write("local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n")
        self._chown()

    def _chown(self):
        if os.geteuid() != 0:
            return
        ent = pwd.getpwnam("postgres")
        for base, dirs, files in os.walk(self.root):
            for name in [base] + [os.path.join(base, n) for n in dirs + files]:
                os.chown(name, ent.pw_uid, ent.pw_gid)
        os.chmod(self.root, 0o755)

    def start(self):
        """initdb (first time), start, create the ``symphony`` database; returns self.  Raises PgError."""
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            if os.path.exists(self.root):
                shutil.rmtree(self.root)
            self._initdb()
        os.makedirs(self.sock, exist_ok=True)
        if os.geteuid() == 0:
            ent = pwd.getpwnam("postgres")
            os.chown(self.sock, ent.pw_uid, ent.pw_gid)
        if self._running():
            return self  # make pg-up twice: the one already up
        options = "-c port=%d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c ssl=on" \
                  " -c max_connections=300" % (self.port, self.sock)
        self._as_postgres([os.path.join(bindir(), "pg_ctl"), "-D", self.data, "-l", os.path.join(self.root, "log"),
                           "-w", "-t", "60", "-o", options, "start"], "pg_ctl start")
        with open(os.path.join(self.root, "state.json"), "w") as fh:
            json.dump({"port": self.port, "password": self.password, "sock": self.sock, "url": self.url()}, fh)
        with self.admin("postgres") as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone():
                conn.execute("CREATE DATABASE " + DATABASE)
        return self

    def _running(self):
        try:
            self._as_postgres([os.path.join(bindir(), "pg_ctl"), "-D", self.data, "status"], "pg_ctl status")
        except PgError:
            return False
        return True

    def admin(self, database=DATABASE):
        """A superuser connection over the unix socket (trust), autocommit; for set-up, never for the ledger."""
        return psycopg.connect(host=self.sock, port=self.port, user=USER, dbname=database, autocommit=True)

    def create_schema(self, name, settings=None):
        """A fresh, empty schema ``name`` in the ``symphony`` database; returns :meth:`url` for it."""
        with self.admin() as conn:
            conn.execute("CREATE SCHEMA %s" % name)
        return self.url(schema=name, settings=settings)

    def stop(self, remove=False):
        """Stop the server (fast shutdown); ``remove``: delete the cluster directory too."""
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            self._as_postgres([os.path.join(bindir(), "pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop"],
                              "pg_ctl stop")
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)
            if self.sock.startswith("/tmp/symphony-pg-"):
                shutil.rmtree(self.sock, ignore_errors=True)


def main(argv=None):
    """``up`` (start, print the URL and the password variable), ``down`` (stop and delete), ``url``."""
    parser = argparse.ArgumentParser(prog="python -m symphony_awx.pg", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["up", "down", "url"])
    parser.add_argument("--root", default="build/pg/make")
    args = parser.parse_args(argv)
    if args.action == "up":
        try:
            server = PgServer.load(args.root).start()
        except PgError:
            server = PgServer(args.root).start()
        print("ledger URL: %s" % server.url())
        print("password:   in %s (state.json); export SYMPHONY_LEDGER_PASSWORD from it" % server.root)
    elif args.action == "down":
        try:
            PgServer.load(args.root).stop(remove=True)
        except PgError as exc:
            print(exc)
    else:
        print(PgServer.load(args.root).url())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
