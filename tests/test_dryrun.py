"""drivers/dryrun.py and drivers/probe.py: the --dry-run time estimate. The arithmetic is checked
with a fake probe (known costs per image give an exact figure) and the probe's timing loop with
a fake clock; nothing here depends on how fast this machine is."""

import json
import re
import sys
from types import SimpleNamespace

import pytest
import torch

from fineprune_cli.cli import dryrun_view
from fineprune_cli.drivers import dryrun, drytime, probe
from fineprune_cli.drivers.compare import load_compare
from fineprune_cli.drivers.executors import local
from fineprune_cli.drivers.probe import Probe
from fineprune_cli.engine.setup.config import Config

TRAIN, EVAL = 2.0**-10, 2.0**-12  # seconds per image: binary fractions, so every sum is exact
N, TESTS, EPOCHS = 1000, 500, 3  # --subset, --test-subset, --epochs
ONE_RUN = EPOCHS * N * TRAIN + EPOCHS * TESTS * EVAL  # a regular run: every epoch trains N, evaluates TESTS


def _cfg(**train) -> Config:
    cfg = Config()
    cfg.model.name, cfg.data.dataset, cfg.run.device = "lenet", "synthetic", "cpu"
    cfg.data.subset, cfg.data.test_subset, cfg.train.epochs = N, TESTS, EPOCHS
    for key, value in train.items():
        setattr(cfg.train, key, value)
    return cfg


def _timer(seen: list, train_s: list[float] | None = None):
    """A probe that measured `train_s` (default: TRAIN five times) and EVAL, recording its calls."""

    def timer(cfg, channels, size, classes, threads):
        seen.append((cfg.model.name, channels, size, classes, threads))
        return Probe(train_s or [TRAIN] * 5, [EVAL] * 5, threads or 7, 128, load=0.5, cores=2)

    return timer


def test_a_known_cost_per_image_gives_the_exact_time_of_training_and_evaluating():
    seen: list = []
    dry = dryrun.dry_train(_cfg(), _timer(seen))
    assert seen == [("lenet", 3, 32, 10, None)]  # synthetic's shape; None: this process's threads
    assert dry.estimated_seconds == dry.fewest_seconds == ONE_RUN == dry.runs[0].seconds
    assert dry.runs[0].tests == TESTS and dry.cannot_estimate == ""


def _compare(tmp_path, **matrix):
    overrides = {
        "compare.policies": ["regular"],
        "compare.out": str(tmp_path / "cmp"),
        **{f"compare.{k}": v for k, v in matrix.items()},
    }
    return load_compare(None, overrides)


@pytest.mark.parametrize(
    "jobs, threads, at_once_seconds, probe_threads",
    [
        (1, 0, 3 * ONE_RUN, None),  # in this process, one after the other, torch's own thread count
        (2, 0, 2 * ONE_RUN, 2),  # 4 cores / 2 jobs: three runs on two slots take two runs' time, not 1.5
        (3, 1, 1 * ONE_RUN, 1),
    ],
)
def test_jobs_place_the_runs_on_their_slots_at_the_per_job_thread_count(
    tmp_path, monkeypatch, jobs, threads, at_once_seconds, probe_threads
):
    monkeypatch.setattr(local, "available_cores", lambda: [0, 1, 2, 3])
    seen: list = []
    c = _compare(tmp_path, seeds=[0, 1, 2], jobs=jobs, threads=threads)
    dry = dryrun.dry_compare(_cfg(), c, _timer(seen))
    assert [s[-1] for s in seen] == [probe_threads]
    assert dry.estimated_seconds == dry.fewest_seconds == at_once_seconds
    assert dry.pace.at_once == jobs


