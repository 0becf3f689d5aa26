"""The other policies' runs stay identical to the bit across issue 23's protocol change (and
any later change not meant to alter them): six short runs compared with the rows the code
printed at the commit before the change (experiments/bench/protocol_golden.py, recorded in
tests/data/protocol_golden.json). Floating-point results depend on the processor and torch
build, so the exact check runs only where the rows were recorded; every other machine checks the
same runs within a tolerance (issue 41: six skips told a new user nothing). The README's
equality check (two `fineprune compare` folders) is the full procedure."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "bench"))
import protocol_golden  # noqa: E402

GOLDENS = json.loads((Path(__file__).parent / "data" / "protocol_golden.json").read_text())["goldens"]
GOLDEN = GOLDENS[0]  # the one recorded at the commit before issue 23's change
EXACT = ("epoch", "lr", "pruned")  # the schedule's: no float arithmetic of the run's reaches them
# The recorded machines' rows differ by 1.5e-7 in a loss of 2.3 (AVX2 against AVX-512, measured
# with experiments/bench/protocol_golden.py): 1e-4 leaves room for other processors, and catches
# any change of the protocol, which moves a 3-epoch run's losses by far more.
LOSS_REL = 1e-4
ACCURACY_PT = 1.0  # one of the 100 test images may fall the other way
SAMPLES_SHARE = 0.02  # a loss-driven policy may keep a sample at its threshold the other way


@pytest.mark.parametrize("policy", protocol_golden.POLICIES)
def test_the_policys_short_run_is_unchanged_to_the_bit(policy):
    here = protocol_golden.signature()
    mine = [g for g in GOLDENS if g["machine"] == here]
    if not mine:
        pytest.skip(f"golden rows recorded on {[g['machine'] for g in GOLDENS]}, this is {here}")
    assert protocol_golden.rows(policy) == mine[0]["runs"][policy]


def test_the_golden_runs_prune():
    """Each pruning policy's golden run left samples out in some epoch: the check covers its plans."""
    samples = protocol_golden.FIELDS.index("samples")
    for policy in protocol_golden.POLICIES[1:]:
        assert any(float.fromhex(row[samples]) < 200 for row in GOLDEN["runs"][policy]["metrics"]), policy


def _near(policy: str, field: str, got: float, want: float) -> bool:
    if field in EXACT:
        return got == want
    if field == "samples":
        return got == want if policy in ("regular", "fine", "random") else abs(got - want) <= SAMPLES_SHARE * want
    if field == "test_accuracy":
        return abs(got - want) <= ACCURACY_PT
    return abs(got - want) <= LOSS_REL * abs(want)


@pytest.mark.slow
@pytest.mark.parametrize("policy", protocol_golden.POLICIES)
def test_the_policys_short_run_is_near_its_golden_on_any_machine(policy):
    """What a machine other than the recording one can check: the schedule exactly, the
    numbers within what processors explain."""
    here = protocol_golden.signature()
    golden = next((g for g in GOLDENS if g["machine"] == here), GOLDEN)["runs"][policy]["metrics"]
    got = protocol_golden.rows(policy)["metrics"]
    assert len(got) == len(golden)
    for epoch, (row, want) in enumerate(zip(got, golden), start=1):
        for field, a, b in zip(protocol_golden.FIELDS, row, want):
            mine, theirs = float.fromhex(a), float.fromhex(b)
            assert _near(policy, field, mine, theirs), f"{policy} epoch {epoch} {field}: {mine} (golden {theirs})"
