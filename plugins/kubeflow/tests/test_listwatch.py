"""The one list-watch loop (module ``listwatch``): list, watch from the list's version, move the
version on with every event and bookmark, watch again where a request ended, list again on a
410, and notice a connection that went silent.

Two stand-ins for the API server: :class:`FakeWatchApi`, the in-memory API with watch requests
scripted by the test, for the loop; and :class:`FakeApiServer`, an HTTP server on the loopback
that answers a watch as the real one does (or goes silent), for the real client's reading of
the stream.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.errors import Unauthorized, Unreachable
from jobdispatch.testing import eventually
from jobdispatch_kubeflow import listwatch
from jobdispatch_kubeflow.api import Gone, KubeApi
from jobdispatch_kubeflow.fake import FakeApi
from jobdispatch_kubeflow.listwatch import Cache, Changed, Follower, Listed, list_watch

Obj = dict[str, Any]


def pod(name: str, version: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


def event(kind: str, obj: Obj) -> Obj:
    return {"type": kind, "object": obj}


def bookmark(version: str) -> Obj:
    return event("BOOKMARK", {"metadata": {"resourceVersion": version}})


class FakeWatchApi(FakeApi):
    """The in-memory API whose watch requests play ``scripts`` in order: each a list of events
    to stream (then the request ends, as the server ends one at its timeout) or an exception to
    raise (a 410, a lost server). ``watches`` records each request's version and timeout."""

    def __init__(self, *scripts: list[Obj] | Exception) -> None:
        super().__init__()
        self.scripts = list(scripts)
        self.watches: list[tuple[str, int]] = []

    def stream(self, kind: str, selector: str | None, version: str, timeout: int) -> Iterator[Obj]:
        self.watches.append((version, timeout))
        script = self.scripts.pop(0) if self.scripts else []
        return self._play(script)

    @staticmethod
    def _play(script: list[Obj] | Exception) -> Iterator[Obj]:
        if isinstance(script, Exception):
            raise script
        yield from script


class Clock:
    """A monotonic clock the test moves: every read advances it by ``step`` seconds."""

    def __init__(self, step: float = 0.0) -> None:
        self.now, self.step = 1000.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_410_lists_again_and_watches_from_the_new_lists_version() -> None:
    api = FakeWatchApi(Gone("too old resource version"), [event("ADDED", pod("b", "150"))])
    api.put("pods", "ns", pod("a", "1"))
    first_version = str(api._version)
    stop = threading.Event()
    stream = list_watch(api, "pods", "ns", stopped=stop.is_set, pause=lambda _: None)
    first = next(stream)
    assert isinstance(first, Listed) and [o["metadata"]["name"] for o in first.items] == ["a"]
    api.put("pods", "ns", pod("c", "1"))  # the server moved on while the version expired
    second = next(stream)
    assert isinstance(second, Listed), "a 410 lists again"
    assert {o["metadata"]["name"] for o in second.items} == {"a", "c"}
    assert second.version != first_version
    changed = next(stream)
    assert isinstance(changed, Changed) and changed.obj["metadata"]["name"] == "b"
    stop.set()
    assert list(stream) == []
    assert [v for v, _ in api.watches] == [first_version, second.version]
    assert api.requests["LIST pods"] == 2


def test_a_bookmark_moves_the_version_and_the_next_request_resumes_from_it() -> None:
    """A quiet watch's bookmark is not handed over, but the next request starts from it; a
    request the server ends is made again from the last version, without listing again."""
    api = FakeWatchApi(
        [bookmark("180")],
        [event("MODIFIED", pod("a", "190")), bookmark("200")],
        [],
    )
    clock = Clock(step=5.0)  # every request lasts long enough: no pause between them
    seen = list(
        list_watch(
            api,
            "pods",
            "ns",
            stopped=lambda: len(api.watches) >= 3,
            monotonic=clock,
        )
    )
    assert [type(e).__name__ for e in seen] == ["Listed", "Changed"]
    assert [v for v, _ in api.watches] == [seen[0].version, "180", "200"]  # type: ignore[union-attr]
    assert api.requests["LIST pods"] == 1, "no LIST between watch requests"
    assert {t for _, t in api.watches} == {listwatch.WATCH_SECONDS}


