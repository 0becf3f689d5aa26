"""Starting multi-process runs: settings refused before any data is loaded, signals passed on
to the launcher, a rank's real error in torchrun's report."""

import json
import signal
import subprocess
import sys
import time

import pytest

from fineprune_cli import cli
from fineprune_cli.distributed import launch
from fineprune_cli.engine.config import Config
from fineprune_cli.errors import ConfigError
from conftest import invoke


def _cfg(mode="sync", batch=128, group=2):
    cfg = Config()
    cfg.run.dist_mode, cfg.train.batch_size, cfg.run.group_size = mode, batch, group
    return cfg


@pytest.mark.parametrize("mode, size, batch, group, refused", [
    ("sync", 3, 128, 2, "over 3 processes"),
    ("sync", 4, 128, 2, None),
    ("sync", 1, 7, 2, None),
    ("async", 3, 127, 2, None),                   # every worker trains whole batches of its own
    ("mixed", 3, 63, 2, "group of 2 workers"),    # workers 1+2: 63 does not split in two
    ("mixed", 4, 64, 2, None),                    # workers 1+2, then 3 alone
    ("mixed", 5, 64, 3, "group of 3 workers"),    # workers 1-3, then 4 alone
])
def test_batch_size_checks_of_a_parallel_run(mode, size, batch, group, refused):
    if refused is None:
        launch.check_parallel(_cfg(mode, batch, group), size)
    else:
        with pytest.raises(ConfigError, match=refused):
            launch.check_parallel(_cfg(mode, batch, group), size)


def test_nproc_with_an_uneven_batch_is_refused_before_any_data_or_process(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "relaunch", lambda *a: pytest.fail("launched anyway"))
    # an empty --data-dir: loading the data would fail with another message
    base = ["train", "--model", "lenet", "--dataset", "fashion-mnist", "--data-dir", tmp_path,
            "--device", "cpu", "--out", tmp_path / "run"]
    result = invoke([*base, "--nproc-per-node", "3", "--batch-size", "128"])
    assert result.exit_code == 2 and "--batch-size 128 must divide evenly over 3" in result.output
    result = invoke([*base, "--nproc-per-node", "3", "--dist-mode", "mixed", "--batch-size", "63"])
    assert result.exit_code == 2 and "mixed group of 2" in result.output
    assert list(tmp_path.iterdir()) == []


CHILD = """
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "w").write(signal.Signals(signum).name)
    sys.exit(7)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[1] + ".ready", "w").close()
time.sleep(20)
"""


def test_sigterm_to_the_outer_process_reaches_the_launcher(tmp_path):
    mark = tmp_path / "child"
    outer = ("import sys; from fineprune_cli.distributed.launch import call_forwarding_signals as call; "
             f"sys.exit(call([sys.executable, '-c', {CHILD!r}, {str(mark)!r}]))")
    proc = subprocess.Popen([sys.executable, "-c", outer])
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "child.ready").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the child never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 7                  # the child's own exit code comes back
        assert mark.read_text() == "SIGTERM"
    finally:
        proc.kill()


def test_a_ranks_uncaught_error_goes_to_torchruns_error_file(tmp_path, monkeypatch):
    """@record on the entry point: torchrun reports the rank's error, not just an exit code."""
    def boom(*args, **kwargs):
        raise RuntimeError("NCCL went away")
    monkeypatch.setattr(launch, "train", boom)
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "error.json"))
    monkeypatch.setattr(sys, "argv", ["fineprune", "train", "--model", "lenet", "--dataset", "synthetic"])
    with pytest.raises(RuntimeError):
        cli.main()
    report = json.loads((tmp_path / "error.json").read_text())
    assert report["message"]["message"] == "RuntimeError: NCCL went away"
