"""Hostile cases of issue 43's surface, `compare --script`: commands that cannot be run, and scripts
that crash, never start or finish their run, lie about their seed or epochs, record out of order,
are killed, hang under --jobs, or are stopped and started again. A bad command is refused in one
line before anything is written; a bad script fails its own run with an `error:` line naming its
log while the others are kept; a script that saves and resumes continues its run."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from cases import Case
from forked import fineprune

HEAD = "import os, signal, sys, time\nseed, epochs = int(sys.argv[1]), int(sys.argv[2])\n"
START = "import fineprune\nrun = fineprune.start(num_train=8, seed=seed, epochs=epochs)\n"
LOG = "run.log(train_loss=1.0 / (e + 1), test_accuracy=50.0 + e)\n"
FULL = START + "for e in range(run.epochs):\n    " + LOG + "run.finish()\n"
# each epoch drawn from run.sampler() with a loss per sample: a pruning policy acts only through it
# (a run that never draws fails at its first epoch: it would train regular under the policy's name)
DRAW = "    sampler.set_epoch(e)\n    idx = torch.tensor(list(sampler))\n    sampler.loss(idx, torch.ones(len(idx)))\n"
DRAWN = (
    START
    + "import torch\nsampler = run.sampler()\nfor e in range(run.epochs):\n"
    + DRAW
    + "    "
    + LOG
    + "run.finish()\n"
)


def compare(script: str, *extra: str, seeds: str = "0", policies: str = "regular") -> list[str]:
    """argv of a compare over `script` (a file in the case's folder)."""
    command = f"{shlex.quote(sys.executable)} {script} {{seed}} {{epochs}}"
    return ["compare", "--script", command, "--epochs", "2", "--milestones", "", "--policies", policies,
            "--seeds", seeds, "--out", "cmp", *extra]  # fmt: skip


def scripted(body: str, *extra: str, **kw):
    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        (work / "s.py").write_text(HEAD + body)
        return compare("s.py", *extra, **kw)

    return setup


def runs_complete(*names: str):
    """The check: these run folders of the matrix are complete (the others went on)."""

    def check(work: Path) -> str | None:
        for name in names:
            summary = json.loads((work / "cmp" / "s-data" / name / "summary.json").read_text())
            if summary["status"] != "complete":
                return f"{name} is {summary['status']}"
        return None

    return check


def refused(name: str, *extra: str, words=()) -> Case:
    return Case(name, setup=scripted(FULL, *extra), words=words)


def failed(name: str, body: str, words, *extra: str, kept=("regular-seed0",), **kw) -> Case:
    return Case(name, setup=scripted(body, *extra, seeds="0,1", **kw), words=words, expect="failed",
                check=runs_complete(*kept))  # fmt: skip


def _stopped_once(work: Path, outside: Path, templates: dict) -> list[str]:
    """A first compare whose script saves after epoch 1 and is then killed: the case's compare
    must resume it from its save, not train it again or average in half a run."""
    body = (
        START + "state = run.resume()\n"
        "for e in range(run.first_epoch, run.epochs):\n    " + LOG + "    run.save({'e': e})\n"
        "    if not os.path.exists('killed-once'):\n"
        "        open('killed-once', 'w').close(); os.kill(os.getpid(), signal.SIGKILL)\n"
        "run.finish()\n"
    )
    (work / "s.py").write_text(HEAD + body)
    argv = compare("s.py")
    fineprune(argv, work, timeout=60)
    return argv


def _resumed(work: Path) -> str | None:
    summary = json.loads((work / "cmp" / "s-data" / "regular-seed0" / "summary.json").read_text())
    if (summary["status"], summary["resumed_after_epochs"], summary["epochs_completed"]) != ("complete", [1], 2):
        return f"not resumed from its save: {summary['status']}, {summary['resumed_after_epochs']}"
    return None


SCRIPT_CASES = [
    refused("script-unknown-placeholder", "--script", "python s.py {sede}", words=("{sede}",)),
    refused("script-unmatched-brace", "--script", "python s.py {seed", words=("--script",)),
    refused("script-unbalanced-quote", "--script", "python 's.py {seed}", words=("--script",)),
    refused("script-positional-placeholder", "--script", "python s.py {}", words=("--script",)),
    refused("script-attribute-placeholder", "--script", "python s.py {seed.real}", words=("--script",)),
    refused("script-two-models", "--model", "a,b", words=("one model",)),
    refused("script-two-datasets", "--dataset", "a,b", words=("one dataset",)),
    refused("script-timeout-negative", "--script-timeout", "-1", words=("--script-timeout",)),
    refused("script-timeout-huge", "--script-timeout", str(10**20), words=("--script-timeout",)),
    refused("script-timeout-text", "--script-timeout", "soon", words=("--script-timeout",)),
    refused("script-with-bad-shorter", "--shorter", "1.5", words=("--shorter",)),
    refused("script-with-looks-no-until", "--looks", "2,3", words=("--until-decided",)),
    refused("script-with-idle-fine", "--policies", "regular,fine", "--epochs", "1", words=("prunes no epoch",)),
    refused("script-start-beyond-window", "--policies", "regular,fine", "--window", "2", "--start", "2",
            words=("--start",)),  # fmt: skip
    failed("script-crashes", "raise SystemExit('no data here')", ("no data here", ".script.log"), kept=()),
    failed("script-crashes-for-one-seed", "if seed: raise SystemExit('bad seed')\n" + FULL, ("bad seed",)),
    failed("script-never-starts", "print('trained on my own')", ("never called fineprune.start()",), kept=()),
    failed("script-never-finishes", START + "run.log(train_loss=1.0, test_accuracy=50.0)\n",
           ("without finishing its run",), kept=()),  # fmt: skip
    failed("script-lies-about-its-seed", FULL.replace("seed=seed", "seed=7"), ("but it trains seed 7",), kept=()),
    failed("script-lies-about-epochs", FULL.replace("epochs=epochs", "epochs=5"), ("but it trains epochs 5",),
           kept=()),  # fmt: skip
    failed("script-records-out-of-order", START + "run.log(train_loss=1.0, test_accuracy=50.0, epoch=2)\n",
           ("epoch 2 recorded where epoch 1 comes next",), kept=()),  # fmt: skip
    failed("script-records-too-many", START + "for e in range(5):\n    " + LOG, ("this run trains 2 epochs",),
           kept=()),  # fmt: skip
    failed("script-accuracy-as-fraction-x100-twice", START + "run.log(train_loss=1.0, test_accuracy=5000.0)\n",
           ("not a percentage",), kept=()),  # fmt: skip
    failed("script-killed-by-sigkill", "os.kill(os.getpid(), signal.SIGKILL)", ("SIGKILL",), kept=()),
    failed("script-floods-its-log", "sys.stdout.write('x' * 2_000_000 + '\\n'); raise SystemExit('flooded')",
           ("flooded",), kept=()),  # fmt: skip
    failed("script-hangs-under-jobs", "if seed: time.sleep(600)\n" + FULL, ("ran past --script-timeout 6 s",),
           "--jobs", "2", "--script-timeout", "6"),  # fmt: skip
    refused("script-not-found", "--script", "no-such-program {seed}", words=("no-such-program",)),
    Case("script-dry-run", setup=scripted(FULL, "--dry-run"), expect="done",
         check=lambda w: "the dry run wrote its runs" if (w / "cmp").exists() else None),
    Case("script-print-config", setup=scripted(FULL, "--print-config"), expect="done",
         check=lambda w: "print-config wrote its runs" if (w / "cmp").exists() else None),
    Case("script-killed-and-resumed", setup=_stopped_once, expect="done", check=_resumed),
    Case("script-regular-and-fine", setup=scripted(DRAWN, "--window", "2", "--start", "1", policies="regular,fine"),
         expect="done", check=runs_complete("regular-seed0", "fine-seed0")),  # fmt: skip
    Case("script-out-with-space", setup=scripted(FULL, "--out", "my runs"), expect="done",
         check=lambda w: None if (w / "my runs" / "s-data" / "regular-seed0" / "summary.json").exists() else "no run"),
]  # fmt: skip
