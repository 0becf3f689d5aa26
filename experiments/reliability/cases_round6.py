"""Hostile cases of issue 49 (round 6): code run from a run folder, a plan that can be edited, and
`--model module:factory` ending in tracebacks.

- A run folder is data: a planted pickle in any file the tool loads from it (a script's
  checkpoint that `run.resume()` reads, the built-in trainer's checkpoint, score snapshots, the
  image cache) never runs (the payload would create PWNED); a script's `run.save()` of what a
  resume could not load is refused when it is written, and one of state_dicts still resumes.
- plan.json edited after the runs, written over runs made without it, or found in a parent
  folder over another comparison's runs: the report says *post hoc*; a plan that is not one
  (looks [0, -5], duplicate seeds, unknown keys...) is refused in one line naming the file; the
  plan nearest a run applies to it, whatever the folders are named.
- `--model module:factory` that cannot give a model for the data (an import or a call that
  raises, arguments it cannot be given, outputs of another shape) is one line, before anything
  is written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

from cases import PICKLE_CODE, TINY, Case, with_run
from cases_round5_script import HEAD, LOG, START, compare, runs_complete, scripted
from forked import fineprune

# -- the template: a compare of regular and fine over seeds 0 and 1, its plan recorded first ---------------

COMPARED = ["--model", "lenet", "--dataset", "synthetic", "--subset", "64", "--test-subset", "32", "--device", "cpu",
            "--epochs", "2", "--window", "2", "--start", "1", "--policies", "regular,fine", "--seeds", "0,1"]  # fmt: skip
RUNS = ("regular-seed0", "fine-seed0", "regular-seed1", "fine-seed1")


def make_compared(base: Path, train: Callable[..., None]) -> Path:
    out = base / "compared"
    train([*COMPARED, "--out", str(out)], base, "compare")
    return out


# -- 1. code executed from a run folder ------------------------------------------------------------------

RESUMING = (
    START + "state = run.resume()\n"
    "for e in range(run.first_epoch, run.epochs):\n    " + LOG + "    run.save({'e': e})\nrun.finish()\n"
)
# a model and its optimizer (with momentum state) and the sampler saved each epoch, the first attempt
# killed after epoch 1: the second resumes them
STATE_DICTS = """import torch
import fineprune
run = fineprune.start(num_train=8, seed=seed, epochs=epochs)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sampler = run.sampler()
state = run.resume()
if state is not None:
    model.load_state_dict(state['model']); opt.load_state_dict(state['opt']); sampler.load_state_dict(state['sampler'])
    assert state['step'] == 1 and state['lr'] == [0.1] and state['name'] == 'linear', state
for e in range(run.first_epoch, run.epochs):
    sampler.set_epoch(e)
    list(sampler)
    model(torch.ones(3, 4)).sum().backward(); opt.step()
    run.log(train_loss=1.0 / (e + 1), test_accuracy=50.0 + e)
    run.save({'model': model.state_dict(), 'opt': opt.state_dict(), 'sampler': sampler.state_dict(),
              'step': e + 1, 'lr': [0.1], 'name': 'linear', 'seen': {1, 2}, 'shape': (3, 4)})
    if not os.path.exists('killed-once'):
        open('killed-once', 'w').close(); os.kill(os.getpid(), signal.SIGKILL)
run.finish()
"""


def _script_run(work: Path) -> Path:
    return work / "cmp" / "s-data" / "regular-seed0"


def _planted_script_checkpoint(payload: bytes | Callable[[Path], None]):
    """A script run folder holding a planted checkpoint.pt, which the script's `run.resume()` reads."""

    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        (work / "s.py").write_text(HEAD + RESUMING)
        _script_run(work).mkdir(parents=True)
        if isinstance(payload, bytes):
            (_script_run(work) / "checkpoint.pt").write_bytes(payload)
        else:
            payload(_script_run(work) / "checkpoint.pt")
        return compare("s.py")

    return setup


