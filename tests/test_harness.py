"""The script's side of `compare --script` (`fineprune.start`, `ScriptRun`) and the driver's
refusals: a script that trains another run than it was told, records out of order, stops early,
crashes, never starts its run or hangs is failed with one line, never averaged in."""

import json
import os
import shlex
import sys
from pathlib import Path

import fineprune
import pytest
import torch

from conftest import invoke, summary_of
from fineprune_cli.drivers.compare import Job, job_config
from fineprune_cli.drivers.executors.child import Label
from fineprune_cli.drivers.trainers.scriptjob import ScriptFailed, fill, run_script, script_name, workdir
from fineprune_cli.engine.setup import yamlvalues
from fineprune_cli.engine.setup.config import Config
from fineprune_cli.errors import ConfigError
from fineprune_cli.harness import JOB_ENV, RUN_DIR_ENV, ScriptError


def _job(tmp_path, monkeypatch, policy="regular", seed=0, shorter=None):
    """The environment compare gives a script for this arm: its job config, its run folder."""
    cfg = Config()
    cfg.script.command, cfg.train.epochs, cfg.train.milestones = "python train.py", 6, [3, 5]
    job_cfg = job_config(cfg, Job("train", "data", policy, seed, shorter=shorter), str(tmp_path / "cmp"))
    path = tmp_path / "job.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yamlvalues.dump(job_cfg.to_dict()))
    monkeypatch.setenv(JOB_ENV, str(path))
    monkeypatch.setenv(RUN_DIR_ENV, job_cfg.run.out)
    return job_cfg


def _own(tmp_path, epochs=2, **kw):
    return fineprune.start(num_train=10, seed=0, epochs=epochs, out=tmp_path / "run", **kw)


def test_a_pruning_run_whose_script_never_draws_from_its_sampler_fails_at_its_first_epoch(tmp_path):
    """Issue 57: a script that never gives run.sampler() to its loader trains every sample; under
    rs2 it was recorded complete with 0% skipped. Regular needs no sampler; a loop that iterates it,
    or hands it losses, draws."""
    run = _own(tmp_path, policy="rs2")
    with pytest.raises(ScriptError, match=r"epoch 1 was logged under policy rs2, but the script never drew"):
        run.log(train_loss=1.0, test_accuracy=50.0)
    run.close()
    regular = fineprune.start(num_train=10, seed=0, epochs=1, out=tmp_path / "regular")
    regular.log(train_loss=1.0, test_accuracy=50.0)
    assert regular.finish().status == "complete"
    for name, draw in (("iterated", list), ("losses", lambda s: s.loss(torch.arange(3), torch.ones(3)))):
        drawn = fineprune.start(num_train=10, seed=0, epochs=2, policy="rs2", out=tmp_path / name)
        sampler = drawn.sampler()
        for epoch in range(2):
            sampler.set_epoch(epoch)
            draw(sampler)
            drawn.log(train_loss=1.0, test_accuracy=50.0)
        assert drawn.finish().status == "complete"


def test_a_script_calling_start_twice_is_told_so_not_that_another_process_writes(tmp_path):
    """Issue 57: the second start() of one run was told another process was writing its folder."""
    first = _own(tmp_path)
    with pytest.raises(
        ConfigError, match=r"already open for writing in this same process \(fineprune.start\(\) called twice"
    ):
        _own(tmp_path)
    first.close()


def test_a_script_training_another_seed_than_compare_told_it_is_refused(tmp_path, monkeypatch):
    _job(tmp_path, monkeypatch, seed=2)
    with pytest.raises(ScriptError, match=r"as seed 2, but it trains seed 0: pass \{seed\}"):
        fineprune.start(num_train=10, seed=0, epochs=6, milestones=[3, 5])


def test_a_script_ignoring_a_shorter_arms_schedule_is_refused(tmp_path, monkeypatch):
    told = _job(tmp_path, monkeypatch, shorter=0.15)  # 5 epochs, milestones 3,4
    assert (told.train.epochs, told.train.milestones) == (5, [3, 4])
    with pytest.raises(ScriptError, match=r"as epochs 5, but it trains epochs 6") as more:
        fineprune.start(num_train=10, seed=0, epochs=6, milestones=[3, 5])
    # more epochs than told, the most common cause a cool-down added after the schedule (issue 55)
    assert "if it does, the script trains more epochs than {epochs}" in str(more.value)
    assert "fold the cool-down into {epochs}" in str(more.value) and "or drop it" in str(more.value)
    with pytest.raises(ScriptError, match=r"as milestones 3,4, but it trains milestones 3,5: .* use that value$"):
        fineprune.start(num_train=10, seed=0, epochs=5, milestones=[3, 5])
    run = fineprune.start(num_train=10, seed=0, epochs=5, milestones=[3, 4])
    assert (run.epochs, run.milestones, run.policy.name) == (5, [3, 4], "regular")
    run.close()


