"""The controller-side pool settings every BMC stage shares: a missing value takes the default, a pool below 1
is refused with the option named (before, 0 silently became the default and -1 went through)."""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.batch import DEFAULT_PER_BMC
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.settings import fleet_settings_kwargs


def test_missing_takes_the_default():
    kwargs = fleet_settings_kwargs({"workers": None}, workers=32)
    assert (kwargs["workers"], kwargs["per_bmc"], kwargs["max_concurrency"]) == (32, DEFAULT_PER_BMC, 4)
    assert fleet_settings_kwargs({"workers": 8, "per_bmc": 2, "max_concurrency": 1})["workers"] == 8


@pytest.mark.parametrize("name,value", [("workers", 0), ("max_concurrency", -1), ("per_bmc", 0)])
def test_below_one_is_refused_naming_the_option(name, value):
    with pytest.raises(ValidationError, match="%s must be at least 1, got %r" % (name, value)) as info:
        fleet_settings_kwargs({name: value})
    assert info.value.where == name
