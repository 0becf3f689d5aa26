"""One row per registered policy: what the generic policy tests need to know of it. A new
policy is tested by the generic tests (test_policies.py, test_policies_2026.py) once it has its
row; test_policy_table.py fails on a registered policy without one (as Composer drives its
algorithm tests from one table)."""

from dataclasses import dataclass

import torch

from fineprune_cli.pruning import get


@dataclass(frozen=True)
class Row:
    prunes: bool = True  # leaves samples out of some epochs (regular never does)
    anneal: str = "full"  # past δ·n: "full" trains every sample; "partial": its random draw still prunes (seta)
    seeded: bool = True  # its seed decides ties or draws (ies: thresholds alone)
    prunes_on_noise: bool = (
        True  # leaves samples out when each epoch's losses are drawn afresh (ies waits for a plateau)
    )
    first_epoch: int = 2  # the first epoch it can leave samples out of when pruning every epoch (ies: a history first)
    batch_mean: bool = False  # observes a sample against its batch's mean (fine): a rank's half-batch has another


POLICIES = {
    "regular": Row(prunes=False),
    "fine": Row(batch_mean=True),
    "random": Row(),
    "infobatch": Row(),
    "ucb": Row(),
    "egreedy": Row(),
    "kakurenbo": Row(),
    "rs2": Row(),
    "seta": Row(anneal="partial"),
    "orderdp": Row(),
    "ies": Row(seeded=False, prunes_on_noise=False, first_epoch=7),
    "selective-backprop": Row(),
}


def names(**wanted):
    """The policies with these values, in the table's order: a row's field, else the policy class's
    own attribute (`selects_batches`, `observes_predictions`: the registry says those, not the table)."""

    def value(name, key):
        row = POLICIES[name]
        return getattr(row, key) if hasattr(row, key) else getattr(get(name), key)

    return [name for name in POLICIES if all(value(name, k) == v for k, v in wanted.items())]


def predictions_for(name, n):
    """What observe() needs beyond the losses for `name` ({} for most): every sample correct and sure."""
    if not get(name).observes_predictions:
        return {}
    return {"correct": torch.ones(n, dtype=torch.bool), "confidence": torch.ones(n)}


# the policies that plan an epoch's samples (not a step's rows) and leave some out
PRUNING = names(prunes=True, selects_batches=False)

# those that prune from epoch 2 and train everything past δ·n: the generic --anneal tests
ANNEALING = [n for n in PRUNING if POLICIES[n].anneal == "full" and POLICIES[n].first_epoch == 2]