def test_a_cosine_script_under_compares_default_milestones_is_told_to_give_none(tmp_path, monkeypatch):
    """compare's default milestones refused every run of a cosine script, advising {milestones}."""
    told = _job(tmp_path, monkeypatch)  # milestones 3,5
    with pytest.raises(
        ScriptError, match=r"as milestones 3,5, but it trains none .*: run compare with --milestones ''"
    ):
        fineprune.start(num_train=10, seed=0, epochs=told.train.epochs, milestones=[])
    with pytest.raises(
        ScriptError, match=r"pass \{milestones\} to it .* or run compare with its own: --milestones 2,4$"
    ):
        fineprune.start(num_train=10, seed=0, epochs=told.train.epochs, milestones=[2, 4])


def test_compare_hands_the_random_control_the_policys_schedule(tmp_path, monkeypatch):
    """Random at the policy's budget: the same epochs pruned, the same number of samples kept."""
    plans = {}
    for policy in ("fine", "random"):
        _job(tmp_path / policy, monkeypatch, policy=policy)
        run = fineprune.start(num_train=100, seed=0, epochs=6)
        sampler = run.sampler()
        plans[policy] = []
        for epoch in range(6):
            sampler.set_epoch(epoch)
            plans[policy].append(len(sampler))
            sampler.loss(torch.arange(100), torch.rand(100))
        run.close()
    assert plans["fine"] == plans["random"] and min(plans["fine"]) < 100


def test_epochs_are_recorded_in_order_and_within_the_run(tmp_path):
    run = _own(tmp_path)
    with pytest.raises(ScriptError, match="epoch 2 recorded where epoch 1 comes next"):
        run.log(train_loss=1.0, test_accuracy=50.0, epoch=2)
    run.log(train_loss=1.0, test_accuracy=50.0)
    with pytest.raises(ScriptError, match="not a percentage"):
        run.log(train_loss=1.0, test_accuracy=0.75 * 100 * 2)  # a percentage scaled twice
    run.log(train_loss=0.9, test_accuracy=60.0)
    with pytest.raises(ScriptError, match="epoch 3 recorded, but this run trains 2 epochs: the script trains more"):
        run.log(train_loss=0.8, test_accuracy=70.0)  # told to fold a cool-down into {epochs}, or drop it
    summary = run.finish()
    assert (summary.status.value, summary.final_accuracy, summary.samples_seen) == ("complete", 60.0, 20)


def test_a_run_finished_early_is_refused_and_stays_incomplete(tmp_path):
    run = _own(tmp_path, epochs=3)
    run.log(train_loss=1.0, test_accuracy=50.0)
    with pytest.raises(ScriptError, match="trained 1 of the 3 epochs"):
        run.finish()
    assert summary_of(tmp_path / "run")["status"] == "incomplete"


def test_an_interrupted_script_resumes_from_what_it_saved(tmp_path):
    run = _own(tmp_path, epochs=3)
    run.log(train_loss=1.0, test_accuracy=50.0)
    run.save({"weights": 7})
    run.log(train_loss=0.9, test_accuracy=55.0)  # trained after the save: lost with the crash
    run.close()  # the process dies here
    again = _own(tmp_path, epochs=3)
    assert again.resume() == {"weights": 7} and again.first_epoch == 1
    again.log(train_loss=0.8, test_accuracy=60.0)
    again.log(train_loss=0.7, test_accuracy=65.0)
    summary = again.finish()
    assert summary.resumed_after_epochs == [1] and summary.epochs_completed == 3
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_a_script_run_records_the_plan_compare_made_it_under(tmp_path, monkeypatch):
    """compare's job config carries the digest of its folder's plan (drivers.matrix.under_plan):
    the script's run records it as compare's own runs do; run on its own, a script records none."""
    job_cfg = _job(tmp_path, monkeypatch)
    job_cfg.run.plan = "ab" * 32
    (tmp_path / "job.yaml").write_text(yamlvalues.dump(job_cfg.to_dict()))
    assert fineprune.start(num_train=10, seed=0, epochs=6).summary.plan == "ab" * 32
    monkeypatch.delenv(JOB_ENV)
    monkeypatch.delenv(RUN_DIR_ENV)
    assert _own(tmp_path / "own").summary.plan == ""


