"""`compare --executor slurm` end to end without a cluster: stand-in sbatch, srun, sacct,
scontrol and scancel on the PATH run the submitted job array here, as Slurm would (array
task ids and SLURM_* variables, srun's %A/%a output names, sacct's --parsable2 table,
`scontrol requeue`), and one task is preempted once (SIGUSR2, the signal submitit's sbatch
script asks for) after its first checkpoint: it must be requeued and resume, not start over."""

import json
import os
import sys

import pytest

from conftest import invoke, metrics_rows, summary_of, tiny

TINY = tiny(test_subset=300, epochs=3, window=2, start=1, milestones=2, policies="regular,fine,random")

STANDIN = r"""
import os, re, signal, subprocess, sys, time
from pathlib import Path

STATE = Path(os.environ["STANDIN_STATE"])
STATE.mkdir(exist_ok=True)
name, args = sys.argv[1], sys.argv[2:]


def log(line):
    with open(STATE / "calls.log", "a") as f:
        f.write(line + "\n")


log(" ".join([name] + args))
hostile = os.environ.get("STANDIN_SBATCH", "")  # how sbatch behaves: reject, noid, hang or queue
if name == "sbatch" and hostile == "reject":
    print("sbatch: error: invalid partition specified: nosuch", file=sys.stderr)
    print("sbatch: error: Batch job submission failed: Invalid partition name specified", file=sys.stderr)
    sys.exit(1)
elif name == "sbatch" and hostile == "noid":
    print("Submitted.")
elif name == "sbatch" and hostile == "hang":
    time.sleep(3600)
elif name == "sbatch" and hostile == "queue":  # accepted, and left PENDING (or STANDIN_QUEUED): nothing runs
    script = Path(args[-1]).read_text()
    counter = STATE / "next_id"
    job = int(counter.read_text()) if counter.exists() else 4000
    counter.write_text(str(job + 1))
    found = re.search(r"^#SBATCH --array=0-(\d+)", script, re.M)
    for i in range(int(found.group(1)) + 1 if found else 1):
        (STATE / (f"{job}_{i}.state" if found else f"{job}.state")).write_text(os.environ.get("STANDIN_QUEUED", "PENDING"))
    print(f"Submitted batch job {job}")
elif name == "sbatch":
    script = Path(args[-1]).read_text()
    counter = STATE / "next_id"
    job = int(counter.read_text()) if counter.exists() else 4000
    counter.write_text(str(job + 1))
    found = re.search(r"^#SBATCH --array=0-(\d+)", script, re.M)
    keys = [(f"{job}_{i}", str(i)) for i in range(int(found.group(1)) + 1)] if found else [(str(job), None)]
    for key, index in keys:
        (STATE / f"{key}.state").write_text("PENDING")
        env = {k: v for k, v in os.environ.items() if k != "SLURM_STEP_NUM_TASKS"}
        env.update(SLURM_JOB_ID=key.replace("_", "0"), SLURM_NTASKS="1", SLURM_PROCID="0", SLURM_LOCALID="0",
                   SLURM_NODEID="0", SLURM_JOB_NUM_NODES="1", SLURM_JOB_NODELIST="localhost", STANDIN_KEY=key)
        if index is not None:
            env.update(SLURM_ARRAY_JOB_ID=str(job), SLURM_ARRAY_TASK_ID=index)
        subprocess.Popen([sys.executable, __file__, "runner", args[-1]], env=env, start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"Submitted batch job {job}")
elif name == "runner":  # one array task, run again while `scontrol requeue` asked for it
    key = os.environ["STANDIN_KEY"]
    attempt = 0
    while True:
        attempt += 1
        (STATE / f"{key}.state").write_text("RUNNING")
        proc = subprocess.Popen(["bash", args[0]])
        watch = os.environ.get("STANDIN_PREEMPT_WATCH")
        if attempt == 1 and key.endswith("_" + os.environ.get("STANDIN_PREEMPT_INDEX", "x")) and watch:
            while proc.poll() is None and not Path(watch).exists():
                time.sleep(0.05)
            pid = STATE / f"{key}.pid"
            if proc.poll() is None and pid.exists():
                log(f"preempt {key}")
                os.kill(int(pid.read_text()), signal.SIGUSR2)
        code = proc.wait()
        flag = STATE / f"{key}.requeue"
        if flag.exists():
            flag.unlink()
            (STATE / f"{key}.state").write_text("REQUEUED")
            continue
        (STATE / f"{key}.state").write_text("COMPLETED" if code == 0 else "FAILED")
        break
elif name == "srun":  # run the step in this process, output where srun's --output/--error say
    key = os.environ["STANDIN_KEY"]
    names = {"%A": os.environ.get("SLURM_ARRAY_JOB_ID", ""), "%a": os.environ.get("SLURM_ARRAY_TASK_ID", ""),
             "%j": os.environ["SLURM_JOB_ID"], "%t": "0"}
    files, i = {}, 0
    while args[i].startswith("--"):
        if args[i] in ("--output", "--error"):
            path = args[i + 1]
            for k, v in names.items():
                path = path.replace(k, v)
            files[args[i]] = path
            i += 2
        else:
            i += 1
    for flag, fd in (("--output", 1), ("--error", 2)):
        if flag in files:
            os.dup2(os.open(files[flag], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), fd)
    command, server = args[i:], os.environ.get("STANDIN_FORK_SERVER")
    if not (server and command[:3] == [sys.executable, "-u", "-m"]):
        (STATE / f"{key}.pid").write_text(str(os.getpid()))
        os.execvp(command[0], command)
    # the task's python forked from the tests' fork server (torch imported): a process of its
    # own, signalled by its pid, whose exit code is the step's, without an interpreter's imports
    from fineprune_cli.drivers.executors.forkclient import ForkServer
    client = object.__new__(ForkServer)  # a client of the tests' server, which they close
    client.address, client.log = server, Path(server).with_name("server.log")
    task = client.popen(command[2:], env=dict(os.environ, PYTHONUNBUFFERED="1"), stdout=1, stderr=2)
    (STATE / f"{key}.pid").write_text(str(task.pid))
    code = task.wait()
    sys.exit(128 - code if code < 0 else code)
elif name == "sacct":
    jobs = [j for i, a in enumerate(args) if a == "-j" for j in args[i + 1].split(",")]
    if "--noheader" not in args:
        print("JobID|State|NodeList")
    for f in sorted(STATE.glob("*.state")):
        key = f.name[:-len(".state")]
        if key.split("_")[0] in jobs:
            print(f"{key}|{f.read_text()}|localhost")
elif name == "squeue":  # --me --array --noheader --format=%i|%T: this user's jobs Slurm still holds
    for f in sorted(STATE.glob("*.state")):
        if f.read_text() in ("PENDING", "RUNNING", "REQUEUED"):
            print(f"{f.name[:-len('.state')]}|{f.read_text()}")
elif name == "scontrol":
    assert args[0] == "requeue", args
    (STATE / f"{args[1]}.requeue").write_text("")
elif name == "scancel":
    sig = args[args.index("--signal") + 1] if "--signal" in args else "SIGTERM"
    pid = STATE / f"{args[0]}.pid"
    if pid.exists():
        os.kill(int(pid.read_text()), getattr(signal, sig if sig.startswith("SIG") else "SIG" + sig))
"""


