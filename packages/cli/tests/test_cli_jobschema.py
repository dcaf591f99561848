"""The job file's JSON Schema: shipped current, published in the docs, and every example job
file of the repository (examples/, the docs' and READMEs' job-file blocks) valid against it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from jobdispatch_cli.jobfile import PARSERS, FileError, parse_job_text
from jobdispatch_cli.jobschema import SCHEMA_FILE, job_schema, schema_text

ROOT = Path(__file__).resolve().parents[3]
DOCS_COPY = ROOT / "docs" / "reference" / "job.schema.json"
FENCE = re.compile(r"^```(toml|yaml)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_shipped_schema_is_current() -> None:
    assert SCHEMA_FILE.read_text() == schema_text(), (
        "stale: run python -m jobdispatch_cli.jobschema"
    )


def test_the_docs_publish_the_same_schema() -> None:
    assert DOCS_COPY.read_text() == schema_text(), "stale: run python -m jobdispatch_cli.jobschema"


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(job_schema())


def _job_blocks() -> list[tuple[str, str, str]]:
    """(where, suffix, text) of every fenced block that is a job file: it has a command and
    is not a configuration file (clusters, escalations)."""
    out = []
    pages = [*ROOT.glob("docs/**/*.md"), ROOT / "README.md", *ROOT.glob("packages/*/README.md")]
    pages += list(ROOT.glob("plugins/*/README.md"))
    for page in sorted(pages):
        for n, m in enumerate(FENCE.finditer(page.read_text())):
            kind, text = m.groups()
            if re.search(r"^\s*\[?(clusters|escalations)[.\]]", text, re.MULTILINE):
                continue
            if re.search(r"^command\s*[=:]", text, re.MULTILINE):
                out.append((f"{page.relative_to(ROOT)} block {n}", f".{kind}", text))
    return out


EXAMPLES = sorted(
    p for p in (ROOT / "examples").rglob("*") if p.suffix in (".toml", ".yaml", ".yml")
)
BLOCKS = _job_blocks()


def test_there_are_examples_to_check() -> None:
    assert EXAMPLES and len(BLOCKS) >= 3


def _validate(where: str, suffix: str, text: str) -> None:
    data: Any
    data, *_ = PARSERS[suffix](text, where)
    schema = json.loads(SCHEMA_FILE.read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]
    assert not errors, f"{where}: {errors}"
    # And the command reads it, whole: the schema and the conversions agree.
    parse_job_text(text, file=where, suffix=suffix, base=ROOT)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_job_file_is_valid(path: Path) -> None:
    _validate(str(path), path.suffix, path.read_text())


@pytest.mark.parametrize(("where", "suffix", "text"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_every_job_file_in_the_docs_is_valid(where: str, suffix: str, text: str) -> None:
    _validate(where, suffix, text)


def test_the_schema_refuses_what_the_command_refuses(tmp_path: Path) -> None:
    """The schema is the checker, so the editor and the command agree on a typo."""
    text = 'command = ["x"]\nprocs_per_nodes = 1\n[resources]\ngpus = 2\n'
    with pytest.raises(FileError) as caught:
        parse_job_text(text, file="j.toml", suffix=".toml", base=tmp_path)
    fields = {p.field for p in caught.value.problems}
    assert fields == {"procs_per_nodes", "resources.gpus"}
    schema = json.loads(SCHEMA_FILE.read_text())
    data, *_ = PARSERS[".toml"](text, "j.toml")
    assert len(list(jsonschema.Draft202012Validator(schema).iter_errors(data))) == 2
