"""``bench_retrieve`` refuses a count it cannot run with, naming the option, before it builds
or serves anything."""

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize("option", ["fragments", "queries", "workers", "block"])
def test_a_count_below_one_is_refused_naming_the_option(option):
    with pytest.raises(CommandError, match=f"--{option} must be at least 1, not 0"):
        call_command("bench_retrieve", **{option: 0})
