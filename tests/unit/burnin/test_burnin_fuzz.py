"""Fuzz: the burn-in parsers never raise anything but ParseError, on random text and on mangled real samples."""

from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import dcgm as _dcgm
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import fio as _fio
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import gpu_burn as _gpu_burn
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import ibstat as _ibstat
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import kmsg as _kmsg
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import lspci as _lspci
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import nvidia_smi as _nvidia_smi
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import power_csv as _power_csv
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import rocm_smi as _rocm_smi
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import stress_ng as _stress_ng
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import xid as _xid

PARSERS = {
    "dcgmi-diag-3.1.0-preamble-and-nulls-dcgm.json.txt": _dcgm.parse_dcgm_diag,
    "fio-3.16-json-nvme-randrw-superbench.json.txt": _fio.parse_fio_json,
    "fio-2.17-json-pkb-duplicate-keys.json.txt": _fio.parse_fio_json,
    "gpu-burn-8xA100-superbench.txt": _gpu_burn.parse_gpu_burn,
    "ibstat-h100-some-down-polling-gpud.txt": _ibstat.parse_ibstat,
    "kmsg-raw-records-nvswitch-gpud.txt": _kmsg.parse_kmsg_records,
    "nvidia-smi-q-x-a100-sxm4-80gb-mig-v12.xml.txt": _nvidia_smi.parse_nvidia_smi_xml,
    "nvidia-smi-query-power-csv-pkb.txt": _power_csv.parse_query_csv,
    "rocm-smi-json-MI100-rocm571.json.txt": _rocm_smi.parse_rocm_smi_json,
    "stress-ng-metrics-brief-pkb.txt": _stress_ng.parse_stress_ng,
    "dmesg-xid-119-gsp-timeout-xe9680-gpud.log.txt": _xid.parse_xid_events,
}
ALL = sorted(set(PARSERS.values()), key=lambda f: f.__module__ + f.__name__) + [_lspci.parse_lspci_vv,
                                                                                _kmsg.parse_kernel_log]
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _call(parser, text):
    try:
        parser(text)
    except ParseError as exc:
        assert exc.where and exc.message


@FUZZ
@given(text=st.text(max_size=400))
def test_random_text_only_parse_errors(text):
    for parser in ALL:
        _call(parser, text)


@FUZZ
@given(prefix=st.text(alphabet="{}[]\",:0123456789 <>/anull\n", max_size=200))
def test_json_and_xml_like_noise_only_parse_errors(prefix):
    for parser in ALL:
        _call(parser, prefix)


@FUZZ
@given(data=st.data())
def test_truncated_and_mangled_samples_only_parse_errors(tool_text, data):
    name = data.draw(st.sampled_from(sorted(PARSERS)))
    text = tool_text(name)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    start = data.draw(st.integers(min_value=0, max_value=cut))
    junk = data.draw(st.text(max_size=20))
    _call(PARSERS[name], text[:start] + junk + text[cut:])
    _call(PARSERS[name], text[:cut])
