"""The documentation site: it builds in MkDocs' strict mode (no broken link, no page left out of
the nav), the generated settings reference is current, and every policy has its page."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "settings.md"


def _nav_pages() -> list[str]:
    """Every page the nav of mkdocs.yml names."""
    found: list[str] = []

    def walk(node):
        if isinstance(node, str):
            found.append(node)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    return found


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed (the test extra installs mkdocs-material)",
)
def test_site_builds_strictly_without_a_warning(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # Material's end-of-life banner
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "WARNING" not in output, output
    # opened from disk (issue 41): pages are files, linked as such, and search needs no server
    site = tmp_path / "site"
    assert (site / "tutorial.html").is_file() and not (site / "tutorial").exists()
    assert 'href="tutorial.html"' in (site / "index.html").read_text()
    assert (site / "search" / "search_index.js").is_file()
    assert 'src="plots/cifar10-lenet-curves.png"' in (site / "results.html").read_text()
    assert (site / "reference" / "settings.html").exists()


# the plots docs/results.md shows, copied from the committed result folders that made them
DOC_PLOTS = {
    "docs/plots/cifar10-lenet-curves.png": "results/cifar10-jpeg-lenet-cpu/plots/curves-lenet-cifar-10-jpeg-q75.png",
    "docs/plots/fashion-mnist-tradeoff.png": "results/policies/fashion-mnist/plots/tradeoff.png",
}


def test_the_results_pages_plots_are_the_result_folders_own():
    for copy, source in DOC_PLOTS.items():
        assert (ROOT / copy).read_bytes() == (ROOT / source).read_bytes(), f"{copy} is not {source}: copy it again"
        assert f"]({Path(copy).relative_to('docs').as_posix()})" in (ROOT / "docs" / "results.md").read_text()


def test_settings_page_is_current():
    from fineprune_cli.cli.reference import settings_page

    assert PAGE.read_text() == settings_page(), (
        "docs/reference/settings.md is stale: run `make docs-settings` and commit it"
    )


def _row(page: str, key: str) -> str:
    (row,) = [line for line in page.splitlines() if line.startswith(f"| `{key}` |")]
    return row


def test_settings_page_reads_each_declaration():
    """Rows carry what the declaration says: the check's own rule (learned from a value it
    refuses), the choices, a default stated in the help, and the commands that take the flag."""
    from fineprune_cli.cli.reference import settings_page

    page = settings_page()
    assert "must be between 1 and 64" in _row(page, "model.widen")  # between(1, MAX_WIDEN)
    assert "strictly increasing epochs" in _row(page, "train.milestones")  # optional(_increasing)
    assert "must be in (0, 1]" in _row(page, "prune.anneal")  # a lambda, optional
    assert "one of: auto, device, stream" in _row(page, "data.loader")
    assert "30% of --epochs" in _row(page, "prune.window")  # stated, not `null`
    assert "`0.0005`" in _row(page, "train.weight_decay")  # declared, no help default
    assert "| — | `0.0005`" in _row(page, "train.weight_decay")  # flag="": no flag
    jobs, epochs = _row(page, "compare.jobs"), _row(page, "train.epochs")
    assert "| compare |" in jobs and "| compare, estimate, scale, train |" in epochs
    assert "`--resume`" in page and "`--margin`" in page  # options that are not settings


def test_every_policy_has_a_page_in_the_nav_and_its_module_links_it():
    from fineprune_cli.pruning.registry import get, list_policies

    nav = _nav_pages()
    for name in list_policies():
        page = f"policies/{name}.md"
        assert (ROOT / "docs" / page).exists() and page in nav, f"{name}: no docs/{page} in the nav"
        module = sys.modules[get(name).__module__]
        assert f"docs/{page}" in (module.__doc__ or ""), f"{module.__name__}: its docstring does not link docs/{page}"
        assert len(module.__doc__.strip().splitlines()) <= 6, (
            f"{module.__name__}: the reading notes belong in docs/{page}"
        )


def test_every_page_is_in_the_nav():
    """The strict build warns about a page left out of the nav only when mkdocs is installed;
    this holds without it."""
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages == set(_nav_pages())


def test_readme_links_point_at_pages_that_exist():
    links = re.findall(r"\]\(((?:docs/)[^)#]+)", (ROOT / "README.md").read_text())
    assert len(links) >= 15
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


CODE_WIDTH = 90  # what the site's code blocks show before cutting a line


def test_shell_lines_of_the_docs_fit_their_code_blocks():
    """Long command lines were cut in the site's code blocks (issue 41): a shell line wraps with
    `\\` continuations instead."""
    long = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.S):
            long += [f"{page.name}: {line}" for line in block.splitlines() if len(line) > CODE_WIDTH]
    assert not long, "\n".join(long)


def test_the_tutorial_opens_with_the_users_question_not_the_projects_tests():
    """A new user met developer information first (issue 41): it goes last."""
    text = (ROOT / "docs" / "tutorial.md").read_text()
    opening = text.split("\n## ", 1)[0]
    assert "tests/" not in opening and "test_" not in opening
    assert "tests/test_readme.py" in text.rsplit("\n## ", 1)[1]
