import torch

from fineprune_cli.pruning.tracker import DroppingCount, highest


def test_counts_samples_above_batch_mean():
    t = DroppingCount(8)
    t.update(torch.tensor([5, 0, 2, 7]), torch.tensor([1.0, 2.0, 3.0, 6.0]))  # mean 3: only 6 > 3
    assert t.counts.tolist() == [0, 0, 0, 0, 0, 0, 0, 1]
    t.update(torch.tensor([7, 1]), torch.tensor([4.0, 0.0]))  # mean 2: 4 > 2
    assert t.counts.tolist() == [0, 0, 0, 0, 0, 0, 0, 2]


def test_tolerance_raises_the_bar():
    idx, losses = torch.arange(4), torch.tensor([1.0, 2.0, 4.0, 5.0])  # mean 3
    loose, strict, none = DroppingCount(4, 0.0), DroppingCount(4, 0.5), DroppingCount(4, 2 / 3)
    for t in (loose, strict, none):
        t.update(idx, losses)
    assert loose.counts.tolist() == [0, 0, 1, 1]
    assert strict.counts.tolist() == [0, 0, 0, 1]  # bar 4.5
    assert none.counts.tolist() == [0, 0, 0, 0]  # bar 5.0, not strictly above


def test_reset_clears():
    t = DroppingCount(3)
    t.update(torch.arange(3), torch.tensor([0.0, 0.0, 9.0]))
    t.reset()
    assert t.counts.sum().item() == 0


def test_highest_picks_largest_counts():
    t = DroppingCount(5)
    t.counts.copy_(torch.tensor([0, 5, 3, 5, 1], dtype=torch.int32))
    g = torch.Generator().manual_seed(0)
    assert set(t.highest(2, g).tolist()) == {1, 3}
    assert set(t.highest(3, g).tolist()) == {1, 2, 3}


def test_ties_are_broken_by_seeded_permutation_not_index():
    t = DroppingCount(100)  # all counts equal
    picks = [tuple(sorted(t.highest(10, torch.Generator().manual_seed(s)).tolist())) for s in range(5)]
    assert picks[0] != tuple(range(10))
    assert len(set(picks)) > 1
    again = tuple(sorted(t.highest(10, torch.Generator().manual_seed(0)).tolist()))
    assert again == picks[0]


def test_state_round_trip():
    t = DroppingCount(4, 0.1)
    t.update(torch.arange(4), torch.tensor([0.0, 1.0, 2.0, 9.0]))
    u = DroppingCount(4)
    u.load_state_dict(t.state_dict())
    assert torch.equal(u.counts, t.counts) and u.tolerance == 0.1


def test_buffered_batches_keep_their_own_means():
    t = DroppingCount(6)
    t.update(torch.tensor([0, 1, 2]), torch.tensor([1.0, 1.0, 7.0]))  # mean 3: sample 2
    t.update(torch.tensor([3, 4]), torch.tensor([10.0, 20.0]))  # mean 15: sample 4
    t.update(torch.tensor([5, 2]), torch.tensor([0.5, 0.1]))  # mean 0.3: sample 5
    assert t.counts.tolist() == [0, 0, 1, 0, 1, 1]


def test_flush_threshold_bounds_the_buffer(monkeypatch):
    import fineprune_cli.pruning.tracker as tracker

    monkeypatch.setattr(tracker, "FLUSH_EVERY", 2)
    t = DroppingCount(4)
    for _ in range(5):
        t.update(torch.tensor([0, 1]), torch.tensor([0.0, 1.0]))
    assert len(t._indices) == 1 and t.counts.tolist() == [0, 5, 0, 0]


def test_a_sample_observed_twice_counts_twice_in_a_step_and_across_buffered_steps():
    # Sample 1 sits twice in one batch (mean 2.5: both above) and twice more across two steps
    # that one flush counts together (above both times): four. Catches `counts[idx] += above`,
    # which adds once per distinct index of a flush (2 here).
    t = DroppingCount(4)
    t.update(torch.tensor([1, 1, 2, 3]), torch.tensor([5.0, 5.0, 0.0, 0.0]))
    t.update(torch.tensor([1, 0]), torch.tensor([4.0, 0.0]))
    t.update(torch.tensor([1, 2]), torch.tensor([4.0, 0.0]))
    assert t.counts.tolist() == [0, 4, 0, 0]


def test_load_state_dict_gives_exactly_the_saved_state_whatever_the_tracker_held():
    # The target holds other counts, a buffered step not yet counted and another tolerance.
    # Catches a load that keeps the buffered step (flushed on top of the loaded counts) or the
    # old tolerance (the step after the load judged by 0.0 instead of 0.5).
    saved = DroppingCount(4, 0.5)
    saved.update(torch.arange(4), torch.tensor([0.0, 0.0, 1.0, 9.0]))  # mean 2.5, bar 3.75: sample 3
    state = saved.state_dict()
    target = DroppingCount(4, 0.0)
    target.update(torch.arange(4), torch.tensor([7.0, 7.0, 0.0, 0.0]))  # buffered, not yet counted
    target.load_state_dict(state)
    assert target.counts.tolist() == [0, 0, 0, 1] and target.tolerance == 0.5
    target.update(torch.arange(4), torch.tensor([1.0, 1.0, 1.0, 1.4]))  # mean 1.1: 1.4 > 1.1, not > 1.65
    assert target.counts.tolist() == [0, 0, 0, 1]


def test_the_default_tolerance_counts_any_loss_above_the_mean():
    # Batch mean 1.0: 1.05 is above it (counted with the default tolerance 0) but below a bar of
    # 1.1 (what a default of 0.1 would set).
    t = DroppingCount(3)
    t.update(torch.arange(3), torch.tensor([0.95, 1.0, 1.05]))
    assert t.tolerance == 0.0 and t.counts.tolist() == [0, 0, 1]


def test_ties_keep_the_seeded_permutations_order_on_a_large_set():
    # 5000 equal counts: the 50 "highest" are exactly the first 50 of the seeded permutation (a
    # stable sort of the permuted values keeps their order). An unstable sort reorders ties by
    # itself (torch on CPU does from about a thousand values), so the draw would no longer be the
    # permutation's, and could differ between devices.
    expected = torch.randperm(5000, generator=torch.Generator().manual_seed(4))[:50]
    assert torch.equal(highest(torch.zeros(5000, dtype=torch.int32), 50, torch.Generator().manual_seed(4)), expected)
