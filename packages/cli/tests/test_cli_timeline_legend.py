"""The SVG timeline's legend wraps onto further lines rather than running past the picture's
right edge (a job with several causes and goodput parts once had its last labels cut off at
960 px)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from jobdispatch_cli.timeline import _LEGEND_LETTER, _legend_places

MARGIN = 20


def _right_edge(x: float, label: str) -> float:
    return x + 17 + _LEGEND_LETTER * len(label)


labels = st.lists(st.text(alphabet="abcdefghij -:", min_size=1, max_size=60), max_size=30)


@given(labels, st.integers(min_value=300, max_value=1600))
def test_every_label_fits_the_width_unless_it_alone_is_wider(names: list[str], width: int) -> None:
    items = [("#000", n) for n in names]
    placed = _legend_places(items, width)
    assert len(placed) == len(items)
    for (x, line), (_, label) in zip(placed, items, strict=True):
        alone = x == MARGIN
        assert alone or _right_edge(x, label) <= width - MARGIN, (x, line, label)


@given(labels, st.integers(min_value=300, max_value=1600))
def test_items_keep_their_order_and_never_overlap_on_a_line(names: list[str], width: int) -> None:
    items = [("#000", n) for n in names]
    placed = _legend_places(items, width)
    for (x0, l0), (x1, l1), (_, label) in zip(placed, placed[1:], items, strict=False):
        assert l1 in (l0, l0 + 1)
        if l1 == l0:
            assert x1 >= _right_edge(x0, label), "the next item starts after this label ends"
        else:
            assert x1 == MARGIN