def test_a_models_and_optimizers_state_dicts_resume(tmp_path):
    """What run.save() may hold (docs/howto/own-script.md): state_dicts of a model, an optimizer with
    its momentum, an lr scheduler and the sampler, numbers, strings, lists, tuples and sets."""
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(opt, [2, 3])
    model(torch.ones(3, 4)).sum().backward()
    opt.step()
    run = _own(tmp_path, epochs=3)
    sampler = run.sampler()
    sampler.set_epoch(0)
    run.log(train_loss=1.0, test_accuracy=50.0)
    state = {"model": model.state_dict(), "opt": opt.state_dict(), "lr": scheduler.state_dict(),
             "sampler": sampler.state_dict(), "note": "x", "shape": (3, 4), "seen": {1, 2}, "none": None}  # fmt: skip
    run.save(state)
    run.close()
    back = _own(tmp_path, epochs=3).resume()
    again = torch.nn.Linear(4, 2)
    again.load_state_dict(back["model"])
    restored = torch.optim.SGD(again.parameters(), lr=0.1, momentum=0.9)
    restored.load_state_dict(back["opt"])
    assert torch.equal(again.weight, model.weight)
    assert torch.equal(
        restored.state_dict()["state"][0]["momentum_buffer"], opt.state_dict()["state"][0]["momentum_buffer"]
    )
    assert back["lr"]["milestones"] == {2: 1, 3: 1} and (back["note"], back["shape"], back["seen"]) == (
        "x",
        (3, 4),
        {1, 2},
    )


def test_what_resume_could_not_load_is_refused_when_saved_and_a_planted_checkpoint_never_runs(tmp_path):
    """A run folder is data: run.save() refuses a numpy array or a function at once, naming it, and
    resume() refuses a checkpoint.pt that would build anything but data (a planted pickle's
    os.system), naming the file and what it holds; the payload never runs."""
    import numpy as np

    run = _own(tmp_path)
    run.log(train_loss=1.0, test_accuracy=50.0)
    for state, said in ((np.ones(2), "numpy"), ({"f": print}, "builtins.print")):
        with pytest.raises(ScriptError, match=rf"run.save\(\) was given .*{said}"):
            run.save(state)
    assert not (tmp_path / "run" / "checkpoint.pt").exists()
    run.close()

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'PWNED'}",))

    torch.save({"epoch": 1, "state": Payload(), "totals": {}}, tmp_path / "run" / "checkpoint.pt")
    with pytest.raises(ScriptError, match=r"run.resume\(\): .*checkpoint.pt is refused: it holds posix.system"):
        _own(tmp_path).resume()
    assert not (tmp_path / "PWNED").exists()


def test_a_folder_holding_a_run_is_not_overwritten(tmp_path):
    run = _own(tmp_path)
    run.log(train_loss=1.0, test_accuracy=50.0)
    run.close()  # stopped without a checkpoint to resume from
    with pytest.raises(ConfigError, match="already holds a run"):
        _own(tmp_path)


def test_data_identity_by_content():
    x = torch.arange(12.0).reshape(3, 4)
    same, changed = (
        fineprune.tensor_identity(x.clone()),
        fineprune.tensor_identity(x.index_fill(1, torch.tensor([0]), 1)),
    )
    assert fineprune.tensor_identity(x) == same != changed


def test_a_folder_copied_elsewhere_is_the_same_data(tmp_path):
    for root in ("a", "b"):
        (tmp_path / root / "sub").mkdir(parents=True)
        (tmp_path / root / "sub" / "f.bin").write_bytes(b"\x00\x01")
    assert fineprune.folder_identity(tmp_path / "a") == fineprune.folder_identity(tmp_path / "b")
    (tmp_path / "b" / "sub" / "f.bin").write_bytes(b"\x00\x02")
    assert fineprune.folder_identity(tmp_path / "a") != fineprune.folder_identity(tmp_path / "b")


