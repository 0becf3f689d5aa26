"""Random-equal epochs, read from a run's record: the pruning epochs in which a policy leaves out,
by construction, the samples its random control of the same seed leaves out (for fine-pruning,
those that select from an empty DroppingCount: `pruning.schedule.counts_empty`). The record's
window and pruning epochs decide them exactly, so runs made before they were counted have them
too. A comparison with the random control measures nothing in them.
"""

from __future__ import annotations

from ...pruning import registry as policies
from .runs import Run


def random_equal_epochs(run: Run) -> list[int]:
    """The run's random-equal epochs; [] for a policy without them, or a record without a window."""
    s = run.summary
    window = s.schedule.get("window")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        return []
    try:
        kind = policies.get(s.policy)
    except ValueError:  # a policy this version no longer has
        return []
    return kind.random_equal_epochs(window, s.pruning_epochs)


def chain_lines(runs: dict[int, Run]) -> list[str]:
    """The line a decision's chain gives a row whose runs have random-equal epochs (none when
    they have none): how many, which, and what that leaves of the comparison with random."""
    counts = {seed: (random_equal_epochs(run), len(run.summary.pruning_epochs)) for seed, run in runs.items()}
    if not any(equal for equal, _ in counts.values()):
        return []
    if len({(tuple(equal), total) for equal, total in counts.values()}) > 1:
        each = "; ".join(f"seed {seed}: {len(equal)} of {total}" for seed, (equal, total) in sorted(counts.items()))
        return [
            f"  - Random-equal epochs differ between its runs ({each} pruning epochs): in them it selects from "
            "an empty DroppingCount and leaves out the samples the random control of its seed leaves out."
        ]
    equal, total = next(iter(counts.values()))
    listed = ", ".join(map(str, equal))
    why = "select from an empty DroppingCount (each opens a window, or the run) and so leave out the samples"
    if len(equal) == total:
        return [
            f"  - **Random-equal in every pruning epoch** ({total} of {total}: {listed}): they {why} the random "
            "control of its seed leaves out; here it is the random control under another name, and its "
            "comparison with the random control measures nothing."
        ]
    return [
        f"  - Random-equal epochs: {len(equal)} of its {total} pruning epochs ({listed}) {why} the random "
        f"control of its seed leaves out; only the other {total - len(equal)} choose by the counts."
    ]
