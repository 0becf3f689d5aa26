"""The committed reports are what today's code makes of the committed runs: each is regenerated
(tables, summary, runs and the decisions of index.md; plots left out) and compared byte for byte.
A change to what `report` computes or prints fails here until the reports are regenerated."""

import re
from pathlib import Path

import pytest

from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.engine.records.files import read_regular_text

ROOT = Path(__file__).resolve().parents[1]
REPORTS = {  # out folder: (run folders, notes), as each report's commands make it
    "results/demo": (["results/demo/runs"], None),
    "results/policies/fashion-mnist": (
        ["results/policies/fashion-mnist/runs"],
        "results/policies/fashion-mnist/notes.md",
    ),
    "results/cifar10-jpeg-lenet-cpu": (
        ["results/cifar10-jpeg-lenet-cpu/runs", "results/cifar10-jpeg-lenet-cpu/runs-no-rescale"],
        "results/cifar10-jpeg-lenet-cpu/notes.md",
    ),
    "results/cifar10-jpeg-resnet18-e20-h200": (
        ["results/cifar10-jpeg-resnet18-e20-h200/call1", "results/cifar10-jpeg-resnet18-e20-h200/call2"],
        "results/cifar10-jpeg-resnet18-e20-h200/notes.md",
    ),
    "results/policies-2026": (["results/policies-2026/runs"], "results/policies-2026/notes.md"),
}
FILES = (
    "table1_time.csv",
    "table1_time.md",
    "table2_accuracy.csv",
    "table2_accuracy.md",
    "table3_time_to_accuracy.csv",
    "table3_time_to_accuracy.md",
    "summary.csv",
    "runs.csv",
)


def decisions(index: str) -> str:
    return re.search(r"## Decisions\n(.*?)\n## ", index, re.S).group(1)


@pytest.mark.slow
@pytest.mark.parametrize("out", sorted(REPORTS))
def test_the_committed_report_is_current(out, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # runs.csv names the run folders as the report's command did
    runs, notes = REPORTS[out]
    text = read_regular_text(Path(notes), 1 << 20) if notes else ""
    write_report([Path(r) for r in runs], tmp_path, with_plots=False, notes=text)  # judged as the command did
    for name in FILES:
        assert (tmp_path / name).read_text() == (ROOT / out / name).read_text(), f"{out}/{name} is stale"
    assert decisions((tmp_path / "index.md").read_text()) == decisions((ROOT / out / "index.md").read_text())


@pytest.mark.slow
def test_a_report_groups_its_runs_once_and_decides_once_a_look(tmp_path, monkeypatch):
    """One report over the committed Fashion-MNIST runs: the runs are grouped once, decided once
    for each planned look replayed, each row's numbers and comparisons made once, each context's
    time-to-accuracy target once and each run's first epoch at it once, however many renderers
    read them (every module of the package that holds `group`, `decide`, `row_numbers`,
    `vs_regular`, `target_for` or `time_to_accuracy` is counted, the one that defines it and
    those that import it, so a renderer that recomputes shows)."""
    import sys

    from fineprune_cli.analysis.decide import decision
    from fineprune_cli.analysis.group import groups, paired, reach, rownumbers, timing

    real = {
        "group": groups.group,
        "decide": decision.decide,
        "row_numbers": rownumbers.row_numbers,
        "vs_regular": paired.vs_regular,
        "target_for": reach.target_for,
        "time_to_accuracy": timing.time_to_accuracy,
    }
    calls = dict.fromkeys(real, 0)
    for name, function in real.items():

        def counted(*args, _name=name, _real=function, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        for module in [m for n, m in sys.modules.items() if n.startswith("fineprune_cli")]:
            if getattr(module, name, None) is function:
                monkeypatch.setattr(module, name, counted)
    monkeypatch.chdir(ROOT)
    made = write_report([Path("results/policies/fashion-mnist/runs")], tmp_path, with_plots=True)
    assert calls["group"] == 1
    assert calls["decide"] == len(made.study.replayed) == 2  # looks 1 and 2 (5 and 8 seeds)
    rows = [(context, row) for context, by in made.study.groups.items() for row in by]
    assert calls["row_numbers"] == len(rows) == len(made.study.numbers) == 17  # one context, regular in it
    # final and best-3 once a row, and each policy's decision once a look (on that look's seeds)
    decided = len(made.study.decisions) * len(made.study.replayed)
    assert calls["vs_regular"] == 2 * len(rows) + decided == 2 * 17 + 5 * 2
    # Table 3, summary.csv and runs.csv all read them: one target a context, one reach a run
    assert calls["target_for"] == len(made.study.targets) == 1
    assert None not in made.study.targets.values()  # with a target every run is looked at
    assert calls["time_to_accuracy"] == len(made.runs) == 97
