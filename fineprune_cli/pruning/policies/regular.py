"""`regular`: every sample in every epoch (the baseline; alias `none`)."""

from ..policy import Policy, register


@register
class Regular(Policy):
    name = "regular"
    label = "regular"
    color = "#444444"
    order = 0
    description = "no pruning: every sample in every epoch"