@pytest.fixture
def slurm_here(tmp_path, monkeypatch, forked):
    """A bin folder of stand-in Slurm commands first on the PATH; returns the state folder
    (its `bin` beside it: a test removes a command there to take it away). The stand-in srun
    forks a task's python from the fork server (`forked`)."""
    bin_dir, state = tmp_path / "bin", tmp_path / "slurm-state"
    bin_dir.mkdir()
    (bin_dir / "standin.py").write_text(STANDIN)
    for name in ("sbatch", "srun", "sacct", "squeue", "scontrol", "scancel"):
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\nexec {sys.executable} {bin_dir / "standin.py"} {name} "$@"\n')
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_STATE", str(state))
    monkeypatch.setenv("STANDIN_FORK_SERVER", forked.address)
    return state


@pytest.mark.slow
def test_slurm_array_requeues_a_preempted_task_and_reports_as_the_local_executor(tmp_path, slurm_here, monkeypatch):
    out = tmp_path / "slurm"
    fine = out / "lenet-synthetic" / "fine-seed0"
    monkeypatch.setenv("STANDIN_PREEMPT_INDEX", "1")  # the array's second task: fine, seed 0
    monkeypatch.setenv("STANDIN_PREEMPT_WATCH", str(fine / "checkpoint.pt"))
    result = invoke(
        ["compare", *TINY, "--out", out, "--executor", "slurm", "--slurm-time", "30", "--slurm-partition", "debug"]
    )
    assert result.exit_code == 0, result.output
    calls = (slurm_here / "calls.log").read_text()
    assert calls.count("sbatch ") == 1 and "preempt 4000_1" in calls and "scontrol requeue 4000_1" in calls
    script = next((out / ".jobs" / "slurm").glob("*_submission.sh")).read_text()
    assert "#SBATCH --array=0-2%3" in script and "#SBATCH --partition=debug" in script
    assert "#SBATCH --time=30" in script
    assert summary_of(fine)["resumed_after_epochs"] and summary_of(fine)["status"] == "complete"
    assert (
        "resumed_after_epochs" not in summary_of(out / "lenet-synthetic" / "regular-seed0")
        or not summary_of(out / "lenet-synthetic" / "regular-seed0")["resumed_after_epochs"]
    )

    local = tmp_path / "local"
    assert invoke(["compare", *TINY, "--out", local]).exit_code == 0
    for arm in ("regular", "fine", "random"):  # resumed, yet the very run trained without a break
        assert metrics_rows(out / "lenet-synthetic" / f"{arm}-seed0", drop_timing=True) == metrics_rows(
            local / "lenet-synthetic" / f"{arm}-seed0", drop_timing=True
        )
    tables = []
    for folder in (out, local):
        made = invoke(["report", folder, "--out", tmp_path / f"report-{folder.name}", "--no-plots"])
        assert made.exit_code == 0, made.output
        tables.append((tmp_path / f"report-{folder.name}" / "table2_accuracy.md").read_text())
    assert tables[0] == tables[1] and "fine" in tables[0]

    again = invoke(["compare", *TINY, "--out", out, "--executor", "slurm"])  # all there: nothing submitted
    assert again.exit_code == 0 and (slurm_here / "calls.log").read_text().count("sbatch ") == 1


