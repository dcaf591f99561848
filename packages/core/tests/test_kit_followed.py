"""The followed output stream: every byte written is read, in order, and the stream ends only
once the object has ended and nothing more is there. Time is a script: each wait lets the
writer take its next step."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.kit.followed import follow


class _Writer:
    """An object's output written in steps; it ends after the last one."""

    def __init__(self, steps: list[bytes]) -> None:
        self.steps = list(steps)
        self.written = b""
        self.ended = not self.steps
        self.waits: list[int] = []

    def read_from(self, offset: int) -> bytes:
        return self.written[offset:]

    def has_ended(self) -> bool:
        return self.ended

    def wait(self, offset: int) -> None:
        self.waits.append(offset)
        if self.steps:
            self.written += self.steps.pop(0)
        self.ended = not self.steps


@given(steps=st.lists(st.binary(max_size=50), max_size=10), size=st.integers(1, 64))
def test_every_byte_is_read_in_order_and_then_the_stream_ends(
    steps: list[bytes], size: int
) -> None:
    writer = _Writer(steps)
    stream = follow(writer.read_from, writer.has_ended, writer.wait)
    got = b""
    while chunk := stream.read1(size):  # type: ignore[attr-defined]  # buffered: what has come
        got += chunk
    assert got == b"".join(steps)
    assert stream.read() == b""
    # It waits only with nothing new to return, each time told how far it has read.
    assert writer.waits == sorted(writer.waits)
    assert all(offset <= len(got) for offset in writer.waits)


def test_the_end_is_asked_before_reading_so_the_last_bytes_are_not_lost() -> None:
    written = bytearray()
    ended = False
    asked: list[str] = []

    def read_from(offset: int) -> bytes:
        asked.append("read")
        return bytes(written[offset:])

    def has_ended() -> bool:
        nonlocal ended
        asked.append("ended")
        if written:
            return ended
        # The object writes its last bytes and ends just after the check.
        written.extend(b"last words")
        ended = True
        return False

    stream = follow(read_from, has_ended, lambda offset: None)
    assert stream.read() == b"last words"
    assert asked[:2] == ["ended", "read"]