def test_placeholders_are_filled_and_quoted(tmp_path):
    cfg = Config()
    cfg.script.command = "python my\\ train.py --out {out} --seed {seed} --milestones {milestones}"
    cfg.run.out, cfg.train.milestones = str(tmp_path / "a b"), []
    assert fill(cfg) == ["python", "my train.py", "--out", str(tmp_path / "a b"), "--seed", "0", "--milestones", ""]
    assert script_name(cfg.script.command) == "my train"


def test_relative_paths_of_the_command_are_made_absolute_and_placeholders_are_not(tmp_path):
    (tmp_path / "train.py").write_text("")
    (tmp_path / "data").mkdir()
    (tmp_path / "mytrain").mkdir()
    (tmp_path / "0").write_text("")  # a seed of 0 is not this file
    cfg = Config()
    cfg.script.command = "python train.py --data=data --seed {seed} -m mytrain --out {out} nothing/here data.root=data"
    cfg.run.out = "cmp/s-data/regular-seed0"
    assert fill(cfg, tmp_path) == [
        "python", str(tmp_path / "train.py"), f"--data={tmp_path / 'data'}", "--seed", "0", "-m", "mytrain",
        "--out", str(Path("cmp/s-data/regular-seed0").absolute()), "nothing/here", f"data.root={tmp_path / 'data'}",
    ]  # fmt: skip


@pytest.mark.slow  # two script runs, each importing torch
def test_each_script_run_works_in_a_directory_of_its_own(tmp_path, monkeypatch):
    """Two runs of kuangliu's main.py under --jobs 2 wrote ./checkpoint/ckpt.pth at once."""
    monkeypatch.chdir(tmp_path)
    Path("s.py").write_text(
        "import os, sys\nimport fineprune\nseed = int(sys.argv[1])\n"
        "run = fineprune.start(num_train=4, seed=seed, epochs=1)\nos.makedirs('checkpoint', exist_ok=True)\n"
        "with open('checkpoint/x', 'x') as f:\n    f.write(str(seed))\n"  # 'x': another run's file fails it
        "run.log(train_loss=1.0, test_accuracy=50.0)\nrun.finish()\n"
    )
    for seed in (0, 1):
        cfg = Config()
        cfg.script.command = f"{shlex.quote(sys.executable)} s.py {{seed}}"
        cfg.run.seed, cfg.train.epochs, cfg.train.milestones = seed, 1, []
        cfg.run.out = f"cmp/s-data/regular-seed{seed}"
        run_script(cfg, Label(f"seed {seed}"))
        assert (workdir(Path(cfg.run.out)) / "checkpoint" / "x").read_text() == str(seed)
    assert not Path("checkpoint").exists()


def _script_cfg(tmp_path, body, timeout=0):
    script = tmp_path / "s.py"
    script.write_text(body)
    cfg = Config()
    cfg.script.command, cfg.script.timeout = f"{sys.executable} {script}", timeout
    cfg.train.epochs, cfg.train.milestones = 2, []
    cfg.run.out = str(tmp_path / "cmp" / "s-data" / "regular-seed0")
    return cfg


@pytest.mark.parametrize(
    "body, timeout, said",
    [
        ("print('loading'); raise SystemExit('boom: no data')", 0, r"failed: boom: no data \(exit code 1; log: "),
        ("print('trained, but never told fineprune')", 0, r"never called fineprune\.start\(\)"),
        ("import time; time.sleep(60)", 1, r"ran past --script-timeout 1 s and was stopped"),
    ],
)
def test_a_failed_script_run_is_one_line_naming_its_log(tmp_path, body, timeout, said):
    with pytest.raises(ScriptFailed, match=said) as caught:
        run_script(_script_cfg(tmp_path, body, timeout), Label("s on data, regular, seed 0"))
    assert str(caught.value).startswith("s on data, regular, seed 0: the script") and ".script.log" in str(caught.value)


def test_a_script_that_never_records_its_end_fails(tmp_path):
    body = "import fineprune\nrun = fineprune.start(num_train=4, seed=0, epochs=2)\nrun.log(train_loss=1.0, test_accuracy=50.0)\n"
    with pytest.raises(ScriptFailed, match=r"after recording 1 of 2 epochs without finishing its run"):
        run_script(_script_cfg(tmp_path, body), Label("s"))