def test_a_deleted_object_is_handed_over_as_it_was_last() -> None:
    gone = pod("a", "300")
    api = FakeWatchApi([event("DELETED", gone)])
    seen = list(list_watch(api, "pods", "ns", window=10, monotonic=Clock()))
    assert isinstance(seen[1], Changed) and (seen[1].type, seen[1].obj) == ("DELETED", gone)


def test_a_window_asks_each_request_for_the_rest_of_it_and_ends_with_the_request() -> None:
    """The backend's watch: one window, each request lasting what is left of it; a 410 inside
    it lists again and watches for the rest; the request's end is the window's."""
    api = FakeWatchApi(Gone("expired"), [event("MODIFIED", pod("a", "7"))], [])
    clock = Clock(step=1.5)
    seen = list(list_watch(api, "pods", "ns", window=10, monotonic=clock))
    assert [type(e).__name__ for e in seen] == ["Listed", "Listed", "Changed"]
    timeouts = [t for _, t in api.watches]
    assert len(timeouts) == 2, "the second request ended the window"
    assert timeouts[0] <= 10 and timeouts[1] < timeouts[0]


def test_a_window_already_over_makes_no_watch_request() -> None:
    api = FakeWatchApi()
    clock = Clock(step=20.0)
    seen = list(list_watch(api, "pods", "ns", window=10, monotonic=clock))
    assert [type(e).__name__ for e in seen] == ["Listed"]
    assert api.watches == []


def test_a_request_the_server_ends_at_once_is_not_repeated_in_a_tight_loop() -> None:
    api = FakeWatchApi([], [])
    paused: list[float] = []
    list(
        list_watch(
            api,
            "pods",
            "ns",
            stopped=lambda: len(api.watches) >= 2,
            pause=paused.append,
            monotonic=Clock(),
        )
    )
    assert paused == [listwatch.QUICKEST_WATCH, listwatch.QUICKEST_WATCH]


def test_errors_other_than_410_go_to_the_caller() -> None:
    api = FakeWatchApi(Unreachable("the stream broke or went silent"))
    stream = list_watch(api, "pods", "ns")
    next(stream)
    with pytest.raises(Unreachable):
        next(stream)


def test_stopping_hands_over_nothing_more() -> None:
    api = FakeWatchApi([event("ADDED", pod("a", "1")), event("ADDED", pod("b", "2"))])
    stop = threading.Event()
    seen = []
    for item in list_watch(api, "pods", "ns", stopped=stop.is_set):
        seen.append(item)
        if isinstance(item, Changed):
            stop.set()
    assert [type(e).__name__ for e in seen] == ["Listed", "Changed"]


# ---------------------------------------------------------------------------- follower, cache


def names(cache: Cache) -> set[str]:
    return {o["metadata"]["name"] for o in cache.items()}


def test_a_follower_keeps_a_cache_lists_again_after_a_lost_server_and_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(listwatch, "RETRY_SECONDS", 0.01)
    api = FakeWatchApi(
        [event("ADDED", pod("b", "5")), event("DELETED", pod("a", "6"))],
        Unreachable("the API server went away"),
    )
    api.put("pods", "ns", pod("a", "1"))
    cache = Cache()
    follower = Follower(api, "pods", "ns", cache.apply, name="test-follower")
    follower.start()
    try:
        # The watch showed b added and a deleted; the LIST after the loss replaces that.
        eventually(
            lambda: api.requests["LIST pods"] >= 2 and names(cache) == {"a"},
            "the cache listed again after the lost server",
            every=0.01,
        )
        assert cache.synced.is_set()
    finally:
        follower.stop()
    eventually(lambda: not follower.running, "stopped", every=0.01)