def test_until_decided_gives_the_first_look_to_all_looks(tmp_path):
    c = _compare(tmp_path, frontier=[0.5], until_decided=True, looks=[2, 3])
    dry = dryrun.dry_compare(_cfg(), c, _timer([]))
    assert [(r.arm, r.seed, r.look) for r in dry.runs] == [
        ("regular", 0, 1),
        ("random-every-50", 0, 1),
        ("regular", 1, 1),
        ("random-every-50", 1, 1),
        ("regular", 2, 2),
        ("random-every-50", 2, 2),
    ]
    random = next(r for r in dry.runs if r.arm == "random-every-50")
    assert random.images < EPOCHS * N  # it prunes: a different cost from regular's
    pair = ONE_RUN + random.images * TRAIN + EPOCHS * TESTS * EVAL
    assert (dry.fewest_seconds, dry.estimated_seconds) == (2 * pair, 3 * pair)
    text = dryrun_view.estimate_text(dry)
    assert "if the first look (2 seeds) decides every policy, up to" in text and "all 2 looks" in text


def test_repeats_further_apart_than_the_limit_give_no_estimate_and_say_why(capsys):
    steady = dryrun.dry_train(_cfg(), _timer([], [TRAIN] * 4 + [probe.SPREAD_LIMIT * TRAIN]))
    assert steady.estimated_seconds is not None  # exactly at the limit: still an estimate
    dry = dryrun.dry_train(_cfg(), _timer([], [TRAIN] * 4 + [2.5 * TRAIN]))
    assert dry.estimated_seconds is None and dry.fewest_seconds is None and dry.runs[0].seconds is None
    assert "2.5x apart" in dry.cannot_estimate and "again" in dry.cannot_estimate
    dryrun_view.show_dry_run(dry, False)
    out = " ".join(capsys.readouterr().out.split())
    assert "no time estimate: lenet-synthetic: the probe's 5 timed repeats" in out
    assert "estimated time" not in out


def test_the_figure_is_the_median_of_the_repeats():
    p = Probe([1.0, 1.5, 1.1, 1.2, 1.9], [2.0, 4.0, 3.0], 1, 128)
    assert (p.train, p.eval) == (1.2, 3.0) and p.spread() == 1.9 and p.unsteady() == ""


def test_makespan_starts_runs_in_order_on_the_first_free_slot():
    assert drytime.makespan([1, 1, 2], 2) == 3  # the executor does not reorder (the best order takes 2)
    assert drytime.makespan([2, 2, 2], 2) == 4
    assert drytime.makespan([2, 2, 2], 1) == 6
    assert drytime.makespan([3, 1, 2], 0) == 3  # 0: every run at once (a Slurm queue's best)
    assert drytime.makespan([], 2) == 0


def test_finished_runs_and_later_looks_count_apart():
    run = lambda look, state="new": SimpleNamespace(look=look, state=state, seconds=10.0)  # noqa: E731
    runs = [run(1, "complete"), run(1), run(2), run(2), run(3, "diverged")]
    assert drytime.wall(runs, 1, 1) == 10 and drytime.wall(runs, 1, 3) == 30
    assert drytime.wall(runs, 2, 3) == 20  # look 2's two runs side by side; a look waits for its runs


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_warm_up_runs_long_enough_and_is_not_timed():
    """Five slow first steps (1/16 s): three steps are not yet WARMUP_S, so a warm-up by count
    alone would time two slow steps in the first repeat."""
    clock, costs = FakeClock(), iter([2.0**-4] * 5 + [2.0**-6] * 10_000)

    def step():
        clock.now += next(costs)

    def evaluate():
        clock.now += 2.0**-5

    steps, evals = probe.measure(step, evaluate, clock)
    assert steps == [2.0**-6] * probe.REPEATS and evals == [2.0**-5] * probe.REPEATS


def test_a_slow_model_warms_up_two_steps_and_stops_after_the_fewest_repeats_once_over_budget():
    clock, calls = FakeClock(), []

    def step():
        calls.append("step")
        clock.now += probe.BUDGET_S / 2

    steps, evals = probe.measure(step, lambda: calls.append("eval"), clock)
    # two warm-up steps (past WARMUP_MAX_S), three repeats of one step (past the budget after
    # two, but three are the fewest), one evaluation (the budget is spent after the first)
    assert calls == ["step", "step", "step", "eval", "step", "step"]
    assert len(steps) == probe.MIN_REPEATS and len(evals) == 1


