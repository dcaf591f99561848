"""The SVG timeline's legend wraps onto further lines rather than running past the picture's
right edge (a job with several causes and goodput parts once had its last labels cut off at
960 px)."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st
from jobdispatch_cli.timeline import _LEGEND_LETTER, _legend_places, _legend_right

MARGIN = 20


def _right_edge(x: float, label: str) -> float:
    return _legend_right(x, label)


def test_an_item_ends_after_its_swatch_and_its_label() -> None:
    assert _legend_right(20.0, "abc") == 20.0 + 17 + 3 * _LEGEND_LETTER


labels = st.lists(st.text(alphabet="abcdefghij -:", min_size=1, max_size=60), max_size=30)


@given(labels, st.integers(min_value=300, max_value=1600))
@example(  # a label ending a float's last digit past the margin (found by CI, Python 3.13)
    [":" * n for n in (1, 4, 7, 10, 10, 15, 4, 10, 16, 4, 7, 1, 8)],
    597,
)
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
