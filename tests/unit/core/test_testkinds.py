"""A SKU key no check reads is refused at load: a typo must not remove a floor (issue 25)."""

import copy
import re

import jsonschema
import pytest
import yaml

from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ManifestError
from ansible_collections.symphony.cluster.plugins.module_utils._core.testkinds import TEST_KINDS


@pytest.fixture(scope="module")
def dgx(repo_root):
    with open(repo_root / "skus" / "dgx_h100.yml", encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _test(manifest, name):
    for t_index, tier in enumerate(manifest["burn_in"]["tiers"]):
        for index, test in enumerate(tier["tests"]):
            if test["name"] == name:
                return "$.burn_in.tiers[%d].tests[%d]" % (t_index, index), test
    raise AssertionError(name)


def _write(tmp_path, manifest):
    path = tmp_path / "dgx_h100.yml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return str(path)


def test_threshold_typo_fails_to_load(tmp_path, dgx):
    """The issue's case: ``min_bw_mbsp: 5500`` loaded and fio at 971 MB/s passed with no floor."""
    manifest = copy.deepcopy(dgx)
    path, test = _test(manifest, "fio_seq_read")
    test["thresholds"] = {"min_bw_mbsp": 5500}
    file = _write(tmp_path, manifest)
    with pytest.raises(ManifestError) as err:
        _sku.load_manifest(file)
    text = str(err.value)
    assert file in text and path + ".thresholds" in text
    assert "'min_bw_mbsp'" in text and "kind fio" in text
    assert "min_bw_mbps, min_iops, max_p99_lat_us" in text


def test_params_typo_fails(tmp_path, dgx):
    manifest = copy.deepcopy(dgx)
    _path, test = _test(manifest, "dcgm_diag")
    test["params"] = {"levle": 3}
    with pytest.raises(ManifestError, match=r"unknown key 'levle' in params of kind dcgm_diag \(known: level, extra\)"):
        _sku.load_manifest(_write(tmp_path, manifest))


def test_unknown_kind_fails(tmp_path, dgx):
    manifest = copy.deepcopy(dgx)
    _test(manifest, "fio_seq_read")[1]["kind"] = "fiio"
    with pytest.raises(ManifestError, match=r"unknown test kind 'fiio' \(known: .*\bfio\b"):
        _sku.load_manifest(_write(tmp_path, manifest))


def test_profile_test_name_typo_fails(tmp_path, dgx):
    manifest = copy.deepcopy(dgx)
    tests = manifest["profiles"]["lab"]["burn_in"]["tests"]
    tests["fio_seq_raed"] = tests.pop("fio_seq_read")
    with pytest.raises(ManifestError, match=r"\$\.profiles\.lab\.burn_in\.tests\.fio_seq_raed.*"
                                            r"profile names test 'fio_seq_raed'"):
        _sku.load_manifest(_write(tmp_path, manifest))


def test_profile_threshold_typo_fails_with_the_kind_of_the_named_test(tmp_path, dgx):
    manifest = copy.deepcopy(dgx)
    manifest["profiles"]["lab"]["burn_in"]["tests"]["fio_seq_read"]["thresholds"] = {"min_bw_mbsp": 20}
    with pytest.raises(ManifestError, match=r"profiles\.lab\.burn_in\.tests\.fio_seq_read\.thresholds.*"
                                            r"'min_bw_mbsp' in thresholds of kind fio"):
        _sku.load_manifest(_write(tmp_path, manifest))


def test_profile_test_key_typo_fails(tmp_path, dgx):
    manifest = copy.deepcopy(dgx)
    manifest["profiles"]["lab"]["burn_in"]["tests"]["cpu_stress"]["timeout"] = 60
    with pytest.raises(ManifestError, match=r"profiles\.lab\.burn_in\.tests\.cpu_stress.*'timeout' was unexpected"):
        _sku.load_manifest(_write(tmp_path, manifest))


def test_not_expected_typo_fails(tmp_path, dgx):
    manifest = copy.deepcopy(dgx)
    manifest["profiles"]["lab"]["not_expected"] = ["gpu"]
    with pytest.raises(ManifestError, match=r"not_expected\[0\].*unknown part 'gpu'.*known: cpus, memory, gpus"):
        _sku.load_manifest(_write(tmp_path, manifest))


def test_the_json_schema_alone_refuses_the_typo(dgx):
    """Editors and other tools using schemas/sku.schema.json see the same table."""
    manifest = copy.deepcopy(dgx)
    _test(manifest, "fio_seq_read")[1]["thresholds"] = {"min_bw_mbsp": 5500}
    errors = list(jsonschema.Draft202012Validator(_sku.SKU_SCHEMA).iter_errors(manifest))
    assert any("min_bw_mbsp" in e.message for e in errors)
    assert not list(jsonschema.Draft202012Validator(_sku.SKU_SCHEMA).iter_errors(dgx))


def test_every_key_a_check_reads_is_in_the_table(repo_root):
    """A key a check reads but the table lacks would make a correct SKU fail to load: keep them in step."""
    read = {"thresholds": set(), "params": set()}
    for path in (repo_root / "plugins" / "module_utils" / "_burnin" / "checks").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        read["thresholds"] |= set(re.findall(r'threshold\("([a-z0-9_]+)"', text))
        read["params"] |= set(re.findall(r'params\.get\("([a-z0-9_]+)"', text))
    for section, names in read.items():
        known = set().union(*(set(t[section]) for t in TEST_KINDS.values()))
        assert names <= known, (section, sorted(names - known))
