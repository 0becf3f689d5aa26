"""The README's and the docs pages' examples run as written: the library examples on toy data,
every shell line checked by the tool (the cheap ones run), and the tutorial end to end on a
small subset of its data."""

import re
import shlex
from pathlib import Path

import pytest
import torch

from conftest import tiny

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
TUTORIAL = DOCS / "tutorial.md"


def _pages(tutorial: bool = True) -> list[Path]:
    """The README and every docs page; the tutorial's lines build on each other, so the tests
    that run lines one by one from the repository leave it out and its own test runs it."""
    return [README, *(p for p in sorted(DOCS.rglob("*.md")) if tutorial or p != TUTORIAL)]


def _blocks(page: str, kind: str = "python") -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", (ROOT / page).read_text(), flags=re.S)


def _toy_scope():
    torch.manual_seed(0)
    x, y = torch.randn(300, 8), torch.randint(0, 3, (300,))
    return {"x": x, "y": y, "model": torch.nn.Linear(8, 3), "epochs": 8}


def _fit_loss(scope):
    return torch.nn.functional.cross_entropy(scope["model"](scope["x"]), scope["y"]).item()


@pytest.mark.parametrize("index", [0, 2])
def test_own_loop_examples_train(index):
    block = _blocks("docs/howto/own-loop.md")[index]
    scope = _toy_scope()
    scope["opt"] = torch.optim.SGD(scope["model"].parameters(), lr=0.1)
    before = _fit_loss(scope)
    exec(block, scope)
    assert _fit_loss(scope) < before
    trained = scope.get("plan") or scope.get("keep")
    assert trained is not None
    if "pruner" in scope:  # the paper's schedule of 8 epochs: window 2, start 1; epoch 8 prunes
        assert scope["pruner"].schedule.pruning_epochs(8) == [2, 4, 6, 8]
        assert scope["keep"].numel() == 300 - 90
    else:  # infobatch prunes below-mean samples up to 0.875 x 8 = epoch 7
        assert scope["plan"].samples == 300 and scope["policy"].plan(5).samples < 300


def test_own_loop_selective_backprop_example_selects_rows_and_trains():
    """8 epochs, Composer's defaults: epochs 5 to 8 start at 0.5 to 0.875 of the run, and their
    steps 0 and 2 (of 128, 128, 44 rows) forward the batch without gradients, then train 64 and 22."""
    block = _blocks("docs/howto/own-loop.md")[1]
    scope = _toy_scope()
    scope["opt"] = torch.optim.SGD(scope["model"].parameters(), lr=0.1)
    before, forwards = _fit_loss(scope), []
    scope["model"].register_forward_pre_hook(lambda m, a: forwards.append((torch.is_grad_enabled(), len(a[0]))))
    exec(block, scope)
    assert scope["policy"].name == "selective-backprop"
    selective = [(False, 128), (True, 64), (True, 128), (False, 44), (True, 22)]
    assert forwards == [(True, 128), (True, 128), (True, 44)] * 4 + selective * 4
    assert _fit_loss(scope) < before


def test_readme_library_example_trains_and_prunes():
    """The README's loop: fine-pruning with the paper's schedule scaled to 8 epochs (window 2,
    start 1: epochs 2, 4, 6, 8 leave out 30% of 300), and the model learns."""
    (block,) = _blocks("README.md")
    scope = _toy_scope()
    scope["opt"] = torch.optim.SGD(scope["model"].parameters(), lr=0.1)
    before = _fit_loss(scope)
    exec(block, scope)
    assert _fit_loss(scope) < before
    assert scope["plan"].samples == 300 - 90  # epoch 8, the last, prunes
    assert scope["policy"].plan(7).samples == 300  # an odd epoch does not


