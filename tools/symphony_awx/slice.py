"""AWX job slicing, reproduced: a stage playbook as N concurrent ansible-runner jobs, one per slice of the inventory.

What AWX does with a job template whose ``job_slice_count`` is N > 1 (AWX docs, "Job Slicing",
https://docs.ansible.com/projects/awx/en/24.6.1/userguide/job_slices.html): it launches a workflow of N jobs, each
an ``ansible-playbook`` run (through ansible-runner, in its own execution-environment container) on "a reduced
version of the original inventory that only contains the hosts in that particular slice".  Which hosts: the
inventory's hosts ordered by name, slice k of N (1-based) taking every N-th from the (k-1)-th
(``Inventory.get_sliced_hosts`` in awx/main/models/inventory.py: ``hosts[offset::slice_count]``, offset = k - 1;
the inventory script API's ``?subset=slicekofN`` is the same cut).  Group and host variables stay as they are;
slices share nothing but what they write, here the one PostgreSQL ledger.

    results = run_sliced("playbooks/pre_deployment.yml", "inventories/site1/site1.twin.yml", slices=4,
                         work="build/slice", extravars={...})
    [(r.slice, r.status, r.rc, r.hosts) for r in results]

CLI: ``python -m symphony_awx.slice --inventory SRC --playbook PB --slices N [--work DIR] [-e KEY=VALUE ...]``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import ansible_runner

from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger_pg import PASSWORD_ENV


def slice_hosts(hosts, count):
    """AWX's cut: ``hosts`` sorted by name, slice k (1..count) = ``sorted(hosts)[k-1::count]``; a list of lists."""
    if count < 1:
        raise ValueError("slice count must be >= 1, got %r" % count)
    ordered = sorted(hosts)
    return [ordered[k::count] for k in range(count)]


def export_inventory(source, env=None):
    """``ansible-inventory --list --export`` of ``source``: groups with their own vars, hosts with their own vars."""
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-inventory"), "-i", str(source),
                           "--list", "--export"], capture_output=True, text=True, env=env, timeout=600, check=False)
    if proc.returncode:
        raise RuntimeError("ansible-inventory failed for %s: %s" % (source, proc.stderr[-2000:]))
    return json.loads(proc.stdout)


def inventory_hosts(exported):
    """Every host of an exported inventory (``_meta.hostvars`` keys plus hosts listed only in groups)."""
    hosts = set((exported.get("_meta") or {}).get("hostvars") or {})
    for name, group in exported.items():
        if name != "_meta" and isinstance(group, dict):
            hosts.update(group.get("hosts") or [])
    return hosts


def _plain(value):
    # ansible-inventory's JSON marks untrusted strings {"__ansible_unsafe": "..."}; the slice inventory is data again
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def reduced_inventory(exported, hosts):
    """The inventory (``ansible.builtin.yaml`` shape, as JSON) of ``exported`` keeping only ``hosts``: every group,
    its vars and children as they were, its host list cut to the slice; each kept host with its own vars."""
    keep = set(hosts)
    hostvars = (exported.get("_meta") or {}).get("hostvars") or {}

    def group(name):
        data = exported.get(name) or {}
        out = {"hosts": {h: {} for h in data.get("hosts") or [] if h in keep}}
        if data.get("vars"):
            out["vars"] = _plain(data["vars"])
        children = {child: group(child) for child in data.get("children") or []}
        if children:
            out["children"] = children
        return out

    top = group("all")
    top["hosts"] = {h: _plain(hostvars.get(h) or {}) for h in sorted(keep)}
    return {"all": top}


@dataclass
class SliceResult:
    """One slice job: its number (1-based), hosts, ansible-runner status (successful, failed, canceled...), rc."""
    slice: int
    hosts: list
    status: str = "unstarted"
    rc: int = None
    private_data_dir: str = ""