class _Payload:
    """Pickled, it calls os.system when unpickled: torch.save writes it in its own zip format."""

    def __reduce__(self):
        import os

        return (os.system, ("touch PWNED",))


def _torch_payload(path: Path) -> None:
    import torch

    torch.save({"epoch": 1, "state": _Payload(), "totals": {}}, path)


def _killed_once(body: str):
    """A first compare whose script is killed after saving epoch 1; the case's compare resumes it."""

    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        (work / "s.py").write_text(HEAD + body)
        argv = compare("s.py")
        fineprune(argv, work, timeout=60)
        return argv

    return setup


def _resumed(work: Path) -> str | None:
    summary = json.loads((_script_run(work) / "summary.json").read_text())
    if (summary["status"], summary["resumed_after_epochs"]) != ("complete", [1]):
        return f"not resumed from its save: {summary['status']}, {summary['resumed_after_epochs']}"
    return None


def _compared_copy(work: Path, templates: dict, to: str = "cmp") -> Path:
    shutil.copytree(templates["compared"], work / to)
    return work / to


def _snapshot_planted(work: Path, outside: Path, templates: dict) -> list[str]:
    run = _compared_copy(work, templates) / "lenet-synthetic" / "fine-seed0"
    (run / "dropping_counts_window0.pt").write_bytes(PICKLE_CODE)
    _torch_payload(run / "dropping_counts_window1.pt")
    return ["report", "cmp", "--out", "rep", "--no-plots"]


def _folder_cache_planted(command: str):
    """An image folder whose decoded cache (in the user's cache folder) is a planted pickle."""

    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        from fineprune_cli.engine.inputs.imagefolder import cache_path

        shutil.copytree(templates["folder"], work / "imgs")
        cache = cache_path(work / "imgs")
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_bytes(PICKLE_CODE)
        data = ["--model", "lenet", "--dataset", "folder", "--data-dir", "imgs", "--device", "cpu", "--epochs", "1"]
        return [*(["compare", "--policies", "regular", "--dry-run"] if command == "dry-run" else ["train"]), *data,
                "--out", "r"]  # fmt: skip

    return setup


def _exists(path: str) -> Callable[[Path], str | None]:
    return lambda work: None if (work / path).exists() else f"{path} was not written"


CODE_CASES = [
    Case(
        "r6-script-resume-planted-pickle",
        setup=_planted_script_checkpoint(PICKLE_CODE),
        expect="failed",
        words=("checkpoint.pt",),
        check=runs_complete(),
    ),
    Case(
        "r6-script-resume-planted-torch-zip",
        setup=_planted_script_checkpoint(_torch_payload),
        expect="failed",
        words=("checkpoint.pt", "system"),
        check=runs_complete(),
    ),
    Case(
        "r6-script-save-numpy",
        setup=scripted(RESUMING.replace("{'e': e}", "{'e': __import__('numpy').ones(2)}")),
        expect="failed",
        words=("run.save", "numpy"),
        check=runs_complete(),
    ),
    Case(
        "r6-script-save-a-function",
        setup=scripted(RESUMING.replace("{'e': e}", "{'f': print}")),
        expect="failed",
        words=("run.save", "builtins.print"),
        check=runs_complete(),
    ),
    Case("r6-script-resumes-state-dicts", setup=_killed_once(STATE_DICTS), expect="done", check=_resumed),
    with_run(
        "r6-resume-planted-torch-zip",
        lambda run, o: _torch_payload(run / "checkpoint.pt"),
        ["train", "--resume", "run"],
        words=("checkpoint.pt", "system"),
    ),
    Case("r6-report-planted-snapshots", setup=_snapshot_planted, expect="done", check=_exists("rep/index.md")),
    Case(
        "r6-train-planted-folder-cache",
        setup=_folder_cache_planted("train"),
        expect="done",
        check=_exists("r/summary.json"),
    ),
    Case("r6-dry-run-planted-folder-cache", setup=_folder_cache_planted("dry-run"), expect="done"),
]