@pytest.mark.slow  # two task processes under --jobs, each importing torch
def test_a_hanging_script_under_jobs_is_stopped_and_the_others_go_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "hang.py"
    script.write_text(
        "import sys, time\nimport fineprune\nseed = int(sys.argv[1])\n"
        "run = fineprune.start(num_train=4, seed=seed, epochs=1)\n"
        "time.sleep(600 if seed else 0)\nrun.log(train_loss=1.0, test_accuracy=50.0)\nrun.finish()\n"
    )
    command = f"{sys.executable} {script} {{seed}}"
    done = invoke(["compare", "--script", command, "--epochs", "1", "--policies", "regular", "--seeds", "0,1",
                   "--jobs", "2", "--script-timeout", "6", "--out", "cmp"])  # fmt: skip
    assert done.exit_code == 1, done.output
    assert "ran past --script-timeout 6 s" in done.output and "1 of 2 runs failed" in done.output
    assert summary_of(tmp_path / "cmp" / "hang-data" / "regular-seed0")["status"] == "complete"


@pytest.mark.parametrize("jobs, waiter", [("1", "trainers.scriptjob"), ("2", "executors.local")])
def test_a_script_runs_end_is_seen_when_it_ends_not_at_the_next_look(tmp_path, monkeypatch, jobs, waiter):
    """compare looked at a script (under --jobs, at its task) every POLL_S, sleeping in between: a
    run of 0.2 s took half a second. With the look a minute apart it must still end in seconds."""
    import importlib
    import time

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(importlib.import_module(f"fineprune_cli.drivers.{waiter}"), "POLL_S", 60)
    (tmp_path / "s.py").write_text(
        "import sys\nimport fineprune\nrun = fineprune.start(num_train=4, seed=int(sys.argv[1]), epochs=1)\n"
        "run.log(train_loss=1.0, test_accuracy=50.0)\nrun.finish()\n"
    )
    started = time.monotonic()
    done = invoke(["compare", "--script", f"{sys.executable} s.py {{seed}}", "--epochs", "1", "--policies", "regular",
                   "--seeds", "0", "--jobs", jobs, "--out", "cmp"])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert time.monotonic() - started < 30


def test_a_dry_run_of_a_script_comparison_lists_its_runs_and_says_why_it_has_no_time(tmp_path, monkeypatch):
    """It tracebacked: the dry run probed fineprune's trainer on the script's dataset name. A
    script that cannot run has no epoch to time: the plan is listed, with the script's words."""
    monkeypatch.chdir(tmp_path)
    argv = ["compare", "--script", "python train.py --seed {seed}", "--epochs", "12", "--milestones", "6,9",
            "--policies", "regular,fine,random", "--shorter", "0.1", "--seeds", "0,1", "--out", "cmp", "--dry-run"]  # fmt: skip
    done = invoke(argv)
    assert done.exit_code == 0, done.output
    assert "8 runs planned" in done.output and "shorter-10" in done.output
    said = " ".join(done.output.split())
    assert "no time estimate: one epoch of the script could not be timed: " in said
    assert "train.py" in said.split("could not be timed: ", 1)[1]  # python's own words name the file
    said = " ".join(done.output.split())  # the shorter arms' schedule, checked from the lr the script logs
    assert (
        "regular's learning-rate schedule compressed to its epochs (T_max and milestones from {epochs}; a warm-up "
        "or cool-down held fixed or rounded to whole epochs)" in said
    )
    assert list(tmp_path.iterdir()) == []  # nothing written
    without = invoke([a for a in argv if a not in ("--shorter", "0.1")])
    assert without.exit_code == 0 and "compressed to its epochs" not in " ".join(without.output.split())