@pytest.mark.slow  # the detached jobs train in their own processes
def test_detach_returns_at_once_and_a_later_compare_collects(tmp_path, slurm_here):
    out = tmp_path / "slurm"
    first = invoke(
        [
            "compare",
            *TINY,
            "--policies",
            "regular",
            "--out",
            out,
            "--executor",
            "slurm",
            "--detach",
            "--set",
            "compare.slurm.mem=8G",
            "--set",
            "compare.slurm.qos=low",
        ]
    )
    assert first.exit_code == 0, first.output
    script = next((out / ".jobs" / "slurm").glob("*_submission.sh")).read_text()
    assert "#SBATCH --mem=8G" in script and "#SBATCH --qos=low" in script  # --set compare.slurm.* reaches sbatch
    assert "queued or running on Slurm" in first.output
    ledger = json.loads((out / ".jobs" / "slurm.json").read_text())
    assert list(ledger.values()) == ["4000"]
    second = invoke(["compare", *TINY, "--policies", "regular", "--out", out, "--executor", "slurm"])
    assert second.exit_code == 0, second.output
    assert (slurm_here / "calls.log").read_text().count("sbatch ") == 1  # waited for it, not resubmitted
    assert summary_of(out / "lenet-synthetic" / "regular-seed0")["status"] == "complete"


