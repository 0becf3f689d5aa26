"""engine/records/files.py: atomic writes, and reads of regular files only, with a size limit."""

import os
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "reliability"))
from crafted import make_fifo  # noqa: E402

from conftest import invoke, tiny  # noqa: E402
from fineprune_cli.engine.records.files import read_regular  # noqa: E402


@pytest.fixture
def no_hang():
    """A read that blocks (a FIFO with no writer) fails the test after 20 s instead of hanging
    it; the alarm starts once the test has made its run folder."""

    class Blocked(BaseException):  # not an OSError: code that handles read errors must not swallow it
        pass

    def stop(signum, frame):
        raise Blocked("a read blocked for 20 s")

    previous = signal.signal(signal.SIGALRM, stop)
    yield lambda: signal.alarm(20)
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_read_regular_refuses_fifos_devices_and_oversized_files(tmp_path, no_hang):
    no_hang()
    (tmp_path / "ok").write_bytes(b"abc")
    assert read_regular(tmp_path / "ok") == b"abc"
    for path in (make_fifo(tmp_path / "pipe"), Path("/dev/zero")):
        with pytest.raises(OSError, match="not a regular file"):
            read_regular(path)
    (tmp_path / "big").write_bytes(b"x" * 11)
    assert read_regular(tmp_path / "big", limit=11) == b"x" * 11
    with pytest.raises(OSError, match="larger than"):
        read_regular(tmp_path / "big", limit=10)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "none")


def _finished_run(tmp_path):
    out = tmp_path / "run"
    r = invoke(["train", *tiny(subset=64, test_subset=32, epochs=1, batch_size=None), "--out", out])
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.slow  # a run trained for each of the four records
@pytest.mark.parametrize("name", ["metrics.csv", "config.yaml", "summary.json", "dropping_counts_window1.pt"])
def test_report_and_estimate_do_not_hang_on_a_fifo_in_a_run_folder(tmp_path, name, no_hang):
    run = _finished_run(tmp_path)
    (run / name).unlink(missing_ok=True)
    make_fifo(run / name)
    no_hang()
    r = invoke(["report", run, "--out", tmp_path / "rep", "--no-plots"])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    no_hang()
    r = invoke(["estimate", "--run", run])
    assert r.exit_code in (0, 2) and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("notes", ["fifo", "/dev/zero"])
def test_report_notes_must_be_a_regular_file(tmp_path, notes, no_hang):
    run = _finished_run(tmp_path)
    path = make_fifo(tmp_path / "notes.md") if notes == "fifo" else notes
    no_hang()
    r = invoke(["report", run, "--out", tmp_path / "rep", "--notes", path])
    assert r.exit_code == 2 and f"cannot read --notes {path}: not a regular file" in r.output, r.output


def test_a_fifo_as_config_file_or_checkpoint_is_refused(tmp_path, no_hang):
    make_fifo(tmp_path / "c.yaml")
    no_hang()
    r = invoke(["train", "--config", tmp_path / "c.yaml", "--model", "lenet", "--dataset", "synthetic"])
    assert r.exit_code == 2 and "not a regular file" in r.output, r.output
    run = _finished_run(tmp_path)
    summary = (run / "summary.json").read_text().replace('"complete"', '"interrupted"')
    (run / "summary.json").write_text(summary)
    os.unlink(run / "checkpoint.pt")
    make_fifo(run / "checkpoint.pt")
    no_hang()
    r = invoke(["train", "--resume", run])
    assert r.exit_code == 2 and "checkpoint.pt is unreadable: not a regular file" in r.output, r.output
