"""The schedule check (analysis/group/compression.py, lrphases.py) on timm's own scheduler factory
(issue 55): a shorter arm whose warm-up is held fixed or scaled and rounded to whole epochs, and
whose cool-down is folded into {epochs} and held, trains regular's schedule compressed; a main
schedule whose length does not follow {epochs} is still refused."""

import math

import pytest
import torch
from timm.scheduler import create_scheduler_v2

from fineprune_cli.analysis.group.compression import mismatch
from fineprune_cli.arms import shorter_schedule


def timm_lrs(epochs, warmup=0, cooldown=0, prefix=False, length=None, sched="cosine"):
    """The lr a script logs each epoch (before it steps) under timm's create_scheduler_v2, the
    cool-down folded into --epochs: the schedule's own length is epochs - cooldown (`length`: a
    length of its own instead, one that does not follow --epochs)."""
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    main = (length or epochs) - cooldown - (warmup if prefix else 0)  # warmup_prefix adds it to the length
    scheduler, total = create_scheduler_v2(
        opt, sched=sched, num_epochs=main, warmup_epochs=warmup, cooldown_epochs=cooldown, warmup_prefix=prefix
    )
    assert total == (length or epochs)  # what the script trains: its --epochs, the cool-down included
    lrs = []
    for epoch in range(epochs):
        lrs.append(opt.param_groups[0]["lr"])
        scheduler.step(epoch + 1)
    return lrs


def arm(epochs, budget):
    return shorter_schedule(epochs, [], 0.0, budget)[0]


@pytest.mark.parametrize("prefix", [False, True])
@pytest.mark.parametrize("warmup", [3, 4, 5])
def test_timms_recipe_with_its_warm_up_fixed_or_rounded_passes(warmup, prefix):
    """The issue's case: 300 epochs with --warmup-epochs 5, a 30% shorter arm given 3, 4 or 5
    (3.5 scaled: timm's flag is an integer). Catches the check as it was, which refused all three
    (with 3 by 0.02% of the lr)."""
    regular = timm_lrs(300, 5, prefix=prefix)
    assert mismatch(regular, timm_lrs(210, warmup, prefix=prefix)) is None


SWEEP = [(e, b) for e in (24, 31, 47, 60, 100, 200, 300) for b in (0.1, 0.2, 0.3, 0.5)]


@pytest.mark.parametrize("epochs, budget", SWEEP)
def test_warm_up_held_or_rounded_and_cool_down_folded_pass_at_every_length(epochs, budget):
    """Warm-ups of 0 to 5 epochs held or rounded down or up, cool-downs of 0, 1, 2 and 10 epochs
    folded into --epochs and held, the cosine counting its warm-up or not (warmup_prefix)."""
    n = arm(epochs, budget)
    for warmup in range(6):
        for cooldown in (0, 1, 2, 10):
            if warmup + cooldown + 3 > n:
                continue
            for prefix in (False, True):
                regular = timm_lrs(epochs, warmup, cooldown, prefix)
                for w in {warmup, math.floor(warmup * n / epochs), math.ceil(warmup * n / epochs)}:
                    found = mismatch(regular, timm_lrs(n, w, cooldown, prefix))
                    assert found is None, (epochs, n, warmup, w, cooldown, prefix, found.text())


@pytest.mark.parametrize("epochs, budget", [(e, b) for e, b in SWEEP if arm(e, b) <= e - 3])
def test_a_cosine_whose_length_does_not_follow_the_epochs_is_refused_whatever_its_warm_up(epochs, budget):
    """The same recipes, the arm's cosine as long as regular's (timm's --epochs fixed, the arm
    stopped early): refused, warm-up held or not. Catches views that forgive a main schedule."""
    n = arm(epochs, budget)
    for warmup in range(6):
        for cooldown in (0, 2):
            if warmup + cooldown + 3 > n or epochs - n < cooldown + 3:
                continue
            regular = timm_lrs(epochs, warmup, cooldown)
            for w in {warmup, math.floor(warmup * n / epochs)}:
                fixed = timm_lrs(epochs, w, cooldown)[:n]  # the arm stops at its epochs, part way down
                found = mismatch(regular, fixed)
                assert found is not None and found.lr > found.high, (epochs, n, warmup, w, cooldown)


def test_milestones_that_do_not_follow_the_epochs_are_refused_after_a_warm_up():
    """timm's multistep with a warm-up: the arm's milestones compressed pass, regular's kept fail."""
    opt = lambda: torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)  # noqa: E731

    def multistep(epochs, milestones, warmup):
        o = opt()
        s, _ = create_scheduler_v2(o, sched="multistep", num_epochs=epochs, decay_milestones=milestones,
                                   warmup_epochs=warmup, decay_rate=0.2)  # fmt: skip
        lrs = []
        for e in range(epochs):
            lrs.append(o.param_groups[0]["lr"])
            s.step(e + 1)
        return lrs

    regular = multistep(100, [50, 80], 5)
    assert mismatch(regular, multistep(70, [35, 56], 5)) is None
    assert mismatch(regular, multistep(70, [35, 56], 3)) is None
    assert mismatch(regular, multistep(70, [50, 80], 5)) is not None


def test_a_warm_up_longer_than_regulars_or_cut_to_nothing_is_not_held():
    """Neither held nor rounded: the arm warms up for longer than regular, or not at all where
    regular warms up for 8 of 20 epochs."""
    regular = timm_lrs(20, 8)
    assert mismatch(regular, timm_lrs(10, 8)) is None  # held fixed
    assert mismatch(regular, timm_lrs(10, 4)) is None  # scaled
    assert mismatch(regular, timm_lrs(10, 9)) is not None
    assert mismatch(regular, timm_lrs(10, 0)) is not None
