"""Process CPU time beside the wall clock (issue 55): every CPU run records its CPU seconds per
epoch, and where the runs waited for their cores (other work on the machine) the report leads
with the saving in CPU time for every policy and says it is the figure to trust. Loaded runs are
made here both by their recorded fields and by a real compare beside a busy loop on its core."""

import csv
import math
import os
import subprocess
import sys
import time

import pytest
import torch

from conftest import invoke, summary_of, tiny
from factories import make_run
from fineprune_cli.analysis.group import timing
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.cli import views

CORE = min(os.sched_getaffinity(0))  # compare --jobs 1 --threads 1 pins its run to the first core

# (wall s, CPU s) of each run's training, 1 thread: regular and three policies
LOADED = {"regular": (20.0, 10.0), "fine": (22.0, 7.5), "rs2": (25.0, 6.25), "random": (14.0, 7.5)}
IDLE = {"regular": (10.0, 9.8), "fine": (7.6, 7.4), "rs2": (6.1, 6.0), "random": (7.5, 7.3)}
ONE_THREAD = {"processor": "Test CPU", "threads": 1, "torch": "2.14.1", "device": "cpu"}


def _runs(root, times):
    for seed in range(3):
        for policy, (wall, cpu) in times.items():
            pruned = () if policy == "regular" else (2,)
            make_run(root, "lenet", policy, seed, wall, [60.0, 70.0 + seed], skipped_epochs=pruned,
                     machine=ONE_THREAD, summary={"cpu_seconds": cpu})  # fmt: skip
    return root


def test_a_runs_share_of_its_threads_clock_in_cpu_time(tmp_path):
    runs = {r.policy: r for r in load_runs([_runs(tmp_path / "runs", LOADED)])[0] if r.seed == 0}
    assert timing.cpu_share(runs["fine"]) == pytest.approx(7.5 / 22)
    load = timing.load_of(list(runs.values()))
    assert (load.waited, load.known) == (4, 4) and (load.low, load.high) == pytest.approx((0.25, 7.5 / 14))
    assert timing.load_of([runs["regular"]]).text().startswith("1 of 1 runs got 50–50% of their threads'")


def test_on_a_loaded_machine_the_report_leads_with_the_cpu_saving_of_every_policy(tmp_path, capsys):
    """Under load fine's clock says it cost 10% more than regular and RS2 25% more, while their CPU
    time fell by 25% and 37.5%: the report must lead with those, for every pruned row, and say which
    figure to trust. Catches a saving read off the clock, or given only for some policies."""
    report = write_report([_runs(tmp_path / "runs", LOADED)], tmp_path / "report", with_plots=False)
    index = (tmp_path / "report" / "index.md").read_text()
    assert index.index("## Time saved on a loaded machine") < index.index("## Decisions")
    lead = index.split("## Time saved on a loaded machine", 1)[1].split("\n## ", 1)[0]
    assert "12 of 12 runs got 25–54% of their threads' clock time in CPU time" in lead
    assert "the saving in CPU time, which other work does not stretch, is the figure to trust" in lead
    assert "- fine-pruning: 25.0 ± 0.0% saved in CPU time (3 pairs); on the clock -10.0 ± 0.0%" in lead
    assert "- RS2: 37.5 ± 0.0% saved in CPU time (3 pairs); on the clock -25.0 ± 0.0%" in lead
    assert "- random control: 25.0 ± 0.0% saved in CPU time (3 pairs); on the clock 30.0 ± 0.0%" in lead
    table = index.split("## Table 1", 1)[1]
    cpu, clock = (
        table.index("fine-pruning: saved in CPU time (same machine) | 25.00"),
        table.index("fine-pruning: saved (same machine) | -10.00"),
    )
    assert cpu < clock  # the figure to trust first
    views.show_report(report, as_json=False)
    out = capsys.readouterr().out
    assert out.index("the figure to trust") < out.index("Decisions") and "cpu saved %" in out
    summary = {r["policy"]: r for r in csv.DictReader(open(tmp_path / "report" / "summary.csv"))}
    assert float(summary["fine"]["cpu_saved_pct_mean"]) == 25.0 and float(summary["fine"]["cpu_share_low"]) < 0.8