def test_an_unknown_slurm_setting_is_refused_before_anything_is_submitted(tmp_path, slurm_here):
    result = invoke(["compare", *TINY, "--out", tmp_path, "--executor", "slurm", "--set", "compare.slurm.memory=8"])
    assert result.exit_code == 2 and result.output.startswith("error: compare.slurm: ") and "'memory'" in result.output
    assert result.output.count("\n") == 1 and not (slurm_here / "calls.log").exists()


def test_slurm_refusals_are_one_line(tmp_path, monkeypatch):
    for extra in (["--slurm-partition", "gpu"], ["--detach"], ["--slurm-account", "x"]):
        result = invoke(["compare", *TINY, "--out", tmp_path, *extra])
        assert (
            result.exit_code == 2
            and result.output.startswith("error: --")
            and "needs --executor slurm" in result.output
        )
    result = invoke(["compare", *TINY, "--out", tmp_path, "--set", "compare.slurm.mem_gb=8"])
    assert result.exit_code == 2 and result.output == "error: compare.slurm needs --executor slurm\n"
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    result = invoke(["compare", *TINY, "--out", tmp_path, "--executor", "slurm"])
    assert result.exit_code == 2, result.output
    assert result.output == "error: --executor slurm needs Slurm's sbatch on the PATH, and there is none here\n"


def _slurm(tmp_path, *extra):
    return invoke(["compare", *TINY, "--policies", "regular", "--out", tmp_path / "out", "--executor", "slurm", *extra])


def _calls(state, name="sbatch"):
    log = state / "calls.log"
    return log.read_text().count(f"{name} ") if log.exists() else 0


@pytest.mark.parametrize(
    "behaviour, words",
    [
        ("reject", "sbatch refused the job array: invalid partition specified: nosuch; Batch job submission failed"),
        ("noid", "sbatch printed no job id (it said: 'Submitted.')"),
        ("hang", "sbatch did not answer within 2 s (compare.slurm.submit_timeout)"),
    ],
)
def test_sbatch_refusing_printing_no_id_or_hanging_is_one_line(tmp_path, slurm_here, monkeypatch, behaviour, words):
    monkeypatch.setenv("STANDIN_SBATCH", behaviour)
    result = _slurm(tmp_path, "--set", "compare.slurm.submit_timeout=2")
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {words}") and result.output.count("\n") == 1, result.output
    assert _calls(slurm_here) == 1 and not (tmp_path / "out" / ".jobs" / "slurm.json").exists()
    left = [p.name for p in (tmp_path / "out" / ".jobs" / "slurm").iterdir() if p.is_file()]
    assert left == []  # no pickle or script of a submission that did not happen


def test_no_srun_is_one_line(tmp_path, slurm_here):
    (slurm_here.parent / "bin" / "srun").unlink()
    result = _slurm(tmp_path)
    assert result.output == "error: --executor slurm needs Slurm's srun on the PATH, and there is none here\n"
    assert result.exit_code == 2 and _calls(slurm_here) == 0