def test_a_follower_refused_says_so_once_and_stops(caplog: pytest.LogCaptureFixture) -> None:
    class Refusing(FakeApi):
        def list(self, kind: str, namespace: str | None, **kw: Any) -> Any:
            raise Unauthorized(f"{kind} is forbidden")

    follower = Follower(
        Refusing(), "workloads", None, lambda e: None, name="wl", unauthorized="wl may not"
    )
    with caplog.at_level("WARNING"):
        follower.start()
        eventually(lambda: not follower.running, "stopped", every=0.01)
    assert caplog.text.count("wl may not") == 1


def test_the_cache_is_replaced_by_a_list_and_changed_by_changes() -> None:
    cache = Cache()
    assert not cache.synced.is_set()
    cache.apply(Listed([pod("a", "1"), pod("b", "1")], "1"))
    cache.apply(Changed("MODIFIED", pod("a", "2")))
    cache.apply(Changed("DELETED", pod("b", "3")))
    cache.apply(Changed("ADDED", pod("c", "4")))
    assert cache.synced.is_set()
    assert {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in cache.items()} == {
        "a": "2",
        "c": "4",
    }
    cache.apply(Listed([pod("d", "9")], "9"))
    assert [o["metadata"]["name"] for o in cache.items()] == ["d"]


# ---------------------------------------------------------------------------- the real client


class FakeApiServer:
    """An HTTP server on the loopback that answers every watch request with ``lines`` (each a
    watch event, JSON), then, if ``silent``, keeps the connection open and sends nothing more
    (a connection that died without a FIN or RST looks so to the client), else ends it."""

    def __init__(self, lines: list[Obj], *, silent: bool) -> None:
        self.lines, self.silent = lines, silent
        self.release = threading.Event()
        self.queries: list[str] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # the API server streams a watch in chunks

            def do_GET(self) -> None:
                owner.queries.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for line in owner.lines:
                    data = json.dumps(line).encode() + b"\n"
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                if owner.silent:
                    owner.release.wait(30)
                self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def kubeconfig(self, folder: Path) -> str:
        port = self.server.server_address[1]
        path = folder / "kubeconfig"
        path.write_text(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n"
            f"    server: http://127.0.0.1:{port}\n"
            "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context:\n"
            "    cluster: fake\n    user: u\ncurrent-context: c\n"
        )
        return str(path)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def test_a_watch_whose_connection_goes_silent_ends_unreachable(tmp_path: Path) -> None:
    """The server sends one event and then nothing: the read times out after the request's
    own timeoutSeconds plus the request timeout, not never."""
    server = FakeApiServer([event("ADDED", pod("a", "5"))], silent=True)
    api = KubeApi(kubeconfig=server.kubeconfig(tmp_path), timeout=0.5)
    try:
        began = time.monotonic()
        seen: list[dict[str, Any]] = []
        with pytest.raises(Unreachable, match="went silent"):
            seen.extend(
                api.watch("pods", "ns", label_selector=None, resource_version="4", timeout=1)
            )
        waited = time.monotonic() - began
    finally:
        server.close()
        api.close()
    assert [e["object"]["metadata"]["name"] for e in seen] == ["a"]
    assert waited >= 1.5 - 0.1, "not before the server's own end and the request timeout"
    assert "allowWatchBookmarks=true" in server.queries[0]
    assert "timeoutSeconds=1" in server.queries[0] and "resourceVersion=4" in server.queries[0]


def test_a_410_inside_the_stream_is_gone(tmp_path: Path) -> None:
    expired = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    server = FakeApiServer([bookmark("9"), {"type": "ERROR", "object": expired}], silent=False)
    api = KubeApi(kubeconfig=server.kubeconfig(tmp_path), timeout=5)
    try:
        seen: list[dict[str, Any]] = []
        with pytest.raises(Gone, match="too old"):
            seen.extend(
                api.watch("pods", "ns", label_selector=None, resource_version="1", timeout=5)
            )
    finally:
        server.close()
        api.close()
    assert [e["type"] for e in seen] == ["BOOKMARK"]
