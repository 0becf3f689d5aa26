"""experiments/decisions/simulate.py and calibration.py, the scripts that measure the tables of
docs/decisions.md, run end to end at a few reps: a change to the harness or the rule that breaks
them fails here, not in the next session that measures."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "experiments" / "decisions"


@pytest.mark.slow  # a few hundred simulated procedures
def test_simulate_writes_the_looks_tables_for_both_allocations(tmp_path):
    out = tmp_path / "simulation.md"
    args = ["--reps", "20", "--power-reps", "10", "--robust-reps", "10", "--quick", "--out", str(out)]
    subprocess.run([sys.executable, str(SCRIPTS / "simulate.py"), *args], check=True, capture_output=True, timeout=600)
    text = out.read_text()
    for column in ("equal, looks 3,5,8", "late, looks 3,5,8", "equal, looks 5,8,12", "late, looks 5,8,12"):
        assert text.count(column) == 2  # the error table and the power table
    assert "seeds)" in text and text.rstrip().splitlines()[-1].startswith("Took ")


@pytest.mark.slow
def test_calibration_writes_one_row_per_case(tmp_path):
    out = tmp_path / "calibration.md"
    run = [sys.executable, str(SCRIPTS / "calibration.py"), "--reps", "5", "--out", str(out)]
    subprocess.run(run, check=True, capture_output=True, timeout=600)
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + 6 * 3  # the header, then six cases at each of three (looks, look read) plans
    assert sum("σ 0.3; looks 5,8,12, from 8 seeds" in row for row in rows) == 3