def test_every_python_block_of_the_pages_is_run_by_a_test_here():
    """A new example on a page needs its test above: the blocks each test runs, by page."""
    found = {str(p.relative_to(ROOT)): len(_blocks(str(p.relative_to(ROOT)))) for p in _pages()}
    assert {page: n for page, n in found.items() if n} == {
        "README.md": 1,
        "docs/howto/own-loop.md": 3,
        "docs/howto/dataloader.md": 2,
        "docs/howto/lightning.md": 1,
        "docs/howto/own-script.md": 1,  # examples/own_script.py, run by tests/test_script.py
        "docs/howto/timm.md": 6,  # run in order on timm's own parts by tests/test_timm_howto.py
    }


def test_pipeline_sampler_example_trains_and_prunes():
    """The DataLoader example: it trains, reaches the last epoch, and the policy counted."""
    scope = _toy_scope()
    scope["opt"] = torch.optim.SGD(scope["model"].parameters(), lr=0.1)
    before = _fit_loss(scope)
    exec(_blocks("docs/howto/dataloader.md")[0], scope)
    assert _fit_loss(scope) < before
    sampler = scope["sampler"]
    assert sampler.epoch == scope["epochs"] - 1
    sampler.sync()
    assert int(scope["policy"].scores.sum()) > 0


def test_pipeline_resume_example_continues_where_the_loop_stopped(tmp_path, monkeypatch):
    """The resume example after the DataLoader example stopped after its 4th epoch of 8: it
    continues with epoch 4 (0-based) and trains the same plans as one loop of 8 epochs."""
    monkeypatch.chdir(tmp_path)
    first, resume = _blocks("docs/howto/dataloader.md")
    whole = _toy_scope()
    whole["opt"] = torch.optim.SGD(whole["model"].parameters(), lr=0.1)
    exec(first, whole)
    whole["sampler"].sync()
    scope = _toy_scope()
    scope["opt"] = torch.optim.SGD(scope["model"].parameters(), lr=0.1)
    assert "range(epochs)" in first
    exec(first.replace("range(epochs)", "range(4)"), scope)  # stopped after epoch 3
    exec(resume, scope)
    scope["sampler"].sync()
    assert scope["sampler"].epoch == 7
    assert torch.equal(scope["policy"].scores, whole["policy"].scores)
    torch.testing.assert_close(scope["model"].weight, whole["model"].weight)


def test_pipeline_lightning_example_trains():
    """The Lightning example as its page shows it, on its own (it imports what it uses)."""
    pytest.importorskip("lightning", reason="the lightning extra is not installed")
    import warnings

    scope = _toy_scope()
    before = _fit_loss(scope)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on workers and logging intervals
        exec(_blocks("docs/howto/lightning.md")[0], scope)
    assert _fit_loss(scope) < before
    sampler = scope["sampler"]
    assert sampler.epoch == scope["epochs"] - 1 and int(sampler.policy.scores.sum()) > 0


def _shell_lines(tutorial: bool = True) -> list[list[str]]:
    """Every command of the pages' shell blocks, split into words, continuation lines joined."""
    return [words for words, _ in _shell_lines_with_comments(tutorial)]


def _readme_commands() -> list[list[str]]:
    """Every `fineprune ...` line of the pages' shell blocks."""
    return [words[1:] for words in _shell_lines() if words[0] == "fineprune"]


def test_every_readme_command_parses():
    """Each flag the README and the docs show exists on its command (nothing runs)."""
    import typer

    from fineprune_cli.cli import app

    group = typer.main.get_command(app)
    commands = _readme_commands()
    assert len(commands) >= 30
    assert {argv[0] for argv in _readme_commands_of(README)} >= {"train", "compare", "report", "estimate", "scale"}
    for argv in commands:
        command = group.commands[argv[0]]
        args = [a.replace("<run>", "x") for a in argv[1:]]
        try:
            command.make_context(argv[0], args)
        except typer.TyperException as exc:
            pytest.fail(f"docs: fineprune {' '.join(argv)}: {exc.format_message()}")


