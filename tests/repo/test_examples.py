"""What the README files and the docs show works: the distribution tables name every member,
the Python examples marked ``<!-- run by tests/repo/test_examples.py -->`` run, and every
``config.toml`` example naming clusters is read by the command's own config loader.

Examples are what a newcomer copies first; one that names an undefined variable, hangs, or
spells a key the loader refuses costs more trust than a missing one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from repo_layout import DOCS, ROOT, members, run_python

#: The comment that marks a Python example (the fence right after it) to run here.
RUN_MARK = "<!-- run by tests/repo/test_examples.py -->"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _pages() -> list[Path]:
    readmes = [ROOT / "README.md", *(m.path / "README.md" for m in members())]
    return [p for p in readmes if p.is_file()] + sorted(DOCS.rglob("*.md"))


def _blocks(page: Path, language: str) -> list[tuple[int, str, bool]]:
    """Each fenced block of ``language`` in ``page``: (line, code, whether it is marked to run)."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        if match.group(1) != language:
            continue
        before = text[: match.start()].rstrip("\n")
        marked = before.endswith(RUN_MARK)
        found.append((text.count("\n", 0, match.start()) + 1, match.group(2), marked))
    return found


def _where(page: Path, line: int) -> str:
    return f"{page.relative_to(ROOT).as_posix()}:{line}"


# --- the distribution tables ------------------------------------------------------------------


def _tables(page: Path) -> list[list[list[str]]]:
    """Every markdown table of ``page`` whose header has a folder and a distribution column:
    its rows (header first), cells stripped of backticks."""
    tables, current = [], []
    for line in [*page.read_text(encoding="utf-8").splitlines(), ""]:
        if line.startswith("|"):
            current.append([c.replace("`", "").strip() for c in line.strip().strip("|").split("|")])
            continue
        if current and {"folder", "distribution"} <= set(current[0]):
            tables.append([current[0], *current[2:]])
        current = []
    return tables


@pytest.mark.parametrize("page", [ROOT / "README.md", DOCS / "index.md"], ids=lambda p: p.name)
def test_the_distribution_table_names_every_member(page: Path) -> None:
    tables = _tables(page)
    assert len(tables) == 1, f"{page}: expected one table of folders and distributions"
    header, *rows = tables[0]
    folder, dist = header.index("folder"), header.index("distribution")
    listed = {(row[folder], row[dist].removesuffix(" (private)")) for row in rows}
    expected = {(m.rel, m.distribution) for m in members()}
    assert listed == expected, (
        f"{page.name}: missing {sorted(expected - listed)}, not members {sorted(listed - expected)}"
    )


def test_the_table_check_sees_a_missing_row(tmp_path: Path) -> None:
    page = tmp_path / "README.md"
    page.write_text("| folder | distribution |\n|---|---|\n| `packages/core` | `jobdispatch` |\n")
    ((_header, *rows),) = _tables(page)
    assert rows == [["packages/core", "jobdispatch"]]
    assert {tuple(r) for r in rows} != {(m.rel, m.distribution) for m in members()}


# --- Python examples --------------------------------------------------------------------------

EXAMPLES = [
    pytest.param(code, id=_where(page, line))
    for page in _pages()
    for line, code, marked in _blocks(page, "python")
    if marked
]


def test_the_readmes_examples_are_marked_to_run() -> None:
    """The two first examples a newcomer meets, the repository's and the core's, are run."""
    ids = [str(p.id) for p in EXAMPLES]
    assert any(i.startswith("README.md:") for i in ids), ids
    assert any(i.startswith("packages/core/README.md:") for i in ids), ids


@pytest.mark.parametrize("code", EXAMPLES)
def test_a_marked_example_runs(code: str, tmp_path: Path) -> None:
    run_python(code, timeout=300, cwd=tmp_path)


# --- config.toml examples ---------------------------------------------------------------------

CONFIGS = [
    pytest.param(page, line, code, id=_where(page, line))
    for page in _pages()
    for line, code, _ in _blocks(page, "toml")
    if re.search(r"^\[clusters\.", code, re.MULTILINE)
]


def test_there_are_config_examples_for_slurm_and_kubernetes() -> None:
    shown = {str(p.values[2]).split('adapter = "')[1].split('"')[0] for p in CONFIGS}
    assert {"slurm", "kubeflow"} <= shown, shown


@pytest.mark.parametrize(("page", "line", "code"), CONFIGS)
def test_a_config_example_is_read_by_the_config_loader(
    page: Path, line: int, code: str, tmp_path: Path
) -> None:
    """The example, as a config.toml, gives usable clusters: every key known to its adapter's
    schema and every value accepted (the loader reads files the user names, not the network)."""
    from jobdispatch import plugins
    from jobdispatch_cli.config import load_config

    adapters = set(re.findall(r'^adapter = "([^"]+)"', code, re.MULTILINE))
    installed = plugins.default().registry("adapter").names()
    if not adapters <= set(installed):
        pytest.skip(f"adapters not installed here: {sorted(adapters - set(installed))}")
    path = tmp_path / "config.toml"
    path.write_text(code)
    config = load_config(plugins.default(), path, env={})
    where = _where(page, line)
    assert not config.unusable, f"{where}: " + "; ".join(
        str(p) for problems in config.unusable.values() for p in problems
    )
    named = set(re.findall(r"^\[clusters\.([\w-]+)\]", code, re.MULTILINE))
    assert named <= set(config.clusters), where


# --- the generated configuration reference ----------------------------------------------------


def test_the_config_reference_links_to_pages_that_exist() -> None:
    """Its introduction once pointed readers at a job-file reference "until" one existed, long
    after it did: the page it names now must be there (relative to docs/reference/)."""
    from jobdispatch import plugins
    from test_docs import _hook

    page = _hook("docs/hooks/generated.py").config_page(plugins.load())
    links = re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", page)
    assert "job-file.md" in links, links
    missing = [link for link in links if not (DOCS / "reference" / link).resolve().is_file()]
    assert not missing, missing
