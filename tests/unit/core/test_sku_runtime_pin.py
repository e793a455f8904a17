"""The shipped SKUs' runtime sections: x86_64 SKUs pin the runtime this collection builds (build id, sha256, the
kernel command line images/runtime/build.sh boots with); the aarch64 one pins no sha256 it could not have built."""

import re

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus


@pytest.fixture(scope="module")
def skus(repo_root):
    return load_skus(str(repo_root / "skus"))


def _extra(repo_root):
    text = (repo_root / "images" / "tunings.cmdline").read_text()
    return " ".join(w for line in text.splitlines() if not line.startswith("#") for w in line.split())


def _build_cmdline(repo_root, image="runtime"):
    """The command line images/<image>/build.sh boots with by default: its template with images/tunings.cmdline."""
    text = (repo_root / "images" / image / "build.sh").read_text()
    template = re.search(r'^CMDLINE=\$\(echo "([^"]+)" \| xargs\)', text, re.M).group(1)
    label = re.search(r'^LABEL=(\S+)', text, re.M)
    line = template.replace("$EXTRA", _extra(repo_root)).replace("$LABEL", label.group(1) if label else "$LABEL")
    return " ".join(line.split())


def test_x86_skus_pin_the_built_runtime(skus, repo_root):
    x86 = {n: m["runtime"] for n, m in skus.items() if "x86_64" in m["runtime"]["image_uri"]}
    assert len(x86) == 4
    for name, rt in x86.items():
        assert re.fullmatch(r"rt-[0-9a-f]{16}", rt["build_id"]), name
        assert re.fullmatch(r"[0-9a-f]{64}", rt["sha256"]), name
        assert rt["kernel_cmdline"] == _build_cmdline(repo_root), name
    assert len({(rt["build_id"], rt["sha256"]) for rt in x86.values()}) == 1   # one image for every x86_64 SKU


def test_the_aarch64_sku_pins_nothing_it_did_not_build(skus):
    rt = skus["gb200_nvl_tray"]["runtime"]
    assert "sha256" not in rt and "build_id" not in rt


def _os_cmdline(repo_root):
    text = (repo_root / "images" / "os" / "build.sh").read_text()
    return re.search(r'^LABEL=(\S+)', text, re.M).group(1)


def test_the_hgx_sku_pins_the_built_os_image(skus, repo_root):
    pin = skus["hgx_h100_supermicro"]["os"]
    assert re.fullmatch(r"os-[0-9a-f]{16}", pin["build_id"])
    assert pin["root_label"] == _os_cmdline(repo_root)   # what images/os labels the root it builds
    assert pin["image_uri"].endswith("symphony-os-x86_64.img.zst") and pin["raw_bytes"] % 512 == 0
    assert pin["target_disk"].startswith("/dev/") and set(pin["packages"]) == {"openssh-server", "python3"}
    assert pin["kernel_cmdline"] == _build_cmdline(repo_root, "os")


def test_every_shipped_sku_boots_with_its_own_tunings_tokens(skus):
    """The SKU loader's rule holds for what ships: each tunings.kernel_cmdline token is on the pinned boot lines."""
    checked = 0
    for name, sku in skus.items():
        for section in ("runtime", "os"):
            line = (sku.get(section) or {}).get("kernel_cmdline")
            if line:
                assert set((sku.get("tunings") or {}).get("kernel_cmdline") or []) <= set(line.split()), (name, section)
                checked += 1
    assert checked == 5   # four x86_64 runtimes and the HGX OS image
