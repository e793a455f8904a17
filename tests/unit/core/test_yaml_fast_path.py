"""The ryaml fast path of load_yaml_file: used only where PyYAML's safe loader would give the same values."""

import glob
import os

import pytest
import yaml

from ansible_collections.symphony.cluster.plugins.module_utils._core import schema
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import TwinError

pytest.importorskip("ryaml")


def _pyyaml(text):
    return yaml.load(text, Loader=schema._UniqueKeyLoader)


def _yaml_files(repo_root, shared):
    pats = [os.path.join(repo_root, p) for p in ("skus/*.yml", "inventories/**/*.yml", "roles/*/defaults/*.yml",
                                                 "roles/*/meta/argument_specs.yml", "playbooks/*.yml")]
    pats += [os.path.join(shared, "**", "*.y*ml")]
    for pat in pats:
        for path in sorted(glob.glob(pat, recursive=True)):
            if os.path.isfile(path):
                yield path


def test_fast_path_equals_pyyaml_on_every_yaml_file_here(repo_root, shared):
    used = checked = 0
    for path in _yaml_files(str(repo_root), str(shared)):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        try:
            expected = _pyyaml(text)
        except yaml.YAMLError:
            assert schema._fast_yaml(text) is None, path   # PyYAML refuses it: PyYAML must say why
            continue
        fast = schema._fast_yaml(text)
        checked += 1
        if fast is not None:
            used += 1
            assert fast == expected, path
    assert checked > 20 and used > 5, (checked, used)


@pytest.mark.parametrize("text", [
    "u: 017\n",              # 1.1 octal (15), 1.2 decimal
    "u: -017\n",
    "u: +017\n",
    "u: 00\n",
    "u: 0o17\n",             # 1.2 octal, 1.1 string
    "enabled: yes\n",        # 1.1 bool, 1.2 string
    "mode: on\n",
    "n: 1_000\n",            # 1.1 int
    "t: 10:20\n",            # 1.1 base 60
    "d: 2024-01-01\n",       # 1.1 date
    "f: 1e3\n",              # 1.2 float, 1.1 string
    "f: 1.5\n",
    "x: .inf\n",
    "base: &b {a: 1}\nother:\n  <<: *b\n  c: 2\n",
    "v: !!str 12\n",
    "a: 1\n---\nb: 2\n",
    "yes: 1\n",              # a key too
])
def test_fast_path_leaves_differing_or_special_yaml_to_pyyaml(text):
    assert schema._fast_yaml(text) is None


@pytest.mark.parametrize("text", ["n: 0b101\n", "h: 0x1F\n", "b: True\n", "z: ~\n", "s: 'yes'\n", "k: 10.0.0.1\n"])
def test_fast_path_never_differs_where_it_answers(text):
    assert schema._fast_yaml(text) in (None, _pyyaml(text))


def test_fast_path_keeps_plain_twin_values():
    text = ("twin_version: 1\nsites:\n  - name: s\n    racks:\n      - name: r01\n        bmc_subnet: 10.0.1.0/24\n"
            "        nodes:\n          - {hostname: gpu-r01-u02, u: 2, serial: C801, bmc_mac: '3c:ec:ef:00:00:01',"
            " note: \"\", spare: false, bmc_address: null}\n")
    assert schema._fast_yaml(text) == _pyyaml(text)
    assert schema._fast_yaml(text) is not None


def test_errors_still_come_from_pyyaml(tmp_path):
    path = tmp_path / "dup.twin.yml"
    path.write_text("twin_version: 1\nsites: []\nsites: []\n")
    with pytest.raises(TwinError, match=r"duplicate key 'sites' \(first at line 2\)"):
        schema.load_yaml_file(str(path), TwinError)
    path.write_text("twin_version: 1\nsites: [a, b\n")
    with pytest.raises(TwinError, match="invalid YAML at line"):
        schema.load_yaml_file(str(path), TwinError)
