"""Hostile cases of issue 41 (items 3, 5, 7): `compare --executor slurm` under bad settings and a
misbehaving Slurm. Bad `compare.slurm` values of every field and type, settings that try to
replace a checked flag, YAML alias bombs and self-referring aliases (config files and --set,
under --print-config and --dry-run), and stand-in Slurm commands on the PATH that reject the
array, print no job id, never answer, crash, or (sacct and squeue both gone) cannot say whether
jobs submitted earlier still run. Each is one `error:` line, or done and checked.

The stand-in commands are shell scripts in the case's `work/bin`, and PATH is that folder alone
(relative: the case runs in `work`), so a real Slurm on the machine is never asked. A refusal
from sbatch comes after compare has recorded its plan and job configs, as it must (sbatch reads
the job configs); those cases put `--out` in the case's logs folder beside it, which the harness
does not compare, and anything they write in `work` (a stand-in's call log) still counts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from cases import Case, config

COMPARE = ["compare", "--model", "lenet", "--dataset", "synthetic", "--subset", "64", "--test-subset", "32"]
COMPARE += ["--epochs", "1", "--device", "cpu", "--policies", "regular"]
SLURM = [*COMPARE, "--out", "cmp", "--executor", "slurm"]
PATH = {"PATH": "bin"}  # the case's stand-ins only
SBATCH_OK = 'echo sbatch >> calls.log\necho "Submitted batch job 42"\n'
PY = sys.executable


def _set(name: str, value: str, words: str) -> Case:
    """Refused as the section is read, before a stand-in sbatch that would accept it is asked
    (it leaves calls.log in `work`, and compare its files in `cmp`: both would count)."""

    def setup(work: Path, outside: Path, templates: dict) -> list:
        _bin(work, {"sbatch": SBATCH_OK})
        return [*SLURM, "--detach", "--set", value]

    return Case(f"slurm-set-{name}", (), [words], setup, env=PATH)


# -- compare.slurm values of every field and type: refused as the section is read --------------------
SET_VALUES = {
    "setup-int": ("compare.slurm.setup=5", "compare.slurm.setup: expected a list of strings, got 5"),
    "setup-text": ("compare.slurm.setup=module load cuda", "setup: expected a list of strings"),
    "setup-nested-list": ("compare.slurm.setup=[[a]]", "compare.slurm.setup[0]: expected a string"),
    "setup-mapping-item": ("compare.slurm.setup=[{a: 1}]", "setup[0]: expected a string"),
    "setup-line-break": ('compare.slurm.setup=["ls\\nrm -rf ~"]', "holds a line break"),
    "teardown-bool": ("compare.slurm.teardown=true", "compare.slurm.teardown: expected a list of strings"),
    "srun-args-nested": ("compare.slurm.srun_args=[[1]]", "compare.slurm.srun_args[0]: expected a string, got [1]"),
    "srun-args-null-item": ("compare.slurm.srun_args=[null]", "srun_args[0]: expected a string, got None"),
    "nodes-word": ("compare.slurm.nodes=abc", "compare.slurm.nodes: expected int, got 'abc'"),
    "nodes-zero": ("compare.slurm.nodes=0", "compare.slurm.nodes must be 1 (each run"),
    "nodes-negative": ("compare.slurm.nodes=-3", "compare.slurm.nodes must be 1 (each run"),
    "nodes-huge": (f"compare.slurm.nodes={10**20}", "compare.slurm.nodes must be 1 (each run"),
    "nodes-float": ("compare.slurm.nodes=2.5", "compare.slurm.nodes: expected int"),
    "nodes-bool": ("compare.slurm.nodes=true", "compare.slurm.nodes: expected int"),
    "ntasks-per-node-zero": ("compare.slurm.ntasks_per_node=0", "ntasks_per_node must be 1 (each run"),
    "nodes-two": ("compare.slurm.nodes=2", "compare.slurm.nodes must be 1 (each run of compare is one Slurm task"),
    "ntasks-per-node-two": ("compare.slurm.ntasks_per_node=2", "ntasks_per_node must be 1 (each run"),
    "ntasks-extra": ("compare.slurm.additional_parameters={ntasks: 4}", "additional_parameters.ntasks: each run"),
    "cpus-per-gpu-list": ("compare.slurm.cpus_per_gpu=[1]", "compare.slurm.cpus_per_gpu: expected int"),
    "gpus-per-node-too-many": ("compare.slurm.gpus_per_node=65", "gpus_per_node must be between 0 and 64"),
    "signal-delay-negative": ("compare.slurm.signal_delay_s=-1", "signal_delay_s must be between 0"),
    "array-parallelism-zero": ("compare.slurm.array_parallelism=0", "array_parallelism must be between 1"),
    "use-srun-word": ("compare.slurm.use_srun=maybe", "compare.slurm.use_srun: expected true or false"),
    "stderr-to-stdout-int": ("compare.slurm.stderr_to_stdout=1", "stderr_to_stdout: expected true or false"),
    "mem-list": ("compare.slurm.mem=[8G]", "compare.slurm.mem: expected a string"),
    "mem-line-break": ('compare.slurm.mem="8G\\n#SBATCH --time=0"', "compare.slurm.mem: '8G\\n#SBATCH"),
    "qos-null": ("compare.slurm.qos=null", "compare.slurm.qos: expected a string, got None"),
    "constraint-mapping": ("compare.slurm.constraint={a: b}", "compare.slurm.constraint: expected a string"),
    "exclusive-list": ("compare.slurm.exclusive=[user]", "compare.slurm.exclusive: expected a string"),
    "job-name-tab": ('compare.slurm.job_name="a\\tb"', "compare.slurm.job_name: 'a\\tb' holds"),
    "time-past-its-flag": ("compare.slurm.time=-1", "--slurm-time must be between 1"),
    "partition-by-its-old-name": (
        "compare.slurm_partition=gpu",
        "compare.slurm_partition is compare.slurm.partition now",
    ),
    "account-by-its-old-name": ("compare.slurm_account=x", "compare.slurm_account is compare.slurm.account now"),
    "gpus-per-task-past-its-flag": ("compare.slurm.gpus_per_task=999", "--slurm-gpus-per-task must be between 0"),
    "cpus-per-task-past-its-setting": ("compare.slurm.cpus_per_task=-4", "compare.slurm.cpus_per_task must be between"),
    "time-in-options": ("compare.slurm.options={time: 5}", "compare.slurm.time: set it with --slurm-time"),
    "extra-not-mapping": ("compare.slurm.additional_parameters=[a]", "additional_parameters: expected a mapping"),
    "extra-time": ("compare.slurm.additional_parameters={time: -1}", "additional_parameters.time: already set"),
    "extra-time-min": ("compare.slurm.additional_parameters={time-min: 1, time: 5}", "additional_parameters.time:"),
    "extra-array": ("compare.slurm.additional_parameters={array: 0-99999}", "additional_parameters.array: already"),
    "extra-output": ("compare.slurm.additional_parameters={output: /etc/x}", "additional_parameters.output: already"),
    "extra-partition-underscore": (
        "compare.slurm.additional_parameters={gpus_per_task: 9}",
        "'gpus_per_task' is not an sbatch option name",
    ),
    "extra-bad-name": ('compare.slurm.additional_parameters={"a b": 1}', "'a b' is not an sbatch option name"),
    "extra-nested-value": ("compare.slurm.additional_parameters={reservation: [1]}", "reservation: expected a string"),
    "extra-false": ("compare.slurm.additional_parameters={requeue: false}", "requeue: expected a string, got False"),
    "extra-line-break": (
        'compare.slurm.additional_parameters={comment-x: "a\\nb"}',
        "holds a line break",
    ),
    "unknown-name": ("compare.slurm.memory=8", "compare.slurm: unknown setting 'memory'"),
    "submitit-generic-name": ("compare.slurm.timeout_min=-1", "compare.slurm: unknown setting 'timeout_min'"),
    "deprecated-num-gpus": ("compare.slurm.num_gpus=1", "compare.slurm: unknown setting 'num_gpus'"),
    "internal-map-count": ("compare.slurm.map_count=5", "compare.slurm: unknown setting 'map_count'"),
    "slurm-not-mapping": ("compare.slurm=5", "expected a mapping"),
    "submit-timeout-zero": ("compare.slurm.submit_timeout=0", "compare.slurm.submit_timeout must be between 1"),
    "submit-timeout-huge": (f"compare.slurm.submit_timeout={10**12}", "slurm.submit_timeout must be between 1"),
    "submit-timeout-text": ("compare.slurm.submit_timeout=soon", "expected int"),
}


# -- YAML whose aliases expand far beyond their text -----------------------------------------------
def _bomb() -> str:
    """Nine nested aliases of nine items, in one flow list: 9**9 strings once expanded."""
    inner = '["x","x","x","x","x","x","x","x","x"]'
    for name in "abcdefgh":
        inner = f"[&{name} {inner}" + f",*{name}" * 8 + "]"
    return inner


BOMB_IN_SLURM = f"compare:\n  executor: slurm\n  slurm:\n    setup: {_bomb()}\n"
BOMB_IN_EXTRA = f"compare:\n  executor: slurm\n  slurm:\n    additional_parameters: {{x: {_bomb()}}}\n"
BOMB_MAPPINGS = "a: &a {k1: x, k2: x, k3: x, k4: x, k5: x, k6: x, k7: x, k8: x}\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")
)


def _compare_file(name: str, text: str, look: str, words: str) -> Case:
    def setup(work: Path, outside: Path, templates: dict) -> list:
        (work / "c.yaml").write_text(text)
        return [*COMPARE, "--out", "cmp", "--config", "c.yaml", *([look] if look else [])]

    return Case(f"slurm-yaml-{name}", (), [words], setup)


YAML_CASES = [
    _compare_file("bomb-print-config", BOMB_IN_SLURM, "--print-config", "its aliases repeat"),
    _compare_file("bomb-dry-run", BOMB_IN_SLURM, "--dry-run", "its aliases repeat"),
    _compare_file("bomb-compare", BOMB_IN_SLURM, "", "its aliases repeat"),
    _compare_file("bomb-in-extra", BOMB_IN_EXTRA, "--print-config", "its aliases repeat"),
    _compare_file("bomb-of-mappings", BOMB_MAPPINGS + "compare: {slurm: {setup: *i}}\n", "--dry-run", "aliases repeat"),
    _compare_file("self-alias", "compare:\n  slurm: &s {setup: [*s]}\n", "--print-config", "holds it"),
    _compare_file("setup-int-in-file", "compare:\n  executor: slurm\n  slurm: {setup: 5}\n", "", "expected a list"),
    _compare_file("time-in-file", "compare:\n  executor: slurm\n  slurm: {time: -1}\n", "--dry-run", "--slurm-time"),
    _compare_file(
        "slurm-time-in-file", "compare:\n  executor: slurm\n  slurm_time: -1\n", "", "compare.slurm.time now"
    ),
    config("slurm-yaml-bomb-in-train", f"train: {{milestones: {_bomb()}}}\n", "--print-config", words=["aliases"]),
    Case("slurm-set-bomb", [*SLURM, "--set", f"compare.slurm.setup={_bomb()}", "--dry-run"], ["aliases repeat"]),
    Case("slurm-set-self-alias", [*SLURM, "--set", "compare.slurm.setup=&a [*a]", "--print-config"], ["holds it"]),
]


# -- a misbehaving Slurm: stand-in commands on the PATH ---------------------------------------------


def _bin(work: Path, commands: dict[str, str | None]) -> None:
    """`commands`: name -> the body of its shell script in work/bin, None for none (srun, never
    run, is there unless named)."""
    (work / "bin").mkdir()
    for command, body in {"srun": "exit 1\n", **commands}.items():
        if body is not None:
            (work / "bin" / command).write_text("#!/bin/sh\n" + body)
            (work / "bin" / command).chmod(0o755)


def _logs_out(work: Path) -> Path:
    """The case's logs folder, beside its root: written by the refused compare, not compared."""
    return work.parent.parent / (work.parent.name + "-logs") / "cmp"


