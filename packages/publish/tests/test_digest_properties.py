"""Properties of the recorded digests: entries read back what they wrote (with or without
digests), and no change to a file's bytes gets past the check resolve runs before a hand-over."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobdispatch_publish.entry import Entry, FileRecord
from jobdispatch_publish.errors import Corrupt
from jobdispatch_publish.verify import check_folder

_hex64 = st.text("0123456789abcdef", min_size=64, max_size=64)
_records = st.lists(
    st.builds(
        FileRecord,
        path=st.text("abcdefgh/._-", min_size=1, max_size=20),
        size=st.integers(0, 2**53),
        etag=st.none() | st.just('"0123abcd"'),
        sha256=st.none() | _hex64,
    ),
    max_size=5,
).map(tuple)


@given(files=_records, step=st.integers(0, 10**18 - 1))
def test_an_entry_reads_back_what_it_wrote(files: tuple[FileRecord, ...], step: int) -> None:
    entry = Entry("j", 1, "0", step, "j/executions/1/0/x/", files, "2026-12-01T00:00:00.000+00:00")
    assert Entry.from_json(entry.to_json(), key="k") == entry


@settings(max_examples=60, deadline=None)
@given(
    content=st.binary(min_size=1, max_size=2000),
    data=st.data(),
)
def test_any_change_to_a_file_is_caught(content: bytes, data: st.DataObject) -> None:
    record = FileRecord("m.bin", len(content), sha256=hashlib.sha256(content).hexdigest())
    kind = data.draw(st.sampled_from(["flip", "truncate", "append"]))
    if kind == "flip":
        i = data.draw(st.integers(0, len(content) - 1))
        bit = data.draw(st.integers(0, 7))
        changed = content[:i] + bytes([content[i] ^ (1 << bit)]) + content[i + 1 :]
    elif kind == "truncate":
        changed = content[: data.draw(st.integers(0, len(content) - 1))]
    else:
        changed = content + data.draw(st.binary(min_size=1, max_size=10))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "m.bin").write_bytes(content)
        assert check_folder([record], folder) is True
        (folder / "m.bin").write_bytes(changed)
        with pytest.raises(Corrupt, match=r"m\.bin"):
            check_folder([record], folder)
