"""Benchmark: 1,000 emulated BMCs in one process; aggregate GET throughput, latency injection off.

The emulator runs as its own process (``python -m symphony_emulator serve``, one loopback address
per BMC, plain HTTP, Basic auth); this process is the load generator.  First pass: every BMC once,
six resources each (``first_pass_get_rps``, the cold path).  Then ``get_rps``: asyncio keep-alive
connections spread round-robin over all 1,000 BMCs for a fixed time, each GET a different resource.
Writes ``build/bench/emulator.json``: ``{"bmcs": 1000, "get_rps": ..., ...}``.  Goal: >= 2,000 GET/s.
``get_per_server_cpu_s`` (GETs per CPU-second the emulator process used) and ``load_average_1m`` tell
a slow figure on a busy shared machine from a slow emulator.
"""

import asyncio
import base64
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
BMCS = int(os.environ.get("EMULATOR_BENCH_BMCS", "1000"))
DURATION_S = float(os.environ.get("EMULATOR_BENCH_SECONDS", "8"))
CONNECTIONS = int(os.environ.get("EMULATOR_BENCH_CONNECTIONS", "64"))
BIND_BASE = "127.40.0.1"
PORT = 8080
PATHS = ["/redfish/v1/Systems/1", "/redfish/v1/Chassis/1/PCIeDevices/GPU3", "/redfish/v1/UpdateService/FirmwareInventory",
         "/redfish/v1/Chassis/1/Thermal", "/redfish/v1/Managers/1", "/redfish/v1/Systems/1/Bios"]


def make_twin(directory, count):
    racks = []
    for r in range((count + 39) // 40):
        nodes = []
        for u in range(1, 41):
            i = r * 40 + u - 1
            if i >= count:
                break
            nodes.append({"hostname": "bench-%04d" % i, "u": u, "sku": "hgx_h100_supermicro",
                          "serial": "S8899%08d" % i, "bmc_mac": "3c:ec:ef:%02x:%02x:%02x" % (i >> 16, (i >> 8) & 255, i & 255)})
        racks.append({"name": "r%02d" % r, "bmc_subnet": "10.%d.%d.0/24" % (50 + r // 250, r % 250), "nodes": nodes})
    twin = {"twin_version": 1, "sku_dir": str(ROOT / "skus"), "sites": [{"name": "bench", "racks": racks}]}
    path = os.path.join(directory, "bench.twin.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(twin, handle)
    return path


async def worker(targets, start_index, auth, deadline, counts):
    """One keep-alive connection at a time per worker, moving round-robin over BMCs."""
    i = start_index
    reader = writer = None
    current = None
    while time.perf_counter() < deadline:
        host = targets[i % len(targets)]
        path = PATHS[i % len(PATHS)]
        i += CONNECTIONS
        if current != host:
            if writer is not None:
                writer.close()
            reader, writer = await asyncio.open_connection(host, PORT)
            current = host
        for _request in range(8):     # a few requests per connection before moving to the next BMC
            await _get(reader, writer, host, path, auth, counts)
    if writer is not None:
        writer.close()


async def _get(reader, writer, host, path, auth, counts):
    writer.write(("GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\n\r\n" % (path, host, auth)).encode())
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    await reader.readexactly(length)
    status = int(head[9:12])
    counts[status] = counts.get(status, 0) + 1


async def first_pass(targets, auth):
    """Every BMC once, every path once: the cold path (resource trees built and serialised on demand)."""
    counts = {}

    async def sweep(share):
        for host in share:
            reader, writer = await asyncio.open_connection(host, PORT)
            for path in PATHS:
                await _get(reader, writer, host, path, auth, counts)
            writer.close()
    start = time.perf_counter()
    await asyncio.gather(*(sweep(targets[k::CONNECTIONS]) for k in range(CONNECTIONS)))
    return counts, time.perf_counter() - start


async def load(targets, auth, seconds):
    counts = {}
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    await asyncio.gather(*(worker(targets, k, auth, deadline, counts) for k in range(CONNECTIONS)))
    return counts, time.perf_counter() - start


def cpu_seconds(pid):
    """utime + stime of a process, seconds (/proc/<pid>/stat fields 14 and 15)."""
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    out_dir = ROOT / "build" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH="%s:%s" % (ROOT / "build" / "collections", ROOT / "tools"))
    with tempfile.TemporaryDirectory(prefix="bench-emulator-") as tmp:
        twin = make_twin(tmp, BMCS)
        pidfile = os.path.join(tmp, "emulator.pid")
        map_path = os.path.join(tmp, "bmcs.json")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "symphony_emulator", "serve", "--twin", twin, "--bind-base", BIND_BASE,
                        "--port", str(PORT), "--http", "--credentials", "demo", "--map", map_path, "--background",
                        "--pidfile", pidfile], check=True, env=env, cwd=ROOT)
        start_s = time.perf_counter() - t0
        try:
            with open(map_path) as handle:
                nodes = json.load(handle)["nodes"]
            assert len(nodes) == BMCS, len(nodes)
            first = next(iter(nodes.values()))
            auth = "Basic " + base64.b64encode(("%s:%s" % (first["username"], first["password"])).encode()).decode()
            targets = [n["address"] for n in nodes.values()]
            with open(pidfile) as handle:
                pid = int(handle.read())
            cold, cold_s = asyncio.run(first_pass(targets, auth))
            cpu0 = cpu_seconds(pid)
            counts, elapsed = asyncio.run(load(targets, auth, DURATION_S))
            server_cpu = cpu_seconds(pid) - cpu0
        finally:
            subprocess.run([sys.executable, "-m", "symphony_emulator", "stop", "--pidfile", pidfile], env=env, cwd=ROOT, check=False)
    ok = counts.get(200, 0)
    cold_ok = cold.get(200, 0)
    result = {"bmcs": BMCS, "get_rps": round(ok / elapsed, 1), "non_200_responses": sum(counts.values()) - ok + sum(cold.values()) - cold_ok,
              "first_pass_get_rps": round(cold_ok / cold_s, 1),
              "connections": CONNECTIONS, "duration_s": round(elapsed, 2), "startup_s": round(start_s, 2),
              "goal_get_rps": 2000, "server_cpu_s": round(server_cpu, 2),
              # GETs per second of emulator CPU: the throughput one dedicated core gives, whatever else runs
              "get_per_server_cpu_s": round(ok / server_cpu, 1) if server_cpu else None,
              "load_average_1m": os.getloadavg()[0]}
    (out_dir / "emulator.json").write_text(json.dumps(result) + "\n")
    print(json.dumps(result))
    return 0 if ok and cold_ok == BMCS * len(PATHS) and result["non_200_responses"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