def _stand_in(
    name: str,
    commands: dict[str, str | None],
    words: Sequence[str],
    extra: Sequence[str] = (),
    ledger: bool = False,
    expect: str = "refused",
    check: Callable[[Path], str | None] | None = None,
) -> Case:
    def setup(work: Path, outside: Path, templates: dict) -> list:
        _bin(work, commands)
        out = work / "cmp" if expect == "done" else _logs_out(work)
        if ledger:  # an earlier `compare --detach` submitted this job config as job 4000
            job = (out / ".jobs" / "lenet-synthetic" / "regular-seed0.yaml").resolve()
            (out / ".jobs").mkdir(parents=True)
            (out / ".jobs" / "slurm.json").write_text(json.dumps({str(job): "4000"}))
        return [*COMPARE, "--out", str(out), "--executor", "slurm", *extra]

    return Case(f"slurm-stand-in-{name}", (), list(words), setup, env=PATH, expect=expect, check=check)


def _submitted(*lines: str) -> Callable[[Path], str | None]:
    """A done case's check: sbatch was asked once, with these lines in its script."""

    def check(work: Path) -> str | None:
        calls = (work / "calls.log").read_text().split() if (work / "calls.log").exists() else []
        if calls.count("sbatch") != 1:
            return f"sbatch called {calls.count('sbatch')} times"
        script = next((work / "cmp" / ".jobs" / "slurm").glob("*_submission.sh")).read_text()
        missing = [line for line in lines if line not in script.splitlines()]
        return f"script lacks {missing}" if missing else None

    return check