# -- 2. a plan that can be edited -------------------------------------------------------------------------


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data, indent=2))


def _edit_plan(path: Path, edit: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=2))


def _judging(**values) -> Callable[[dict], None]:
    return lambda plan: plan["judging"].update(values)


def _top(**values) -> Callable[[dict], None]:
    return lambda plan: plan.update(values)


def _made_without_a_plan(folder: Path) -> None:
    """Its runs as a version that records the plan writes runs made with none in force."""
    for summary in folder.rglob("summary.json"):
        _edit_json(summary, plan="")


def _report(folder: str = "cmp") -> list[str]:
    return ["report", folder, "--out", "rep", "--no-plots"]


def _index_says(*words: str, absent: tuple[str, ...] = ()) -> Callable[[Path], str | None]:
    def check(work: Path) -> str | None:
        index = (work / "rep" / "index.md").read_text()
        plan_lines = [ln for ln in index.splitlines() if ln.startswith(("Plan:", "**Post hoc.**"))]
        missing = [w for w in words if w not in index]
        wrong = [w for w in absent if w in index]
        return f"index.md says {plan_lines} (lacks {missing}, has {wrong})" if missing or wrong else None

    return check


POST_HOC = _index_says("**Post hoc.**")
KEPT = _index_says("these decisions keep to it", absent=("Post hoc",))


def _edited(edit: Callable[[dict], None]):
    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        _edit_plan(_compared_copy(work, templates) / "plan.json", edit)
        return _report()

    return setup


def edited(name: str, edit: Callable[[dict], None], check=POST_HOC) -> Case:
    return Case(f"r6-plan-{name}", setup=_edited(edit), expect="done", check=check)


def invalid(name: str, edit: Callable[[dict], None], *words: str, command: str = "report") -> Case:
    """A plan that is not one: refused in one line naming the file (report, or compare again)."""

    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        _edit_plan(_compared_copy(work, templates) / "plan.json", edit)
        return _report() if command == "report" else ["compare", *COMPARED, "--out", "cmp"]

    return Case(f"r6-plan-invalid-{name}", setup=setup, words=("plan.json", *words))


def _text(edit: Callable[[str], str]):
    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        plan = _compared_copy(work, templates) / "plan.json"
        plan.write_text(edit(plan.read_text()))
        return _report()

    return setup


def _written_over_trained(work: Path, outside: Path, templates: dict) -> list[str]:
    """Runs made by `fineprune train`, then a plan.json (a compare's) put over them by hand."""
    shutil.copytree(templates["run"], work / "cmp" / "regular")
    shutil.copytree(templates["pruned"], work / "cmp" / "fine")
    shutil.copy(templates["compared"] / "plan.json", work / "cmp" / "plan.json")
    _edit_plan(work / "cmp" / "plan.json", _top(seeds=[0]))
    return _report()


def _after_runs_zeroed(work: Path, outside: Path, templates: dict) -> list[str]:
    """A plan recorded after its 4 runs (they were made with none), its runs_before then set to 0."""
    cmp = _compared_copy(work, templates)
    _made_without_a_plan(cmp)
    return _report()


def _parent(of: str):
    """`a/plan.json` over the runs of `a/b`: runs made by `train` (`of` 'trained'), or a comparison
    of its own whose plan.json is gone, under a parent plan of another margin (`of` 'compared')."""

    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        (work / "a").mkdir()
        shutil.copy(templates["compared"] / "plan.json", work / "a" / "plan.json")
        if of == "trained":
            shutil.copytree(templates["run"], work / "a" / "b" / "regular")
            shutil.copytree(templates["pruned"], work / "a" / "b" / "fine")
        else:
            shutil.copytree(templates["compared"], work / "a" / "b")
            (work / "a" / "b" / "plan.json").unlink()
            _edit_plan(work / "a" / "plan.json", _judging(margin=0.5, min_gain=0.5))
        return _report("a/b")

    return setup