def test_on_an_idle_machine_the_clock_stays_the_saving_and_cpu_time_follows_it(tmp_path, capsys):
    report = write_report([_runs(tmp_path / "runs", IDLE)], tmp_path / "report", with_plots=False)
    index = (tmp_path / "report" / "index.md").read_text()
    assert "loaded machine" not in index and "figure to trust" not in index
    table = index.split("## Table 1", 1)[1]
    assert table.index("fine-pruning: saved (same machine) | 24.00") < table.index(
        "fine-pruning: saved in CPU time (same machine) | 24.49"
    )
    views.show_report(report, as_json=False)
    assert "cpu saved %" not in capsys.readouterr().out


def test_runs_without_cpu_time_say_nothing_of_load(tmp_path):
    """Runs made before CPU time was recorded (or on a GPU) are never called loaded."""
    root = tmp_path / "runs"
    for seed in range(2):
        make_run(root, "lenet", "regular", seed, 10.0, [60.0, 70.0])
        make_run(root, "lenet", "fine", seed, 5.0, [60.0, 70.0], skipped_epochs=(2,))
    write_report([root], tmp_path / "report", with_plots=False)
    index = (tmp_path / "report" / "index.md").read_text()
    assert "loaded machine" not in index and "saved in CPU time (same machine)" not in index


def _busy_loop_on(core):
    """Another process spinning on `core`: the run pinned there gets about half of it."""
    return subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"])


@pytest.mark.slow
def test_a_real_compare_beside_a_busy_loop_on_its_core_records_cpu_time_and_leads_with_it(tmp_path):
    """`compare --jobs 1 --threads 1` pins its runs to the first core; a busy loop pinned there
    takes half of it. The runs record CPU seconds per epoch that add up to their summary's, their
    CPU time is about half their clock time, and the report leads with the CPU saving."""
    out, hog = tmp_path / "cmp", _busy_loop_on(CORE)
    try:
        time.sleep(0.5)
        args = ["compare", *tiny(subset=400, epochs=4), "--window", "2", "--start", "1", "--policies", "regular,fine"]
        done = invoke([*args, "--seeds", "0", "--jobs", "1", "--threads", "1", "--out", str(out)])
    finally:
        hog.kill()
        hog.wait()
    assert done.exit_code == 0, done.output
    for arm in ("regular", "fine"):
        run = out / "lenet-synthetic" / f"{arm}-seed0"
        rows = list(csv.DictReader(open(run / "metrics.csv")))
        cpu = [float(r["cpu_seconds"]) for r in rows]
        assert all(math.isfinite(c) and c > 0 for c in cpu), cpu
        assert summary_of(run)["cpu_seconds"] == pytest.approx(sum(cpu), abs=0.01)
    report = invoke(["report", str(out), "--out", str(tmp_path / "rep")])
    assert report.exit_code == 0, report.output
    index = (tmp_path / "rep" / "index.md").read_text()
    assert "## Time saved on a loaded machine" in index, index[:2000]
    assert "- fine-pruning: " in index.split("## Time saved on a loaded machine", 1)[1].split("\n## ", 1)[0]
    said = " ".join(report.output.split())
    assert said.index("the figure to trust") < said.index("Decisions")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: no GPU on this machine")
def test_a_gpu_run_keeps_the_devices_time_and_records_no_cpu_time(tmp_path):
    done = invoke(["train", *tiny(device="cuda"), "--out", str(tmp_path / "run")])
    assert done.exit_code == 0, done.output
    assert all(r["cpu_seconds"] == "nan" for r in csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    assert summary_of(tmp_path / "run")["cpu_seconds"] is None and summary_of(tmp_path / "run")["train_seconds"] > 0
