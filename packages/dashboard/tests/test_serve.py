"""Starting the server: where it may listen, its token file, and the redactor's promise."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.errors import Invalid
from jobdispatch_dashboard import Board, Redactor, is_loopback, read_token, secret_values, server

TOKEN = "a-token-of-more-than-sixteen"


def _token_file(tmp_path: Path, text: str = TOKEN, mode: int = 0o600) -> Path:
    path = tmp_path / "token"
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.9.9.9", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("10.0.0.1", False), ("example.org", False)],
)  # fmt: skip
def test_only_loopback_addresses_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_elsewhere_than_loopback_it_needs_a_token(tmp_path: Path) -> None:
    with pytest.raises(Invalid, match=r"--listen 0\.0\.0\.0:8765: not a loopback address"):
        server(Board([]), "0.0.0.0:8765")
    made = server(Board([]), "0.0.0.0:0", token_file=_token_file(tmp_path))
    assert made.config.host == "0.0.0.0"


@pytest.mark.parametrize(
    ("listen", "problem"),
    [("nowhere", "give HOST:PORT"), ("127.0.0.1:99999", "give HOST:PORT"), (":80", "give")],
)
def test_a_bad_address_is_named(listen: str, problem: str) -> None:
    with pytest.raises(Invalid, match=f"--listen '{listen}': {problem}"):
        server(Board([]), listen)


def test_a_bad_refresh_is_named() -> None:
    with pytest.raises(Invalid, match="--refresh 0"):
        server(Board([]), refresh_seconds=0)


def test_the_token_file_must_exist_be_private_and_hold_a_token(tmp_path: Path) -> None:
    assert read_token(_token_file(tmp_path)) == TOKEN
    with pytest.raises(Invalid, match=r"--token-file .*missing: no such file"):
        read_token(tmp_path / "missing")
    with pytest.raises(Invalid, match="others than its owner may read it: chmod 600"):
        read_token(_token_file(tmp_path, mode=0o644))
    with pytest.raises(Invalid, match="no token of at least 16 characters"):
        read_token(_token_file(tmp_path, text="short"))
    with pytest.raises(Invalid, match="no token of at least 16 characters"):
        read_token(_token_file(tmp_path, text=""))


def test_secret_settings_are_found_and_references_to_them_are_not() -> None:
    settings = {
        "token": "t0k",
        "token_file": "/etc/token",
        "nested": {"password": "pw", "password_env": "PGPASSWORD", "user": "ops"},
        "api_key": "k3y",
    }
    assert sorted(secret_values(settings)) == ["k3y", "pw", "t0k"]


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=4, max_size=20)


@given(before=st.text(max_size=40), secret=_WORD, after=st.text(max_size=40), user=_WORD)
def test_a_redacted_text_never_holds_the_secret_or_a_url_password(
    before: str, secret: str, after: str, user: str
) -> None:
    redactor = Redactor([secret])
    text = redactor.text(f"{before}{secret}{after} postgresql://{user}:{secret}@db/x")
    assert secret not in text
    assert "@db/x" in text