@pytest.mark.slow  # one script process importing torch
def test_a_dry_run_of_a_script_comparison_times_one_epoch_of_it_for_the_whole_plan(tmp_path, monkeypatch):
    """Its time range comes from one epoch of the script, run in a folder of its own and stopped:
    every look's runs, from pruning saving its share of the training to saving none."""
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "timed.py"
    script.write_text(
        "import sys, time\nimport fineprune\n"
        "run = fineprune.start(num_train=100, seed=int(sys.argv[1]), epochs=int(sys.argv[2]))\n"
        "for e in range(run.epochs):\n"
        "    time.sleep(0.5)\n    run.log(train_loss=1.0, test_accuracy=50.0, train_seconds=0.3)\n"
        "run.finish()\n"
    )
    argv = ["compare", "--script", f"{sys.executable} {script} {{seed}} {{epochs}}", "--epochs", "40",
            "--policies", "regular,fine", "--until-decided", "--looks", "2,4", "--out", "cmp", "--dry-run", "--json"]  # fmt: skip
    done = invoke(argv)
    assert done.exit_code == 0, done.output
    dry = json.loads(done.stdout)  # the timing line goes to stderr
    assert dry["cannot_estimate"] == "" and "one epoch of your script timed" in dry["note"]
    fewest, most = dry["fewest_seconds"], dry["estimated_seconds"]
    # each run: its start-up and 40 epochs of about 0.3 s training, 0.2 s the rest (a pruned one less)
    assert 2 * 40 * 0.4 < fewest < most and 8 * 40 * 0.5 <= dry["estimated_range"][1] < 8 * (40 * 0.5 + 30)
    assert dry["estimated_range"][0] == most < dry["estimated_range"][1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["timed.py"]  # the timed epoch's folder is gone
    text = invoke(argv[:-1]).output
    assert "if the first look (2 seeds) decides every policy, up to" in " ".join(text.split())


def test_a_script_runs_config_holds_what_a_script_uses_and_older_full_ones_still_match(tmp_path, monkeypatch):
    """config.yaml and --print-config listed ~100 lines of fineprune's trainer defaults (batch
    size, lr, workers, devices...) that never reach a script."""
    from fineprune_cli.drivers.reuse import existing_state
    from fineprune_cli.engine.records.record import CONFIG

    job = _job(tmp_path, monkeypatch)
    run = fineprune.start(num_train=10, seed=0, epochs=6, milestones=[3, 5])
    run.log(train_loss=1.0, test_accuracy=50.0)
    run.close()
    text = (run.out / CONFIG).read_text()
    assert "batch_size" not in text and "workers" not in text and "dist_mode" not in text
    assert "epochs: 6" in text and "command: python train.py" in text
    assert yamlvalues.load(text)["train"] == {"epochs": 6, "milestones": [3, 5]}
    assert existing_state(job) == "incomplete"  # the trimmed record is this job's
    (run.out / CONFIG).write_text(yamlvalues.dump(job.to_dict()))  # as runs recorded it before
    assert existing_state(job) == "incomplete"
    monkeypatch.chdir(tmp_path)
    shown = invoke(["compare", "--script", "python train.py --seed {seed}", "--epochs", "6", "--print-config"])
    assert shown.exit_code == 0 and "batch_size" not in shown.output and "epochs: 6" in shown.output


def test_script_runs_of_another_recipe_or_other_data_never_pair(tmp_path):
    """What the harness cannot know, the script declares; a report keeps apart what differs."""
    from fineprune_cli.analysis.group.groups import group
    from fineprune_cli.analysis.read.runs import load_runs
    from fineprune_cli.pruning.config import PruneConfig

    same, other = fineprune.tensor_identity(torch.zeros(3)), fineprune.tensor_identity(torch.ones(3))

    def make(name, policy, recipe, data, seed):
        run = fineprune.start(num_train=10, seed=seed, epochs=2, policy=policy, prune=PruneConfig(window=2, start=1),
                              out=tmp_path / name, recipe=recipe, data=data, model="m", dataset="d")  # fmt: skip
        sampler = run.sampler()
        for epoch in range(2):
            sampler.set_epoch(epoch)
            sampler.loss(torch.arange(10), torch.rand(10))
            run.log(train_loss=1.0 / (epoch + 1) + seed / 100, test_accuracy=50.0 + epoch + seed)
        run.finish()

    for seed in (0, 1):
        make(f"regular{seed}", "regular", {"lr": 0.1}, same, seed)
        make(f"fine{seed}", "fine", {"lr": 0.1}, same, seed)
        make(f"fine-lr{seed}", "fine", {"lr": 0.2}, same, seed)
        make(f"fine-data{seed}", "fine", {"lr": 0.1}, other, seed)
    runs, problems = load_runs([tmp_path])
    assert len(runs) == 8 and not problems
    rows = sorted(sorted(by) for by in group(runs).values())
    assert rows == [["fine"], ["fine (lr 0.1)", "fine (lr 0.2)", "regular"]]  # other data: a context of its own


@pytest.mark.slow  # a Python process importing the drivers (torch), stopped by a signal
def test_sigterm_to_the_process_running_a_script_stops_the_script_too(tmp_path):
    """The script runs in a session of its own; Python's default SIGTERM ended its parent (a --jobs
    task, or compare) at once and left the script training with nobody to wait for it."""
    import os
    import signal
    import subprocess
    import time

    script = tmp_path / "s.py"
    script.write_text(
        f"import os, time\nopen({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
    )
    driver = (
        "import sys\nfrom fineprune_cli.drivers.trainers.scriptjob import run_script\n"
        "from fineprune_cli.drivers.executors.child import Label\nfrom fineprune_cli.engine.setup.config import Config\n"
        f"cfg = Config()\ncfg.script.command = {f'{sys.executable} {script}'!r}\n"
        f"cfg.run.out = {str(tmp_path / 'cmp' / 's-data' / 'regular-seed0')!r}\n"
        "try:\n    run_script(cfg, Label('s'))\nexcept KeyboardInterrupt:\n    sys.exit(130)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", driver])
    deadline = time.monotonic() + 60
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    child = int((tmp_path / "pid").read_text())
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=30) == 130
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # the script went with it