def run_sliced(playbook, inventory, slices, work, extravars=None, envvars=None, forks=None, cancel=None, only=None):
    """Run ``playbook`` as ``slices`` concurrent ansible-runner jobs over AWX's slices of ``inventory``.

    ``work``: a directory; slice k runs in ``work/slice-k`` (its private data dir: inventory, artifacts).
    ``extravars``: the job template's extra vars, the same for every slice (``{slice}`` in a string value becomes
    the slice number, for per-slice paths such as a dispatch directory, as each AWX job has its own container).
    ``envvars``: added to the jobs' environment, which is the caller's (as AWX credential injectors add to it); the
    ledger password in it reaches the jobs through a password file, never the private data dirs.
    ``cancel``: ``cancel(k) -> bool``, polled while slice k runs; True kills the job's process group
    (ansible-runner's cancel: SIGKILL), as a lost execution node would; ansible-runner keeps the latest answer, so
    once True it must stay True.  ``only``: the slice numbers to run
    (a relaunch of failed slices).  Returns the :class:`SliceResult` list, slice 1 first.
    """
    exported = export_inventory(inventory)
    cuts = slice_hosts(inventory_hosts(exported), slices)
    results, threads = [], []
    envvars, passfile = _ledger_password_file(dict(envvars or {}))
    try:
        _start(playbook, exported, cuts, work, extravars, envvars, forks, cancel, only, results, threads)
        for thread in threads:
            thread.join()
    finally:
        if passfile:
            os.unlink(passfile)
    return results


def _ledger_password_file(envvars):
    """ansible-runner writes each job's whole environment into its artifacts (``artifacts/<ident>/command``): the
    ledger password goes to the jobs in a libpq password file (0600, removed after the jobs) instead, and the
    variables that held it are blanked for them.  Returns ``(envvars, passfile path or None)``."""
    secret = os.environ.get(PASSWORD_ENV) or os.environ.get("PGPASSWORD")
    if not secret:
        return envvars, None
    handle, path = tempfile.mkstemp(prefix="symphony-pgpass-")
    with os.fdopen(handle, "w") as fh:
        # https://www.postgresql.org/docs/current/libpq-pgpass.html: host:port:database:username:password
        fh.write("*:*:*:*:%s\n" % secret.replace("\\", "\\\\").replace(":", "\\:"))
    return dict(envvars, **{PASSWORD_ENV: "", "PGPASSWORD": "", "PGPASSFILE": path}), path


def _start(playbook, exported, cuts, work, extravars, envvars, forks, cancel, only, results, threads):
    for number, hosts in enumerate(cuts, start=1):
        result = SliceResult(number, hosts, private_data_dir=os.path.abspath(os.path.join(work, "slice-%d" % number)))
        results.append(result)
        if only is not None and number not in only:
            continue
        os.makedirs(os.path.join(result.private_data_dir, "inventory"), exist_ok=True)
        with open(os.path.join(result.private_data_dir, "inventory", "hosts.json"), "w", encoding="utf-8") as fh:
            json.dump(reduced_inventory(exported, hosts), fh, indent=1)
        values = {k: (v.replace("{slice}", str(number)) if isinstance(v, str) else v)
                  for k, v in (extravars or {}).items()}
        thread, _ = ansible_runner.run_async(
            private_data_dir=result.private_data_dir, playbook=os.path.abspath(playbook),
            inventory=os.path.join(result.private_data_dir, "inventory", "hosts.json"),
            extravars=values, envvars=envvars, forks=forks, quiet=True, ident="slice-%d" % number,
            suppress_env_files=True,
            # look at cancel() every 0.5 s, not only when the job prints (ansible-runner's default: 5 s)
            settings={"pexpect_timeout": 0.5},
            cancel_callback=(lambda n=number: bool(cancel(n))) if cancel else None,
            finished_callback=lambda runner, r=result: _finished(runner, r))
        threads.append(thread)


def _finished(runner, result):
    result.status, result.rc = runner.status, runner.rc


def main(argv=None):
    """CLI: run the slices, print one line per slice, exit 0 only when every slice succeeded."""
    parser = argparse.ArgumentParser(prog="python -m symphony_awx.slice", description=__doc__.split("\n")[0])
    parser.add_argument("--inventory", required=True)
    parser.add_argument("--playbook", required=True)
    parser.add_argument("--slices", type=int, required=True)
    parser.add_argument("--work", default="build/slice")
    parser.add_argument("--forks", type=int)
    parser.add_argument("-e", "--extra-var", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    extravars = dict(item.split("=", 1) for item in args.extra_var)
    results = run_sliced(args.playbook, args.inventory, args.slices, args.work, extravars=extravars, forks=args.forks)
    for r in results:
        print("slice %d/%d: %s rc=%s hosts=%d (%s)"
              % (r.slice, args.slices, r.status, r.rc, len(r.hosts), r.private_data_dir))
    return 0 if all(r.status == "successful" for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
