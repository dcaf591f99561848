"""Everything the local adapter makes is its owner's alone (0700 folders, 0600 files), whatever
the umask: ``object.json`` keeps the job's env verbatim and a rank's output may print it."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jobdispatch.spi import StartRequest
from jobdispatch.types import JobSpec, ObjectState
from jobdispatch_local import LocalBackend
from jobdispatch_local.testing import wait_for

Request = Callable[..., StartRequest]


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The common umask, for this process and the runner and ranks it starts."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _modes(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode) for p in [root, *root.rglob("*")]
    }


def test_the_state_folder_objects_and_output_are_private(
    umask_022: None, backend: LocalBackend, state_dir: Path, request_for: Request, tmp_path: Path
) -> None:
    output = tmp_path / "runs" / "first" / "logs"  # a folder the spec names, none of it made
    spec = JobSpec(command=("sh", "-c", "echo $TOKEN; echo oops >&2"), output=str(output))
    request = request_for(spec)
    request = StartRequest(
        job=request.job,
        submission=1,
        attempt=1,
        spec=spec,
        env={**request.env, "TOKEN": "t0ps3cret"},
    )
    ref = backend.start(request)
    backend.open(ref)
    wait_for(backend, ref, lambda o: o.state is ObjectState.ENDED, "ended")
    assert (output / ref.id / "rank-0.out").read_text() == "t0ps3cret\n"
    made = {**_modes(state_dir), **_modes(tmp_path / "runs")}
    assert f"objects/{ref.id}/object.json" in made and f"first/logs/{ref.id}/rank-0.err" in made
    for name, mode in made.items():
        folder = (state_dir / name).is_dir() or (tmp_path / "runs" / name).is_dir()
        assert mode == (0o700 if folder else 0o600), f"{name}: {mode:04o}"
