"""The policy table covers the registry: a policy registered without a row (or a row left after
its policy is gone) fails here, so the generic tests never silently skip one."""

from fineprune_cli.pruning import list_policies
from policy_table import POLICIES


def test_every_registered_policy_has_its_row_and_no_other_row_exists():
    assert list(POLICIES) == list(list_policies())