def _not_submitted(work: Path) -> str | None:
    log = work / "calls.log"
    return "sbatch was called again for a job still queued" if log.exists() else None


QUEUED = "echo '4000|RUNNING'\n"
STAND_IN_CASES = [
    _stand_in(
        "sbatch-rejects-partition",
        {"sbatch": "echo 'sbatch: error: invalid partition specified: nosuch' >&2\nexit 1\n"},
        ["sbatch refused the job array: invalid partition specified: nosuch (exit code 1)"],
    ),
    _stand_in("sbatch-says-nothing", {"sbatch": "exit 1\n"}, ["sbatch refused the job array: no message"]),
    _stand_in("sbatch-no-job-id", {"sbatch": "echo Submitted.\n"}, ["sbatch printed no job id", "Submitted."]),
    _stand_in("sbatch-job-word", {"sbatch": "echo 'job abc queued'\n"}, ["sbatch printed no job id"]),
    _stand_in(
        "sbatch-never-answers",
        {"sbatch": f"exec {PY} -c 'import time; time.sleep(60)'\n"},
        ["sbatch did not answer within 2 s"],
        ["--set", "compare.slurm.submit_timeout=2"],
    ),
    _stand_in(
        "sbatch-hangs-after-its-id",
        {"sbatch": f"echo 'Submitted batch job 7'\nexec {PY} -c 'import time; time.sleep(60)'\n"},
        ["sbatch did not answer within 2 s", "squeue"],
        ["--set", "compare.slurm.submit_timeout=2"],
    ),
    _stand_in("sbatch-killed", {"sbatch": "kill -9 $$\n"}, ["sbatch refused the job array", "exit code -9"]),
    _stand_in(
        "sbatch-floods-stderr",
        {"sbatch": f"{PY} -c 'import sys; sys.stderr.write((\"x\" * 999 + chr(10)) * 999)'\nexit 3\n"},
        ["sbatch refused the job array: xxx", "(exit code 3)"],
    ),
    _stand_in("no-srun", {"srun": None, "sbatch": SBATCH_OK}, ["needs Slurm's srun on the PATH"]),
    _stand_in(
        "no-squeue-no-sacct-after-detach",
        {"sbatch": SBATCH_OK},
        ["cannot tell whether 1 run(s) submitted earlier (Slurm job 4000)", "neither squeue nor sacct"],
        ledger=True,
    ),
    _stand_in(
        "squeue-and-sacct-fail-after-detach",
        {"sbatch": SBATCH_OK, "squeue": "exit 1\n", "sacct": "exit 1\n"},
        ["cannot tell whether 1 run(s)"],
        ledger=True,
    ),
    _stand_in(
        "squeue-hangs-sacct-missing",
        {"sbatch": SBATCH_OK, "squeue": f"exec {PY} -c 'import time; time.sleep(60)'\n"},
        ["cannot tell whether 1 run(s)"],
        ["--set", "compare.slurm.submit_timeout=2"],
        ledger=True,
    ),
    _stand_in(
        "still-queued-without-sacct",
        {"sbatch": SBATCH_OK, "squeue": QUEUED},
        [],
        ["--detach"],
        ledger=True,
        expect="done",
        check=_not_submitted,
    ),
    _stand_in(
        "sacct-alone-says-running",
        {"sbatch": SBATCH_OK, "sacct": QUEUED},
        [],
        ["--detach"],
        ledger=True,
        expect="done",
        check=_not_submitted,
    ),
    _stand_in(
        "valid-settings-reach-the-script",
        {"sbatch": SBATCH_OK},
        [],
        ["--detach", "--set", "compare.slurm.mem=8", "--set", "compare.slurm.setup=[module load x]"]
        + ["--set", "compare.slurm.additional_parameters={reservation: r1}", "--slurm-time", "30"],
        expect="done",
        check=_submitted("#SBATCH --mem=8", "module load x", "#SBATCH --reservation=r1", "#SBATCH --time=30"),
    ),
]

ROUND5_SLURM_CASES: list[Case] = (
    [_set(name, value, words) for name, (value, words) in SET_VALUES.items()] + YAML_CASES + STAND_IN_CASES
)
