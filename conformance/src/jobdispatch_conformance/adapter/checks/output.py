"""Checks of output reading, where the cluster says it can."""

from __future__ import annotations

import threading
from typing import IO

from jobdispatch.errors import Unsupported
from jobdispatch.spi import Growth, ObjectRef, OutputGrowthReader, OutputReader
from jobdispatch.types import Capability

from jobdispatch_conformance.adapter.harness import CheckFailed, Harness, expect, required

__all__ = ["output_follows_until_the_end", "output_grows", "output_is_read"]

LINE = b"jobdispatch conformance: first line\n"
LATER = b"jobdispatch conformance: a later line\n"


def _reader(h: Harness) -> OutputReader | None:
    return h.backend if isinstance(h.backend, OutputReader) else None


def _required_reader(h: Harness, cap: Capability) -> OutputReader:
    return required(_reader(h), f"{cap} is answered yes but the adapter is not an OutputReader")


def _refuse(h: Harness, follow: bool) -> None:
    reader = _reader(h)
    if reader is None:
        raise Unsupported("not an OutputReader")
    reader.output(h.start(), follow=follow)


def output_is_read(h: Harness) -> None:
    """What the object wrote is what output() reads."""

    def works() -> None:
        reader = _required_reader(h, Capability.OUTPUT_READ)
        h.need("emit_output")
        ref = h.running()
        with h.driving():
            h.driver.emit_output(ref, LINE)
        h.wait_until(lambda: LINE in reader.output(ref).read(), f"output of {ref} showing a line")

    h.gate(Capability.OUTPUT_READ, works, lambda: _refuse(h, follow=False))


def output_follows_until_the_end(h: Harness) -> None:
    """A followed stream shows what is written later and ends when the object ends."""

    def works() -> None:
        reader = _required_reader(h, Capability.OUTPUT_FOLLOW)
        h.need("emit_output", "complete")
        ref = h.running()
        with h.driving():
            h.driver.emit_output(ref, LINE)
        stream = reader.output(ref, follow=True)
        got: list[bytes] = []

        def drain(s: IO[bytes]) -> None:
            got.append(s.read())

        # The read blocks until the object ends; a thread bounds it by the settle timeout, so an
        # adapter whose stream never ends fails instead of hanging the suite.
        reading = threading.Thread(target=drain, args=(stream,), daemon=True)
        reading.start()
        with h.driving():
            h.driver.emit_output(ref, LATER)
            h.driver.complete(ref)
        reading.join(h.timeouts.settle)
        if reading.is_alive():
            raise CheckFailed(
                f"a followed stream of {ref} did not end within "
                f"{h.timeouts.settle}s of the object ending"
            )
        expect(
            LINE in got[0] and LATER in got[0],
            f"a followed stream must show earlier and later output; it read {got[0]!r}",
        )

    h.gate(Capability.OUTPUT_FOLLOW, works, lambda: _refuse(h, follow=True))


def _growth_reader(h: Harness) -> OutputGrowthReader | None:
    return h.backend if isinstance(h.backend, OutputGrowthReader) else None


def _refuse_growth(h: Harness) -> None:
    reader = _growth_reader(h)
    if reader is None:
        raise Unsupported("not an OutputGrowthReader")
    reader.output_growth([h.start()])


def output_grows(h: Harness) -> None:
    """output_growth() sees a running object's output grow: a size that counts what it wrote,
    larger, with a time no earlier, after it writes more; one call answers for several
    objects, and an object that is not the adapter's is left out, not an error."""

    def works() -> None:
        reader = required(
            _growth_reader(h),
            "output-growth is answered yes but the adapter is not an OutputGrowthReader",
        )
        h.need("emit_output")
        ref = h.running()
        other = h.running()
        unknown = ObjectRef("jd-0000000000-9999-0")

        def seen(at_least: int) -> Growth | None:
            grown = reader.output_growth([ref, other, unknown])
            expect(unknown not in grown, f"output_growth answered for an unknown object {unknown}")
            g = grown.get(ref)
            return g if g is not None and g.size >= at_least else None

        with h.driving():
            h.driver.emit_output(ref, LINE)
        h.wait_until(lambda: seen(len(LINE)) is not None, f"output of {ref} growing")
        first = seen(len(LINE))
        assert first is not None
        with h.driving():
            h.driver.emit_output(ref, LATER)
        h.wait_until(
            lambda: seen(first.size + len(LATER)) is not None,
            f"output of {ref} growing by a later line",
        )
        later = seen(first.size + len(LATER))
        assert later is not None
        expect(
            later.at >= first.at,
            f"the output of {ref} grew but its time went back: {first.at} then {later.at}",
        )

    h.gate(Capability.OUTPUT_GROWTH, works, lambda: _refuse_growth(h))
