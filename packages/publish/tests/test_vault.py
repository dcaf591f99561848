"""The Vault source, against a fake of Vault's HTTP API (no Vault server is installable here)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from jobdispatch.errors import Invalid, NotFound, Unauthorized, Unreachable
from jobdispatch_publish.credentials.base import Credentials
from jobdispatch_publish.credentials.chain import build_chain
from jobdispatch_publish.proxy import ProxyRule
from publish_fakes import FakeVault, RecordingProxy

JWT = "eyJhbGciOiJSUzI1NiJ9.service-account-token-must-not-leak"
SECRET_ID = "approle-secret-id-must-not-leak"
S3_SECRET = "vault-held-s3-secret-must-not-leak"


@pytest.fixture
def vault() -> Iterator[FakeVault]:
    server = FakeVault()
    server.kubernetes_roles["trainer"] = JWT
    server.approles["role-123"] = SECRET_ID
    server.secrets["secret/ml/ckpt"] = {
        "access_key_id": "AKIAVAULT",
        "secret_access_key": S3_SECRET,
    }
    server.secrets["kv/ml/sts"] = {"ak": "ASIAVAULT", "sk": S3_SECRET, "st": "sts-token"}
    server.start()
    yield server
    server.stop()


@pytest.fixture
def jwt_file(tmp_path: Path) -> Path:
    f = tmp_path / "token"
    f.write_text(JWT + "\n")
    return f


def resolve(
    spec: Mapping[str, object], env: dict[str, str] | None = None, proxy: ProxyRule | None = None
) -> Credentials:
    return build_chain([{"source": "vault", **spec}], proxy or ProxyRule(), env=env or {}).resolve()


def test_kubernetes_login_then_kv_v2_read(vault: FakeVault, jwt_file: Path) -> None:
    found = resolve(
        {
            "url": vault.url,
            "path": "ml/ckpt",
            "auth": {"method": "kubernetes", "role": "trainer", "jwt_file": str(jwt_file)},
        }
    )
    assert (found.access_key, found.secret_key, found.session_token) == (
        "AKIAVAULT",
        S3_SECRET,
        None,
    )
    assert found.source == f"vault ({vault.url} secret/ml/ckpt)"
    methods = [(m, p) for m, p, _ in vault.requests]
    assert methods == [("POST", "/v1/auth/kubernetes/login"), ("GET", "/v1/secret/data/ml/ckpt")]


def test_approle_login_with_a_custom_mount_and_fields(vault: FakeVault) -> None:
    spec = {
        "url": vault.url,
        "mount": "kv",
        "path": "ml/sts",
        "fields": {"access_key": "ak", "secret_key": "sk", "session_token": "st"},
        "refresh_after": 600,
        "auth": {
            "method": "approle",
            "role_id": "role-123",
            "secret_id_var": "CKPT_SECRET_ID",
            "mount": "approle",
        },
    }
    found = resolve(spec, {"CKPT_SECRET_ID": SECRET_ID})
    assert (found.access_key, found.session_token) == ("ASIAVAULT", "sts-token")
    assert found.expires is not None


def test_a_refused_login_names_vault_and_hides_the_secret_id(vault: FakeVault) -> None:
    spec = {
        "url": vault.url,
        "path": "ml/ckpt",
        "auth": {"method": "approle", "role_id": "role-123", "secret_id_var": "S"},
    }
    with pytest.raises(Unauthorized, match=r"refused|rejected") as caught:
        resolve(spec, {"S": "wrong-" + SECRET_ID})
    assert SECRET_ID not in str(caught.value)
    assert vault.url in str(caught.value)


def test_a_refused_kubernetes_login_hides_the_jwt(vault: FakeVault, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("not-the-" + JWT)
    with pytest.raises(Unauthorized, match="permission denied") as caught:
        resolve(
            {
                "url": vault.url,
                "path": "ml/ckpt",
                "auth": {"method": "kubernetes", "role": "trainer", "jwt_file": str(bad)},
            }
        )
    assert JWT not in str(caught.value)


def test_missing_secret_field_and_jwt_file(
    vault: FakeVault, jwt_file: Path, tmp_path: Path
) -> None:
    auth = {"method": "kubernetes", "role": "trainer", "jwt_file": str(jwt_file)}
    with pytest.raises(NotFound, match=r"no secret at secret/ml/none"):
        resolve({"url": vault.url, "path": "ml/none", "auth": auth})
    with pytest.raises(Invalid, match="has no field 'st'") as caught:
        resolve(
            {"url": vault.url, "path": "ml/ckpt", "fields": {"session_token": "st"}, "auth": auth}
        )
    assert S3_SECRET not in str(caught.value)
    with pytest.raises(Unauthorized, match="cannot be read"):
        resolve(
            {
                "url": vault.url,
                "path": "ml/ckpt",
                "auth": {**auth, "jwt_file": str(tmp_path / "absent")},
            }
        )


def test_unreachable_vault(jwt_file: Path) -> None:
    auth = {"method": "kubernetes", "role": "trainer", "jwt_file": str(jwt_file)}
    with pytest.raises(Unreachable, match="cannot be reached"):
        resolve({"url": "http://127.0.0.1:9", "path": "x", "timeout": 2, "auth": auth})


def test_vault_goes_through_the_proxy_rule(vault: FakeVault, jwt_file: Path) -> None:
    proxy = RecordingProxy().start()
    try:
        auth = {"method": "kubernetes", "role": "trainer", "jwt_file": str(jwt_file)}
        rule = ProxyRule.from_config({"url": proxy.url}, {})
        assert (
            resolve(
                {"url": vault.url, "path": "ml/ckpt", "auth": auth},
                {"HTTP_PROXY": "http://127.0.0.1:9"},
                rule,
            ).access_key
            == "AKIAVAULT"
        )
        assert len(proxy.hosts) == 2  # the login and the read
    finally:
        proxy.stop()