def test_the_real_probe_runs_at_the_threads_asked_and_gives_them_back(monkeypatch):
    monkeypatch.setattr(probe, "REPEAT_S", 0.0)
    monkeypatch.setattr(probe, "WARMUP_S", 0.0)
    calls: list[int] = []
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (calls.append(n), real(n)))
    before = torch.get_num_threads()
    p = probe.probe(_cfg(batch_size=16, eval_batch_size=32), 3, 32, 10, 1)
    assert calls == [1, before] and torch.get_num_threads() == before
    assert (p.threads, p.batch, len(p.train_s), len(p.eval_s)) == (1, 16, probe.REPEATS, probe.REPEATS)
    assert min(p.train_s) > 0 and min(p.eval_s) > 0


@pytest.mark.parametrize(
    "load, process_threads, contended",
    [
        (2.0, 2, True),  # load = cores, 2 threads: no pace to estimate; 1 thread timed and given instead
        (1.9, 2, False),  # less work than cores: the 2-thread figure
        (5.0, 1, False),  # a 1-thread run has no threads to wait for
    ],
)
def test_several_threads_on_a_busy_cpu_give_the_one_thread_figure_instead(load, process_threads, contended):
    seen: list = []

    def timer(cfg, channels, size, classes, threads):
        seen.append(threads)
        train = TRAIN if (threads or process_threads) == 1 else 4 * TRAIN
        return Probe([train] * 5, [EVAL] * 5, threads or process_threads, 128, load=load, cores=2)

    dry = dryrun.dry_train(_cfg(), timer)
    text = dryrun_view.estimate_text(dry)
    if contended:
        assert seen == [None, 1] and dry.estimated_seconds is None and dry.one_thread_seconds == ONE_RUN
        assert "waits at every step for its descheduled threads" in dry.cannot_estimate
        assert text.startswith("no time estimate: ") and "with 1 thread a run, at this load: ~" in text
    else:
        assert seen == [None] and dry.one_thread_seconds is None and "1 thread a run" not in text
        assert dry.estimated_seconds == (1 if process_threads == 1 else 4) * EPOCHS * N * TRAIN + EPOCHS * TESTS * EVAL


def test_slurm_gives_every_run_at_once_to_one_after_the_other(tmp_path):
    seen: list = []
    dry = dryrun.dry_compare(_cfg(), _compare(tmp_path, seeds=[0, 1, 2], executor="slurm"), _timer(seen))
    assert (dry.fewest_seconds, dry.estimated_seconds, seen[0][-1]) == (ONE_RUN, 3 * ONE_RUN, None)
    assert "as many at once as the queue allows" in dryrun_view.estimate_text(dry)


def test_each_runs_start_up_is_counted():
    """A small run's start-up (process, data, model) was about a third of its time and not
    counted (issue 41): the probe's start-up is added to every run."""

    def timer(cfg, channels, size, classes, threads):
        return Probe([TRAIN] * 5, [EVAL] * 5, 1, 128, load=0.5, cores=2, start_s=5.0)

    dry = dryrun.dry_train(_cfg(), timer)
    assert dry.runs[0].seconds == dry.estimated_seconds == ONE_RUN + 5.0
    assert "start-up timed as 5 s" in dry.note


def test_the_real_start_up_imports_afresh_only_for_a_process_of_its_own(monkeypatch):
    spawned: list = []
    monkeypatch.setattr(probe.subprocess, "run", lambda args, **kw: spawned.append(args))
    seconds, missing = probe.start_up(_cfg(), spawned=False)
    assert spawned == [] and seconds > 0 and missing == ""
    probe.start_up(_cfg(), spawned=True)
    assert len(spawned) == 1 and spawned[0][:2] == [sys.executable, "-c"]


def test_a_noisy_probe_gives_a_range_from_its_fastest_to_its_slowest_repeat(capsys):
    dry = dryrun.dry_train(_cfg(), _timer([], [TRAIN] * 4 + [1.5 * TRAIN]))  # 1.5x: noisy, not unsteady
    fastest, slowest = ONE_RUN, EPOCHS * N * 1.5 * TRAIN + EPOCHS * TESTS * EVAL
    assert dry.estimated_seconds == ONE_RUN and dry.estimated_range == (fastest, slowest)
    steady = dryrun.dry_train(_cfg(), _timer([], [TRAIN] * 4 + [1.2 * TRAIN]))
    assert steady.estimated_range is None
    assert "(~" in dryrun_view.estimate_text(dry) and "1.5x apart" in dryrun_view.estimate_text(dry)
    assert "(~" not in dryrun_view.estimate_text(steady)


