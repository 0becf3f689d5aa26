"""Every committed decision judged again: the rule at 2aeb5f6 (Student's t, failures averaged in)
against today's (the skew-robust t, the failure rule), over the committed runs of each report,
with the word each committed index.md printed beside them (issue 56).

    python experiments/decisions/rejudge.py      # results/decisions/rejudged.md
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulate import write_page  # noqa: E402

from fineprune_cli.analysis.decide.decision import CANT_TELL  # noqa: E402
from fineprune_cli.analysis.read.runs import load_runs, policy_label  # noqa: E402
from fineprune_cli.analysis.render.tables import context_title  # noqa: E402
from fineprune_cli.analysis.study import for_folders  # noqa: E402
from fineprune_cli.engine.records.files import to_markdown  # noqa: E402

REPORTS = {  # report folder: the run folders its command reads
    "results/demo": ["results/demo/runs"],
    "results/policies/fashion-mnist": ["results/policies/fashion-mnist/runs"],
    "results/cifar10-jpeg-lenet-cpu": [
        "results/cifar10-jpeg-lenet-cpu/runs",
        "results/cifar10-jpeg-lenet-cpu/runs-no-rescale",
    ],
    "results/cifar10-jpeg-resnet18-e20-h200": [
        "results/cifar10-jpeg-resnet18-e20-h200/call1",
        "results/cifar10-jpeg-resnet18-e20-h200/call2",
    ],
    "results/policies-2026": ["results/policies-2026/runs"],
}


BASE = "2aeb5f6"  # the last commit before issue 56: what the committed reports printed


def committed(report: str) -> dict[str, str]:
    """row name -> the word the report's index.md printed at BASE."""
    text = subprocess.run(
        ["git", "show", f"{BASE}:{report}/index.md"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    section = text.split("## Decisions", 1)[1].split("\n## ", 1)[0]
    words = {}
    for row in re.findall(r"^\| (.+?) \|.*\| ([^|]+) \|$", section, re.M):
        name, word = row
        if name not in ("policy", "---"):
            words[name.strip()] = word.strip()
    return words


def _word(d) -> str:
    at = f", look {d.look}" if d.look and d.word != CANT_TELL else ""
    return f"{d.word}{at} (p {d.p_adjusted:.3g})" if d.route else d.word


def rows_for(report: str) -> list[list[str]]:
    folders = [ROOT / f for f in REPORTS[report]]
    runs, _ = load_runs(folders)
    now = for_folders(runs, folders)
    before = for_folders(runs, folders, replace(now.judging, shape="normal", failure=0.0))
    printed = committed(report)
    was = {(d.context, d.policy): d for d in before.decisions}
    out = []
    for d in now.decisions:
        many = len({x.context for x in now.decisions}) > 1
        name = policy_label(d.policy) + (f" ({context_title(d.context)})" if many else "")
        shown = printed.get(name, "—")
        out.append([report, name, shown, _word(was[d.context, d.policy]), _word(d)])
    return out


def main() -> None:
    start = time.time()
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=ROOT)
    header = ["report", "policy", f"index.md at {BASE}", "rule at 2aeb5f6, replayed", "today's rule"]
    body = [row for report in REPORTS for row in rows_for(report)]
    parts = [
        "# Every committed decision, judged again (issue 56)",
        "",
        f"Made by `python experiments/decisions/rejudge.py` at commit {commit.stdout.strip()}: each committed "
        "report's runs judged by the rule at 2aeb5f6 (Student's t, every run averaged in: `--shape normal "
        "--failure 0`) and by today's defaults (the skew-robust t, the failure rule), each with the plan the "
        "report's folders hold; p is the adjusted p-value of the claim named (or the nearest). The third "
        "column is what each committed index.md printed at 2aeb5f6; where it differs from the replay of the "
        "rule at 2aeb5f6, runs were added since.",
        "",
        *to_markdown(header, body).splitlines(),
        "",
    ]
    write_page(ROOT / "results" / "decisions" / "rejudged.md", parts, start)


if __name__ == "__main__":
    main()