def _nested(read: str):
    """`p/plan.json` (another margin, over no runs of its own) above `p/sub`, a whole comparison
    with its own plan: the runs of `p/sub` keep to their own plan, whichever folder is read."""

    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        (work / "p").mkdir()
        shutil.copytree(templates["compared"], work / "p" / "sub")
        shutil.copy(templates["compared"] / "plan.json", work / "p" / "plan.json")
        _edit_plan(work / "p" / "plan.json", _judging(margin=0.5, min_gain=0.5))
        return _report(read)

    return setup


def _siblings(stale: str, real: str):
    """x/<stale> holds only a plan recorded before any run (a comparison never run); x/<real> a
    comparison whose plan was recorded after its 4 runs: the same rules, family and seeds. Read
    together, the runs' own plan says post hoc, whichever name sorts first."""

    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        cmp = _compared_copy(work, templates, f"x/{real}")
        _made_without_a_plan(cmp)
        _edit_plan(cmp / "plan.json", _top(runs_before=4, note="the runs came first"))
        (work / "x" / stale).mkdir()
        shutil.copy(templates["compared"] / "plan.json", work / "x" / stale / "plan.json")
        return _report("x")

    return setup


def _reformatted(work: Path, outside: Path, templates: dict) -> list[str]:
    """The same plan, its JSON written again another way (no indent, keys reversed)."""
    plan = _compared_copy(work, templates) / "plan.json"
    data = json.loads(plan.read_text())
    plan.write_text(json.dumps(dict(reversed(list(data.items())))))
    return _report()


def _older_runs(work: Path, outside: Path, templates: dict) -> list[str]:
    """Runs recorded before runs recorded their plan (no `plan` key in summary.json, nor `run.plan`
    in config.yaml: a summary that lost only its own is a case of round 7): judged as before."""
    for summary in _compared_copy(work, templates).rglob("summary.json"):
        data = json.loads(summary.read_text())
        data.pop("plan", None)
        summary.write_text(json.dumps(data))
        config = summary.parent / "config.yaml"
        config.write_text("".join(ln for ln in config.read_text().splitlines(True) if not ln.startswith("  plan: ")))
    return _report()


