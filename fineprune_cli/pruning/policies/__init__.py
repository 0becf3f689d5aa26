"""One module per pruning policy (and the bases some share), found by `pruning.registry` on its
first lookup: adding a policy is adding its module here."""