def test_compares_printed_settings_hold_no_empty_model_name(tmp_path, capsys):
    """--model and --dataset fill compare.models/datasets; model.name: '' beside them read as a
    model without a name (issue 41)."""
    c = _compare(tmp_path, models=["lenet"], datasets=["synthetic"])
    cfg = Config()
    dryrun_view.show_config({**cfg.to_dict(), "compare": {"models": c.models, "datasets": c.datasets}}, False)
    out = capsys.readouterr().out
    assert "name: ''" not in out and "dataset: ''" not in out and "- lenet" in out


def test_at_6_epochs_the_dry_run_counts_fines_random_equal_epochs_and_names_the_arm(tmp_path, capsys):
    # --epochs 6 at the default schedule (window 2, start 1, a = 1, 0): pruning epochs 2, 4, 6,
    # each a window's first. Catches: the count missing from the plan, its table or its JSON, given to
    # the random control, or the arm not named.
    c = _compare(tmp_path, policies=["regular", "fine", "random"])
    dry = dryrun.dry_compare(_cfg(epochs=6), c, _timer([]))
    by = {r.arm: r for r in dry.runs}
    assert by["fine"].pruning_epochs == by["random"].pruning_epochs == [2, 4, 6]
    assert by["fine"].random_equal_epochs == [2, 4, 6]
    assert by["random"].random_equal_epochs == by["regular"].random_equal_epochs == []
    assert [line.split(": ")[0] for line in dry.random_equal] == ["lenet on synthetic, fine"]
    dryrun_view.show_dry_run(dry, False)
    out = capsys.readouterr().out
    assert "2, 4, 6 (3 of them), 30% left out; all random-equal" in out
    assert out.count("fine-pruning is its random control here: each of its 3 pruning epochs (2, 4, 6)") == 1
    dryrun_view.show_dry_run(dry, True)
    shown = json.loads(capsys.readouterr().out)
    assert [r["random_equal_epochs"] for r in shown["runs"]] == [[], [2, 4, 6], []]


def test_a_run_with_some_random_equal_epochs_lists_them_and_is_not_named(capsys):
    # 20 epochs: window 6, a = 3, 1, 0: epochs 12 and 18 open windows 2 and 3; the other 6 choose
    # by the counts. Catches: a partial run named as if fine were random, or its epochs not listed.
    cfg = _cfg(epochs=20)
    cfg.prune.policy = "fine"
    dry = dryrun.dry_train(cfg, _timer([]))
    assert dry.runs[0].random_equal_epochs == [12, 18] and dry.random_equal == []
    dryrun_view.show_dry_run(dry, False)
    out = capsys.readouterr().out
    assert "random-equal: 12, 18 (2 of them)" in out and out.count(dryrun_view.RANDOM_EQUAL) == 1


def test_rs2s_dry_run_and_estimate_never_say_it_chooses_from_losses(capsys):
    """RS2 uses no scores, yet the dry run said its pruning was "chosen from the losses"."""
    from fineprune_cli.drivers.estimate import estimate_for
    from fineprune_cli.errors import ConfigError

    for policy, said in (("rs2", "every epoch, a slice of a random permutation (no losses)"),
                         ("infobatch", "chosen from the losses during the run")):  # fmt: skip
        cfg = _cfg(epochs=6)
        cfg.prune.policy = policy
        dry = dryrun.dry_train(cfg, _timer([]))
        dryrun_view.show_dry_run(dry, False)
        out = capsys.readouterr().out
        assert said in out and (policy != "rs2" or "losses during" not in out)
        with pytest.raises(ConfigError, match=f"{policy}'s pruning is {re.escape(said)}, not a schedule"):
            estimate_for({"prune.policy": policy, "train.epochs": 10}, None, None, None)