PLAN_CASES = [
    edited("margin-edited-after-runs", _judging(margin=15)),
    edited("alpha-edited-after-runs", _judging(alpha=0.5)),
    edited("seeds-edited-after-runs", _top(seeds=[0, 1, 2])),
    edited("family-edited-after-runs", lambda p: p["family"]["policies"].append("random")),
    edited("recorded-date-edited", _top(recorded="2020-01-01T00:00:00Z")),
    Case("r6-plan-untouched", setup=_edited(lambda p: None), expect="done", check=KEPT),
    Case("r6-plan-reformatted", setup=_reformatted, expect="done", check=KEPT),
    Case("r6-plan-older-runs-without-digest", setup=_older_runs, expect="done", check=KEPT),
    Case("r6-plan-written-over-trained-runs", setup=_written_over_trained, expect="done", check=POST_HOC),
    Case("r6-plan-recorded-after-runs-zeroed", setup=_after_runs_zeroed, expect="done", check=POST_HOC),
    Case("r6-plan-parent-over-trained-runs", setup=_parent("trained"), expect="done", check=POST_HOC),
    Case("r6-plan-parent-over-other-compare", setup=_parent("compared"), expect="done", check=POST_HOC),
    Case("r6-plan-nested-read-inner", setup=_nested("p/sub"), expect="done", check=KEPT),
    Case("r6-plan-nested-read-outer", setup=_nested("p"), expect="done", check=KEPT),
    Case("r6-plan-siblings-stale-sorts-first", setup=_siblings("aaa", "zzz"), expect="done", check=POST_HOC),
    Case("r6-plan-siblings-stale-sorts-last", setup=_siblings("zzz", "aaa"), expect="done", check=POST_HOC),
    invalid("looks-zero-negative", _top(looks=[0, -5]), "looks"),
    invalid("looks-decreasing", _top(looks=[5, 3], seeds=[]), "looks"),
    invalid("looks-one-seed", _top(looks=[1, 3], seeds=[]), "looks"),
    invalid("looks-text", _top(looks="3,5"), "looks"),
    invalid("looks-float", _top(looks=[2.5, 4]), "looks"),
    invalid("seeds-negative", _top(seeds=[-1, 0]), "seeds"),
    invalid("seeds-repeated", _top(seeds=[0, 0, 1]), "seeds"),
    invalid("seeds-bool", _top(seeds=[True, 0]), "seeds"),
    invalid("alpha-above-half", _judging(alpha=2), "alpha"),
    invalid("alpha-zero", _judging(alpha=0), "alpha"),
    invalid("margin-negative", _judging(margin=-1), "margin"),
    invalid("margin-huge", _judging(margin=1e300), "margin"),
    invalid("margin-text", _judging(margin="wide"), "margin"),
    invalid("margin-missing", lambda p: p["judging"].pop("margin"), "margin"),
    invalid("min-gain-above-100", _judging(min_gain=200), "min_gain"),
    invalid("correction-unknown", _judging(family="holm"), "family"),
    invalid("allocation-unknown", _judging(allocation="early"), "allocation"),
    invalid("judging-unknown-key", _judging(power=0.8), "power"),
    invalid("judging-a-list", _top(judging=[0.3]), "judging"),
    invalid("unknown-key", _top(margin=0.3), "margin"),
    invalid("family-no-models", lambda p: p["family"].update(models=[]), "family.models"),
    invalid("family-empty-name", lambda p: p["family"].update(models=[""]), "family"),
    invalid("family-number-name", lambda p: p["family"].update(datasets=[3]), "family"),
    invalid("family-missing-list", lambda p: p["family"].pop("models"), "family"),
    invalid("family-unknown-key", lambda p: p["family"].update(contexts=2), "contexts"),
    invalid("family-a-string", _top(family="fine"), "family"),
    invalid("runs-before-negative", _top(runs_before=-3), "runs_before"),
    invalid("runs-before-float", _top(runs_before=1.5), "runs_before"),
    invalid("recorded-a-number", _top(recorded=5), "recorded"),
    invalid("note-a-list", _top(note=["x"]), "note"),
    invalid("variance-a-number", _top(variance=1), "variance"),
    invalid("looks-zero-under-compare", _top(looks=[0, -5]), "looks", command="compare"),
    invalid("margin-text-under-compare", _judging(margin="wide"), "margin", command="compare"),
    Case("r6-plan-invalid-a-list", setup=_text(lambda t: "[1, 2]"), words=("plan.json",)),
    Case(
        "r6-plan-invalid-nan-margin",
        setup=_text(lambda t: t.replace('"margin": 0.3', '"margin": NaN')),
        words=("plan.json", "margin"),
    ),
    Case("r6-plan-invalid-cut-short", setup=_text(lambda t: t[: len(t) // 2]), words=("plan.json",)),
]


# -- 3. --model module:factory ------------------------------------------------------------------------------

NETS = '''import sys
import torch
from torch import nn


class Head(nn.Module):
    """Pooled features to `outputs` logits, shaped by `shape` (a tuple, a flat tensor...)."""

    def __init__(self, channels, outputs, shape=None):
        super().__init__()
        self.fc, self.shape = nn.Linear(channels, outputs), shape

    def forward(self, x):
        y = self.fc(x.mean(dim=(2, 3)))
        return self.shape(y) if self.shape else y


def good(in_channels, num_classes):
    return Head(in_channels, num_classes)


def good_positional_only(in_channels, num_classes, /):
    return Head(in_channels, num_classes)


def good_no_arguments():
    return Head(3, 10)


def raises(in_channels, num_classes):
    raise ValueError("width must be even\\nsecond line")


def exits(in_channels, num_classes):
    sys.exit(0)


def needs_width(width):
    return Head(3, width)


def needs_depth(in_channels, num_classes, depth):
    return Head(in_channels, num_classes)


def fewer_classes(in_channels, num_classes):
    return Head(in_channels, 5)


def more_classes(in_channels, num_classes):
    return Head(in_channels, 100)


def a_tuple(in_channels, num_classes):
    return Head(in_channels, num_classes, lambda y: (y, y))


def flat(in_channels, num_classes):
    return Head(in_channels, num_classes, lambda y: y.flatten())


def other_channels(in_channels, num_classes):
    return nn.Sequential(nn.Conv2d(in_channels + 4, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, num_classes))


def doubles(in_channels, num_classes):
    return Head(in_channels, num_classes).double()


class NoParameters(nn.Module):
    def forward(self, x):
        return torch.zeros(x.shape[0], 10)


def no_parameters(in_channels, num_classes):
    return NoParameters()


def returns_class(in_channels, num_classes):
    return Head


def returns_none(in_channels, num_classes):
    return None
'''
BROKEN = {
    "import_raises": "raise RuntimeError('no GPU on this machine')\n",
    "syntax_error": "def build(:\n    pass\n",
    "import_exits": "import sys\nsys.exit(0)\n",
    "missing_dependency": "import a_package_nobody_installed\n",
}


def factory(name: str, words=(), command: str = "train", expect: str = "refused", check=None) -> Case:
    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        (work / "nets.py").write_text(NETS)
        for module, text in BROKEN.items():
            (work / f"{module}.py").write_text(text)
        return [command, "--model", name, *TINY[2:-2], *(["--policies", "regular"] if command == "compare" else []),
                "--out", "r"]  # fmt: skip

    return Case(f"r6-factory-{command}-{name.replace(':', '-')}", setup=setup, words=words, expect=expect, check=check)


FACTORY_CASES = [
    factory("import_raises:build", ("import_raises", "RuntimeError", "no GPU on this machine")),
    factory("syntax_error:build", ("syntax_error", "SyntaxError")),
    factory("import_exits:build", ("import_exits", "SystemExit")),
    factory("missing_dependency:build", ("ModuleNotFoundError", "a_package_nobody_installed")),
    factory("no_such_module:build", ("no_such_module",)),
    factory("nets:no_such_factory", ("no_such_factory",)),
    factory("nets:Head.fc", ("package.module:factory",)),
    factory("nets:raises", ("nets:raises", "ValueError", "width must be even")),
    factory("nets:exits", ("nets:exits", "SystemExit")),
    factory("nets:needs_width", ("width", "factory(in_channels, num_classes)")),
    factory("nets:needs_depth", ("depth", "factory(in_channels, num_classes)")),
    factory("nets:fewer_classes", ("(2, 5)", "(2, 10)", "10 classes")),
    factory("nets:more_classes", ("(2, 100)", "(2, 10)")),
    factory("nets:a_tuple", ("tuple", "(2, 10)")),
    factory("nets:flat", ("(20,)", "(2, 10)")),
    factory("nets:other_channels", ("nets:other_channels", "RuntimeError")),
    factory("nets:doubles", ("nets:doubles", "RuntimeError")),
    factory("nets:no_parameters", ("no trainable parameters",)),
    factory("nets:returns_class", ("not a torch.nn.Module",)),
    factory("nets:returns_none", ("not a torch.nn.Module",)),
    factory("nets:raises", ("nets:raises", "ValueError"), command="compare"),
    factory("nets:fewer_classes", ("(2, 5)", "(2, 10)"), command="compare"),
    factory("nets:needs_width", ("factory(in_channels, num_classes)",), command="compare"),
    factory("nets:good", expect="done", check=_exists("r/summary.json")),
    factory("nets:good_positional_only", expect="done", check=_exists("r/summary.json")),
    factory("nets:good_no_arguments", expect="done", check=_exists("r/summary.json")),
]

ROUND6_CASES = CODE_CASES + PLAN_CASES + FACTORY_CASES
