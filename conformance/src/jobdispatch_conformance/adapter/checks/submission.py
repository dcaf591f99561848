"""The dry run: what ``preview`` prints is what ``start`` creates."""

from __future__ import annotations

import difflib

from jobdispatch.spi import SubmissionPreview

from jobdispatch_conformance.adapter.harness import Harness, expect

__all__ = ["preview_is_what_start_creates"]


def preview_is_what_start_creates(h: Harness) -> None:
    """For a spec with resources, the adapter's preview of a request equals what the scheduler
    holds of the object start then creates for the same request, read back by the driver; and
    previewing creates nothing."""
    if not isinstance(h.backend, SubmissionPreview):
        h.skip("the adapter has no preview (SubmissionPreview)")
        return
    h.need("created")
    request = h.request(spec=h.driver.resource_spec())
    shown = h.backend.preview(request)
    expect(
        not h.backend.find(request.job).objects,
        f"preview created an object for {request.job}",
    )
    ref = h.start(request)
    made = h.driver.created(ref)
    diff = "\n".join(
        difflib.unified_diff(
            shown.splitlines(), made.splitlines(), "preview", "created", lineterm=""
        )
    )
    expect(shown == made, f"preview differs from what start created for {ref}:\n{diff}")