@pytest.mark.parametrize(
    "setting, words",
    [
        ("setup=5", "compare.slurm.setup: expected a list of strings, got 5"),
        ("nodes=abc", "compare.slurm.nodes: expected int, got 'abc'"),
        ("srun_args=[[1]]", "compare.slurm.srun_args[0]: expected a string, got [1]"),
        ("time=-1", "--slurm-time must be between 1 and 525,600, got -1"),
        ("additional_parameters={time: -1}", "compare.slurm.additional_parameters.time: already set"),
        ("nodes=0", "compare.slurm.nodes must be 1 (each run of compare is one Slurm task on one node), got 0"),
        ("nodes=2", "compare.slurm.nodes must be 1 (each run of compare is one Slurm task on one node), got 2"),
        ("ntasks_per_node=4", "compare.slurm.ntasks_per_node must be 1 (each run of compare is one Slurm task"),
        ("additional_parameters={ntasks: 2}", "compare.slurm.additional_parameters.ntasks: each run of compare is"),
        ('mem="8G\\nrm -rf x"', "compare.slurm.mem: '8G\\nrm -rf x' holds a line break"),
    ],
)
def test_compare_slurm_values_are_checked_before_anything_is_submitted(tmp_path, slurm_here, setting, words):
    result = _slurm(tmp_path, "--set", f"compare.slurm.{setting}")
    assert result.exit_code == 2 and result.output == f"error: {words}" + result.output[len(words) + 7 :], result.output
    assert result.output.count("\n") == 1 and _calls(slurm_here) == 0


def test_valid_compare_slurm_values_reach_the_script(tmp_path, slurm_here, monkeypatch):
    monkeypatch.setenv("STANDIN_SBATCH", "queue")
    extra = ["--detach", "--set", "compare.slurm.mem=8", "--set", "compare.slurm.setup=[module load x, 5]"]
    extra += ["--set", "compare.slurm.additional_parameters={reservation: r1, requeue: true}"]
    result = _slurm(tmp_path, *extra)
    assert result.exit_code == 0, result.output
    script = next((tmp_path / "out" / ".jobs" / "slurm").glob("*_submission.sh")).read_text()
    assert "#SBATCH --mem=8\n" in script and "\nmodule load x\n5\n" in script
    assert "#SBATCH --reservation=r1\n" in script and "#SBATCH --requeue\n" in script


def test_compare_after_detach_does_not_resubmit_jobs_still_queued_without_sacct(tmp_path, slurm_here, monkeypatch):
    """sacct missing (no accounting on the cluster) read as 'finished', and a second compare
    submitted every run still queued a second time."""
    monkeypatch.setenv("STANDIN_SBATCH", "queue")
    assert _slurm(tmp_path, "--detach").exit_code == 0 and _calls(slurm_here) == 1
    (slurm_here.parent / "bin" / "sacct").unlink()
    again = _slurm(tmp_path, "--detach")
    assert again.exit_code == 0 and "1 run(s) queued or running" in again.output, again.output
    assert _calls(slurm_here) == 1 and _calls(slurm_here, "squeue") == 1

    (slurm_here.parent / "bin" / "squeue").unlink()  # nothing tells: refuse, never resubmit
    blind = _slurm(tmp_path, "--detach")
    assert blind.exit_code == 2 and blind.output.count("\n") == 1, blind.output
    assert blind.output.startswith("error: cannot tell whether 1 run(s) submitted earlier (Slurm job 4000)")
    assert _calls(slurm_here) == 1


def test_a_job_slurm_no_longer_holds_is_submitted_again(tmp_path, slurm_here, monkeypatch):
    monkeypatch.setenv("STANDIN_SBATCH", "queue")
    assert _slurm(tmp_path, "--detach").exit_code == 0
    (slurm_here / "4000.state").write_text("FAILED")  # ended without a result: squeue lists it no more
    again = _slurm(tmp_path, "--detach")
    assert again.exit_code == 0 and _calls(slurm_here) == 2, again.output
    (slurm_here.parent / "bin" / "squeue").unlink()  # sacct alone: its recorded state decides
    (slurm_here / "4001.state").write_text("CANCELLED by 0")
    assert _slurm(tmp_path, "--detach").exit_code == 0 and _calls(slurm_here) == 3


