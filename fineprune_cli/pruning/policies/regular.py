"""`regular`: every sample in every epoch (the baseline; alias `none`).
Page: docs/policies/regular.md."""

from ..policy import Policy
from ..registry import register


@register
class Regular(Policy):
    name = "regular"
    label = "regular"
    color = "#444444"
    order = 0
    help = "no pruning: every sample in every epoch"