def _readme_commands_of(page: Path) -> list[list[str]]:
    return [w[1:] for w, _ in _lines_of(page) if w[0] == "fineprune"]


def test_readme_shows_each_command_and_the_three_compare_modes():
    """The README's one example per command, with compare's --jobs, Slurm and planned looks, and
    `train --resume`; and it stays short (the rest lives in docs/)."""
    commands = _readme_commands_of(README)
    compares = [" ".join(a) for a in commands if a[0] == "compare"]
    assert all(any(flag in c for c in compares) for flag in ("--jobs", "--executor slurm", "--until-decided --looks"))
    assert any(a[0] == "train" and "--resume" in a for a in commands)
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert "to the digit" not in text


def _flag(words: list[str], name: str) -> str:
    """The value of `name` among launcher words ('--name V' or '--name=V')."""
    for i, word in enumerate(words):
        if word == name:
            return words[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    raise AssertionError(f"docs: {shlex.join(words)} gives no {name}")


def _server_mode_examples() -> list[list[str]]:
    """The pages' async and mixed runs of several processes, as `fineprune` argv that the
    tool checks the same way: srun's tasks (--nodes x --ntasks-per-node, as each task would see
    them) become --nproc-per-node and --nnodes."""
    examples = []
    for words in _shell_lines():
        modes = [w for i, w in enumerate(words) if i and words[i - 1] == "--dist-mode"]
        if not any("async" in m or "mixed" in m for m in modes):
            continue
        if words[0] == "srun":
            at = words.index("fineprune")
            argv = words[at + 1 :] + [
                "--nproc-per-node",
                _flag(words[:at], "--ntasks-per-node"),
                "--nnodes",
                _flag(words[:at], "--nodes"),
                "--node-rank",
                "0",
                "--rdzv-endpoint",
                "node0:29400",
            ]
        else:
            assert words[0] == "fineprune", f"docs: {shlex.join(words)}: a launcher this test does not know"
            argv = words[1:]
        assert argv[0] == "scale" or "--nproc-per-node" in argv, f"docs: {shlex.join(words)}: one process"
        examples.append(argv)
    return examples


@pytest.mark.slow
def test_readme_async_and_mixed_examples_pass_the_tools_checks(tmp_path, monkeypatch):
    """Each example's batch divides over its (mixed groups of) workers as the tool demands
    before it loads anything: `train` as given, `scale` for each run it would start."""
    from conftest import invoke
    from fineprune_cli.cli import views
    from fineprune_cli.distributed import launch
    from fineprune_cli.drivers import scale
    from fineprune_cli.errors import ConfigError

    def check_run(cfg, job, out, where):
        """Instead of training: the `fineprune train` command scale would run, checked."""
        if job.processes > 1:
            config = tmp_path / "job.yaml"
            config.write_text(scale.job_config(cfg, job))
            argv = scale.train_command(job, config, tmp_path / "run", where)[3:]
            result = invoke(argv)
            if result.exit_code:
                raise ConfigError(f"{job}: {result.output.strip()}")
        return out

    monkeypatch.setattr(launch, "relaunch", lambda *args: 0)
    monkeypatch.setattr(scale, "run_one", check_run)
    monkeypatch.setattr(scale, "table", lambda *args: [])
    monkeypatch.setattr(scale, "write_tables", lambda *args: tmp_path / "scale.md")
    monkeypatch.setattr(views, "show_scale", lambda *args: None)
    examples = _server_mode_examples()
    assert sum(a[0] == "train" for a in examples) >= 2 and sum(a[0] == "scale" for a in examples) >= 3
    for argv in examples:
        extra = ["--out", str(tmp_path / "scale")] if argv[0] == "scale" else []
        result = invoke([*argv, *extra])
        assert result.exit_code == 0, f"docs: {shlex.join(argv)}: {result.output.strip()}"


def _srun_commands() -> list[str]:
    """Every srun command in the pages, in shell blocks and in the text."""
    text = "\n".join(p.read_text() for p in _pages()).replace("\\\n", " ")
    return [m.group(0) for m in re.finditer(r"\bsrun(\s+-[^\s`]+(\s+[^-\s`][^\s`]*)?)+", text)]


def test_every_readme_srun_ends_its_step_when_a_task_dies():
    """Without --kill-on-bad-exit a step goes on when one task dies (the others wait for it
    until --dist-timeout); with it, Slurm ends the step at once."""
    commands = _srun_commands()
    assert len(commands) >= 2
    for command in commands:
        assert "--kill-on-bad-exit=1" in command.split(), f"docs: {command}"


# --- every shell line of the pages: checked by the tool, the cheap ones run ------------------

NEEDS = ("needs", "after make")  # a line that cannot run on a fresh CPU clone says so in its comment


def _lines_of(page: Path) -> list[tuple[list[str], str]]:
    """(words, comment) of every command line of a page's shell blocks."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command, _, comment = line.partition("#")
            if command.strip():
                lines.append((shlex.split(command), comment))
    return lines


def _shell_lines_with_comments(tutorial: bool = True) -> list[tuple[list[str], str]]:
    return [line for page in _pages(tutorial) for line in _lines_of(page)]


def _needs_more_than_a_cpu_clone(words: list[str]) -> bool:
    """Data, machines or network that a fresh clone on one CPU machine does not have."""
    text = " ".join(words)
    return (
        any(w in ("cifar10", "cifar100", "--download", "--nnodes", "srun", "torchrun", "slurm") for w in words)
        or ".data/" in text
        or (words[0] == "make" and words[1] in ("reproduce", "cifar10-jpeg", "cifar10-lenet-cpu", "gpu"))
    )


def test_every_readme_line_runs_on_a_cpu_clone_or_says_what_it_needs():
    lines = _shell_lines_with_comments()
    assert len(lines) >= 40
    for words, comment in lines:
        if words[0] in ("fineprune", "make", "torchrun", "srun") and _needs_more_than_a_cpu_clone(words):
            assert any(n in comment for n in NEEDS), f"docs: {shlex.join(words)}: say what it needs"


def test_every_readme_make_line_names_a_target_and_its_variables():
    """`make -n` with the line's words: the target exists and the variables parse (nothing runs)."""
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    lines = [words for words, _ in _shell_lines_with_comments() if words[0] == "make"]
    assert {w[1] for w in lines} >= {"demo", "test", "reproduce", "cifar10-jpeg", "setup", "docs-settings"}
    for words in lines:
        done = subprocess.run(["make", "-n", "-C", str(ROOT), *words[1:]], capture_output=True, text=True)
        assert done.returncode == 0, f"docs: {shlex.join(words)}: {done.stderr.strip()}"


def _dry(monkeypatch):
    """Replace training by the checks a run makes before it trains: `train` validates its config
    (and a launch of several processes its layout), `resume` names its folder, `compare` plans
    and validates every run."""
    from fineprune_cli import runner
    from fineprune_cli.analysis.decide.plan import Plan
    from fineprune_cli.analysis.read import runs
    from fineprune_cli.cli import views
    from fineprune_cli.distributed import launch
    from fineprune_cli.drivers import compare, matrix
    from fineprune_cli.engine.setup.config import validate
    from fineprune_cli.sequential import looks

    checked = []

    def check_train(cfg, **kwargs):
        checked.append(validate(cfg))

    def check_resume(folder, **kwargs):
        checked.append(folder)

    def check_matrix(cfg, c, **kwargs):
        checked.extend(compare.job_config(cfg, job, c.out) for job in compare.plan(cfg, c))
        return []

    monkeypatch.setattr(runner, "train", check_train)
    monkeypatch.setattr(runner, "resume", check_resume)
    monkeypatch.setattr(launch, "relaunch", lambda *args: 0)
    monkeypatch.setattr(matrix, "run_matrix", check_matrix)
    monkeypatch.setattr(matrix, "refusals", compare.plan)  # not this machine's GPUs: the line says what it needs
    monkeypatch.setattr(matrix, "record_plan", lambda c, judging, jobs, looks=None: Plan(judging, tuple(looks or ())))
    monkeypatch.setattr(views, "show_compare", lambda *args: None)
    monkeypatch.setattr(runs, "load_runs", lambda dirs: ([], []))  # what compare then reports: nothing
    monkeypatch.setattr(looks, "load_runs", lambda dirs: ([], []))  # nor the looks: no looks.json in results/
    return checked


def test_every_readme_train_and_compare_passes_the_tools_checks(monkeypatch):
    """Each `train` and `compare` line of the README and the docs, as written, passes every
    check a run makes before it loads data: a flag that cannot take effect, a schedule that
    prunes no epoch, a bad layout would stop it here."""
    from conftest import invoke

    checked = _dry(monkeypatch)
    lines = [
        w[1:]
        for w, _ in _shell_lines_with_comments(tutorial=False)
        if w[0] == "fineprune" and w[1] in ("train", "compare")
    ]
    assert len(lines) >= 15
    for argv in lines:
        before = len(checked)
        # --print-config validates as --dry-run does, without timing steps of the model
        result = invoke(["--print-config" if a == "--dry-run" else a for a in argv])
        assert result.exit_code == 0, f"docs: fineprune {shlex.join(argv)}: {result.output.strip()}"
        assert len(checked) > before or "--nproc-per-node" in argv or "--dry-run" in argv, (
            f"docs: fineprune {shlex.join(argv)}: nothing checked"
        )


def test_readme_epochs_30_prune_example_prunes_a_proportionate_schedule(monkeypatch):
    from conftest import invoke
    from fineprune_cli.pruning.schedule import PruneSchedule

    checked = _dry(monkeypatch)
    (argv,) = [
        w[1:]
        for w, _ in _shell_lines_with_comments(tutorial=False)
        if w[:2] == ["fineprune", "train"] and "30" in w and "--prune" in w
    ]
    assert invoke(argv).exit_code == 0
    cfg = checked[-1]
    assert cfg.train.milestones == [9, 18, 24] and (cfg.prune.window, cfg.prune.start) == (9, 5)
    assert len(PruneSchedule.from_config(cfg.prune).pruning_epochs(30)) == 11  # 36.7%; 200 epochs: 36%


FMNIST = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")


def _without_out(argv: list[str]) -> list[str]:
    """A line less its --out: two lines that differ only there train the same run."""
    at = argv.index("--out") if "--out" in argv else len(argv)
    return argv[:at] + argv[at + 2 :]


TINY = tiny(model=None, dataset=None, epochs=None, subset=60, test_subset=50, batch_size=30)


@pytest.mark.slow
@pytest.mark.skipif(not FMNIST.exists(), reason="Fashion-MNIST is not installed (make setup installs it)")
def test_readme_fashion_mnist_train_lines_run_on_tiny_settings(tmp_path):
    """The cheap lines, actually trained: as written, plus a tiny subset and a folder of ours."""
    import json

    from conftest import invoke

    lines = [
        w[1:]
        for w, c in _shell_lines_with_comments(tutorial=False)
        if w[:2] == ["fineprune", "train"]
        and "fashion-mnist" in w
        and "--nproc-per-node" not in w
        and "--dry-run" not in w
    ]
    lines = [a for i, a in enumerate(lines) if _without_out(a) not in map(_without_out, lines[:i])]  # once each
    assert len(lines) >= 4
    for i, argv in enumerate(lines):
        # a line that leaves --epochs at its default (the paper's 200) trains 10 here: 200 tiny
        # epochs would check nothing more, at a third of this test's time
        epochs = [] if "--epochs" in argv else ["--epochs", "10"]
        result = invoke([*argv, *TINY, *epochs, "--out", str(tmp_path / str(i)), "--json"])
        assert result.exit_code == 0, f"docs: fineprune {shlex.join(argv)}: {result.output.strip()}"
        s = json.loads(result.output)
        assert s["status"] == "complete" and (s["policy"] == "regular") == (
            "--prune" not in argv and "--policy" not in argv
        )
        if s["policy"] != "regular":
            assert s["pruning_epochs"], f"docs: fineprune {shlex.join(argv)} pruned no epoch"


def test_readme_estimate_and_report_lines_run(tmp_path, monkeypatch):
    """`estimate` (no training) and `report` over the committed demo runs run as written, the
    report into tmp_path instead of its ignored folder; a <run> placeholder takes a demo run.
    A line whose comment says what it needs (runs of your own) is only parsed."""
    from conftest import invoke

    monkeypatch.chdir(ROOT)
    run = "results/demo/runs/lenet-fashion-mnist/fine-seed0"
    lines = [
        w[1:]
        for w, c in _shell_lines_with_comments(tutorial=False)
        if w[0] == "fineprune" and w[1] in ("estimate", "report") and not any(n in c for n in NEEDS)
    ]
    assert sum(a[0] == "estimate" for a in lines) >= 4 and sum(a[0] == "report" for a in lines) >= 2
    for argv in lines:
        argv = [a.replace("results/runs/<run>", run) for a in argv]
        if argv[0] == "report":
            argv = argv[: argv.index("--out")] + ["--out", str(tmp_path / "report"), "--no-plots"]
        result = invoke(argv)
        assert result.exit_code == 0, f"docs: fineprune {shlex.join(argv)}: {result.output.strip()}"


# --- the tutorial, end to end ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not FMNIST.exists(), reason="Fashion-MNIST is not installed (make setup installs it)")
def test_tutorial_runs_as_written_and_ends_in_a_decision(tmp_path, monkeypatch):
    """Every `fineprune` line of the tutorial, in its order, in a fresh folder: on 300 training
    and 200 test images, one run at a time (`--jobs` only moves runs into processes of their
    own; tests/test_jobs.py covers it). The estimate shows the pruning epochs the page names,
    the dry run trains nothing, the comparison writes its looks, and the report decides."""
    import csv
    import json

    from conftest import invoke

    monkeypatch.chdir(tmp_path)
    lines = [w[1:] for w, _ in _lines_of(TUTORIAL) if w[0] == "fineprune"]
    assert [a[0] for a in lines] == ["estimate", "compare", "compare", "report"]
    for argv in lines:
        if argv[0] == "compare":
            at = argv.index("--jobs")
            argv = argv[:at] + argv[at + 2 :] + ["--subset", "300", "--test-subset", "200", "--device", "cpu"]
        if argv[0] == "estimate":
            argv = [*argv, "--json"]
        result = invoke(argv)
        assert result.exit_code == 0, f"tutorial: fineprune {shlex.join(argv)}: {result.output.strip()}"
        if argv[0] == "estimate":
            assert json.loads(result.output)["pruning_epochs"] == [2, 4, 6, 8]  # as the page says
        if "--dry-run" in argv:
            assert not Path("results/runs/tutorial").exists()
    assert (tmp_path / "results/runs/tutorial/looks.json").exists()
    plan = json.loads((tmp_path / "results/runs/tutorial/plan.json").read_text())
    assert plan["looks"] == [3, 5] and plan["runs_before"] == 0  # recorded before the first run
    with open(tmp_path / "results/runs/tutorial-report/summary.csv") as f:
        rows = {r["policy"]: r for r in csv.DictReader(f)}
    assert rows["fine"]["decision"] in ("worth it", "not worth it", "can't tell yet")
    assert int(rows["regular"]["seeds"]) in (3, 5)