def test_the_library_under_its_own_name_loads_torch_only_when_asked_and_has_its_adapters():
    """`import fineprune` is the library the docs import from (how-to pages included): its names
    are fineprune_cli's own objects, torch loads on the first one asked for, and the Lightning
    adapter is there as fineprune.integrations.lightning (it was reachable only as fineprune_cli's)."""
    import subprocess
    import sys

    import fineprune_cli

    code = (
        "import sys, fineprune; a = 'torch' in sys.modules; fineprune.PruningSampler; print(a, 'torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split() == [
        "False",
        "True",
    ]
    assert fineprune.PruningSampler is fineprune_cli.PruningSampler and fineprune.start is fineprune_cli.start
    pytest.importorskip("lightning", reason="the lightning extra is not installed")
    from fineprune.integrations.lightning import PruningCallback

    from fineprune_cli.integrations.lightning import PruningCallback as same

    assert PruningCallback is same


def test_a_script_that_only_records_its_run_never_imports_torch(tmp_path):
    """start(), resume(), log() and finish() load no torch (1.5 s of CPU each run of a script that
    trains without it, e.g. a test's stand-in), and its summary still names torch's version and
    threads; a sampler, which works in tensors, loads it. A new interpreter: this one has torch."""
    import subprocess

    code = (
        "import sys, fineprune\n"
        f"run = fineprune.start(num_train=4, seed=0, epochs=1, out={str(tmp_path / 'run')!r})\n"
        "run.resume(); run.log(train_loss=1.0, test_accuracy=50.0); run.finish()\n"
        "print('torch' in sys.modules)\n"
        "run.sampler(); print('torch' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINEPRUNE_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.stdout.split() == ["False", "True"], done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["torch"] == torch.__version__
    assert summary["machine"]["torch"] == torch.__version__ and summary["machine"]["threads"] >= 1


def test_an_ies_script_run_gets_its_forward_only_pass_through_the_sampler(tmp_path):
    """compare --script ran IES with no forward-only pass: its left-out samples stayed out for good."""
    x = torch.arange(40)

    def loss_of(idx, epoch):  # 0-19 flat (out from epoch 7), 20-39 swinging
        return torch.where(idx < 20, 1.0, 0.1 * idx + epoch % 2).float()

    for refresh in (True, False):
        run = fineprune.start(num_train=40, seed=0, epochs=9, policy="ies", out=tmp_path / f"ies-{refresh}")
        sampler = run.sampler()
        loader = torch.utils.data.DataLoader(fineprune.IndexedDataset(x), batch_size=8, sampler=sampler)
        try:
            for epoch in range(run.epochs):
                sampler.set_epoch(epoch)
                for idx, _ in loader:
                    sampler.loss(idx, loss_of(idx, epoch))
                if refresh:
                    sampler.refresh(lambda idx, epoch=epoch: loss_of(idx, epoch))
                run.log(train_loss=1.0, test_accuracy=50.0)
        except RuntimeError as exc:
            assert not refresh and "call sampler.refresh(losses)" in str(exc)
            run.close()
            continue
        assert refresh and run.finish().samples_skipped > 0