def test_a_task_killed_before_its_result_fails_instead_of_being_waited_for(tmp_path, slurm_here, monkeypatch):
    """With no sacct, submitit never learnt that a job had ended: a task killed before it wrote
    its result (its node lost) kept compare waiting for ever."""
    from fineprune_cli.drivers.executors import slurmcalls

    monkeypatch.setattr(slurmcalls, "ASK_EVERY_S", 0.2)
    monkeypatch.setenv("STANDIN_SBATCH", "queue")
    monkeypatch.setenv("STANDIN_QUEUED", "NODE_FAIL")  # gone from squeue at once, no result written
    (slurm_here.parent / "bin" / "sacct").unlink()
    result = _slurm(tmp_path)
    assert result.exit_code == 1, result.output
    assert "seed 0: the task ended without a result (killed, or its node failed) (Slurm job 4000" in result.output
    assert _calls(slurm_here, "squeue") == 2  # gone at two asks in a row, not at the first


def test_a_stop_while_waiting_on_slurm_leaves_the_jobs_there_and_says_how_to_go_on(tmp_path, slurm_here, monkeypatch):
    """Ctrl-C (or SIGTERM, which compare takes as one) while compare waited on Slurm ended in a
    bare 'interrupted': the queued runs went on unnamed. Now one line names the job, how a
    later compare collects it and how to cancel it; the ledger keeps it, so nothing resubmits."""
    from fineprune_cli.drivers.executors import slurmjobs

    monkeypatch.setenv("STANDIN_SBATCH", "queue")

    def pressed(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(slurmjobs.time, "sleep", pressed)
    result = _slurm(tmp_path)
    assert result.exit_code == 130, result.output
    assert result.output.strip().splitlines()[-1] == (
        "stopped waiting: 1 run(s) stay queued or running on Slurm (job 4000); "
        "`compare` again collects them, `scancel 4000` stops them"
    )
    assert list(json.loads((tmp_path / "out" / ".jobs" / "slurm.json").read_text()).values()) == ["4000"]


def test_a_submission_from_another_thread_than_the_main_one_goes_through(tmp_path):
    """The submission's time limit is a signal, which only the main thread may set: compare
    called from a library's worker thread ended in ValueError ('signal only works in main thread')."""
    import threading

    from fineprune_cli.drivers.executors.slurmcalls import submitting

    got = []
    worker = threading.Thread(target=lambda: got.append(submitting(tmp_path, 5, lambda: "submitted")))
    worker.start()
    worker.join(30)
    assert got == ["submitted"]


def test_a_tasks_outcome_is_read_from_its_run_and_log_never_by_unpickling_its_result(tmp_path, monkeypatch):
    """Issue 57: submitit's result pickle under <out>/.jobs/slurm/ was unpickled when a job ended,
    so a pickle planted there ran code. The outcome comes from the run folder (complete: done) and
    the task's log (its traceback's last error), the pickle only telling that the task ended."""
    import submitit

    from fineprune_cli.drivers.executors.contract import Task
    from fineprune_cli.drivers.executors.slurmjobs import SlurmRunner

    monkeypatch.chdir(tmp_path)
    run = tmp_path / "out" / "lenet-synthetic" / "fine-seed0"
    run.mkdir(parents=True)
    task = Task("lenet on synthetic, fine, seed 0", "lenet-synthetic", "fine", 0, tmp_path / "c.yaml", run, 2)
    job = submitit.SlurmJob(folder=tmp_path / "out" / ".jobs" / "slurm", job_id="4000_0")
    job.paths.result_pickle.parent.mkdir(parents=True, exist_ok=True)
    job.paths.result_pickle.write_bytes(b"\x80\x04cos\nsystem\n\x8c\x0btouch PWNED\x85R.")  # `touch PWNED` if loaded
    job.paths.stderr.write_text("Traceback (most recent call last):\nValueError: bad pixels\n")
    failed = SlurmRunner._outcome(task, job)
    assert not failed.ok and failed.error.startswith("bad pixels (Slurm job 4000_0; logs: ")
    (run / "summary.json").write_text(json.dumps({"status": "complete"}))
    assert SlurmRunner._outcome(task, job).ok
    assert not (tmp_path / "PWNED").exists()
