"""Generated JSON Schema files stay in sync; bad SKU manifests fail with the file and JSON path."""

import copy
import json

import jsonschema
import pytest
import yaml

from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._core import twin as _twin
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ManifestError, TwinError
from ansible_collections.symphony.cluster.plugins.module_utils._core.schema import load_yaml_file


def test_schema_files_in_sync(repo_root):
    for name, schema in (("sku.schema.json", _sku.SKU_SCHEMA), ("twin.schema.json", _twin.TWIN_SCHEMA)):
        on_disk = json.loads((repo_root / "schemas" / name).read_text())
        assert on_disk == schema, ("schemas/%s is out of date: run "
                                   "`PYTHONPATH=build/collections .venv/bin/python schemas/generate.py`" % name)
        jsonschema.Draft202012Validator.check_schema(on_disk)


def test_shipped_manifests_validate_with_the_json_file(repo_root):
    schema = json.loads((repo_root / "schemas" / "sku.schema.json").read_text())
    for path in sorted((repo_root / "skus").glob("*.yml")):
        jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(path.read_text()))


@pytest.fixture(scope="module")
def manifest(repo_root):
    return _sku.load_manifest(str(repo_root / "skus" / "hgx_h100_supermicro.yml"))


@pytest.mark.parametrize("mutate, message", [
    (lambda m: m["bom"]["gpus"].update(count="eight"), "x.yml: $.bom.gpus.count: 'eight' is not of type 'integer'"),
    (lambda m: m["firmware"][0]["image"].update(sha256="abc"),
     "x.yml: $.firmware[0].image.sha256: 'abc' does not match '^[0-9a-f]{64}$'"),
    (lambda m: m["firmware"][1].update(method="ftp"),
     "x.yml: $.firmware[1].method: 'ftp' is not one of ['redfish_simple_update', 'redfish_multipart', 'nvfwupd', "
     "'mlxfwmanager', 'flint', 'nvme_cli', 'none']"),
    (lambda m: m["firmware"][1].update(id="bmc"), "x.yml: $.firmware[1]: firmware id 'bmc' appears twice"),
    (lambda m: m["firmware"][0].update(target="11.02.00"),
     "x.yml: $.firmware[0]: target '11.02.00' is not among the accepted versions ['11.01.01']"),
    (lambda m: m.pop("bom"), "x.yml: $: 'bom' is a required property"),
    (lambda m: m["burn_in"]["tiers"][0]["tests"][0].update(timeout_s=0),
     "x.yml: $.burn_in.tiers[0].tests[0].timeout_s: 0 is less than the minimum of 1"),
])
def test_bad_manifests_name_the_path(manifest, mutate, message):
    data = copy.deepcopy(manifest)
    mutate(data)
    with pytest.raises(ManifestError) as err:
        _sku.validate_manifest(data, "x.yml")
    assert str(err.value) == message


def test_yaml_errors_name_file_and_line(tmp_path):
    path = tmp_path / "broken.yml"
    path.write_text("sku: x\nbom: [\n")
    with pytest.raises(ManifestError, match=r"broken.yml: invalid YAML at line 3 column 1"):
        _sku.load_manifest(str(path))
    with pytest.raises(TwinError, match=r"missing.twin.yml: cannot read file: No such file or directory"):
        load_yaml_file(str(tmp_path / "missing.twin.yml"), TwinError)
    (tmp_path / "list.yml").write_text("- a\n")
    with pytest.raises(ManifestError, match="list.yml: top level must be a mapping"):
        _sku.load_manifest(str(tmp_path / "list.yml"))


def test_duplicate_sku_across_files(tmp_path, repo_root):
    text = (repo_root / "skus" / "dgx_h100.yml").read_text()
    (tmp_path / "a.yml").write_text(text)
    (tmp_path / "b.yml").write_text(text)
    with pytest.raises(ManifestError, match=r"b.yml: SKU 'dgx_h100' is declared twice"):
        _sku.load_skus(str(tmp_path))


@pytest.mark.parametrize("mutate", [
    lambda m: m["bom"]["gpus"].update(count="eight"),
    lambda m: m["bom"]["gpus"].update(count=True),
    lambda m: m["firmware"][0]["image"].update(sha256="abc"),
    lambda m: m["firmware"][1].update(method="ftp"),
    lambda m: m.pop("bom"),
    lambda m: m.update(extra_key=1),
    lambda m: m["burn_in"]["tiers"][0]["tests"][0].update(timeout_s=0),
])
def test_fast_path_rejects_what_jsonschema_rejects(manifest, mutate):
    """The fastjsonschema accelerator may never accept a document jsonschema rejects."""
    from ansible_collections.symphony.cluster.plugins.module_utils._core import schema as _schema
    fast = _schema._fast_validator(_sku.SKU_SCHEMA)
    if fast is None:
        pytest.skip("fastjsonschema not installed: jsonschema alone validates")
    data = copy.deepcopy(manifest)
    mutate(data)
    assert not jsonschema.Draft202012Validator(_sku.SKU_SCHEMA).is_valid(data)
    with pytest.raises(Exception):
        fast(data)
    fast(copy.deepcopy(manifest))  # and accepts the shipped manifest


def test_json_twin_loads_through_the_fast_path(tmp_path):
    path = tmp_path / "fleet.yml"
    path.write_text(json.dumps({"twin_version": 1, "sites": []}))
    assert load_yaml_file(str(path), TwinError) == {"twin_version": 1, "sites": []}
    path.write_text("{twin_version: 1, sites: []}\n")  # flow-style YAML that is not JSON still loads
    assert load_yaml_file(str(path), TwinError) == {"twin_version": 1, "sites": []}
