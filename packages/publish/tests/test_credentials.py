"""Credential sources, their order, the proxy rule, and secrets kept out of errors and logs."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from jobdispatch.errors import Invalid, Unreachable, ValidationError
from jobdispatch_publish.config import Settings, load_settings, parse_settings
from jobdispatch_publish.credentials.base import Credentials
from jobdispatch_publish.credentials.chain import DEFAULT_SOURCES, build_chain
from jobdispatch_publish.errors import MissingCredentials
from jobdispatch_publish.proxy import ProxyRule
from publish_fakes import FakeCredentialEndpoint, RecordingProxy

SECRET = "s3cr3t-Value-that-must-not-leak"
TOKEN = "session-token-that-must-not-leak"


def chain(
    specs: list[dict[str, object]], env: dict[str, str], proxy: ProxyRule | None = None
) -> Credentials:
    return build_chain(specs, proxy or ProxyRule(), env=env).resolve()


def test_env_source_reads_the_standard_variables(clean_env: dict[str, str]) -> None:
    env = {**clean_env, "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE1", "AWS_SECRET_ACCESS_KEY": SECRET}
    found = chain([{"source": "env"}], env)
    assert (found.access_key, found.secret_key, found.session_token) == (
        "AKIAEXAMPLE1",
        SECRET,
        None,
    )
    assert SECRET not in repr(found)
    assert SECRET not in str(found)


def test_env_source_with_renamed_variables_and_half_set_keys(clean_env: dict[str, str]) -> None:
    env = {**clean_env, "CKPT_KEY": "AKIAEXAMPLE2", "CKPT_SECRET": SECRET}
    spec = {"source": "env", "access_key_var": "CKPT_KEY", "secret_key_var": "CKPT_SECRET"}
    assert chain([spec], env).access_key == "AKIAEXAMPLE2"
    with pytest.raises(
        Invalid, match="AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"
    ) as caught:
        chain([{"source": "env"}], {**clean_env, "AWS_SECRET_ACCESS_KEY": SECRET})
    assert SECRET not in str(caught.value)


def test_shared_file_profiles(clean_env: dict[str, str], tmp_path: Path) -> None:
    creds = tmp_path / "credentials"
    creds.write_text(
        f"[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = {SECRET}\n"
        f"[train]\naws_access_key_id = AKIATRAIN\naws_secret_access_key = {SECRET}\n"
        f"aws_session_token = {TOKEN}\n"
    )
    assert (
        chain([{"source": "shared-file", "path": str(creds)}], clean_env).access_key
        == "AKIADEFAULT"
    )
    found = chain([{"source": "shared-file", "path": str(creds), "profile": "train"}], clean_env)
    assert (found.access_key, found.session_token) == ("AKIATRAIN", TOKEN)
    env = {**clean_env, "AWS_SHARED_CREDENTIALS_FILE": str(creds), "AWS_PROFILE": "nope"}
    with pytest.raises(Invalid, match="profile 'nope' is not in"):
        chain([{"source": "shared-file"}], env)


def test_a_broken_credentials_file_is_reported_without_its_content(
    clean_env: dict[str, str], tmp_path: Path
) -> None:
    creds = tmp_path / "credentials"
    creds.write_text(f"aws_secret_access_key = {SECRET}\n[default]\n")
    with pytest.raises(Invalid, match="not a valid credentials file") as caught:
        chain([{"source": "shared-file", "path": str(creds)}], clean_env)
    assert SECRET not in str(caught.value)


def test_the_first_source_with_credentials_wins(clean_env: dict[str, str], tmp_path: Path) -> None:
    creds = tmp_path / "credentials"
    creds.write_text(f"[default]\naws_access_key_id = AKIAFILE\naws_secret_access_key = {SECRET}\n")
    env = {**clean_env, "AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": SECRET}
    file_spec = {"source": "shared-file", "path": str(creds)}
    assert chain([{"source": "env"}, file_spec], env).access_key == "AKIAENV"
    assert chain([file_spec, {"source": "env"}], env).access_key == "AKIAFILE"
    assert chain([{"source": "env"}, file_spec], clean_env).access_key == "AKIAFILE"


def test_no_credentials_names_every_source_tried(clean_env: dict[str, str]) -> None:
    with pytest.raises(MissingCredentials) as caught:
        chain([dict(s) for s in DEFAULT_SOURCES], clean_env)
    text = str(caught.value)
    for name in ("env:", "shared-file:", "container:", "instance:"):
        assert name in text
    assert "AWS_EC2_METADATA_DISABLED" in text


@pytest.fixture
def endpoint() -> Iterator[FakeCredentialEndpoint]:
    server = FakeCredentialEndpoint("ASIACONTAINER", SECRET, TOKEN, auth="Bearer pod-identity")
    server.start()
    yield server
    server.stop()


def test_container_source_with_full_uri_and_token_file(
    clean_env: dict[str, str], endpoint: FakeCredentialEndpoint, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("Bearer pod-identity")
    env = {
        **clean_env,
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint.url + "/v1/credentials",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token_file),
    }
    found = chain([{"source": "container"}], env)
    assert (found.access_key, found.secret_key, found.session_token) == (
        "ASIACONTAINER",
        SECRET,
        TOKEN,
    )
    assert found.expires is not None


def test_container_source_refused_is_unreachable_without_the_token(
    clean_env: dict[str, str], endpoint: FakeCredentialEndpoint
) -> None:
    env = {
        **clean_env,
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint.url + "/v1/credentials",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN": "Bearer wrong-token-value",
    }
    with pytest.raises(Unreachable, match="container credentials at") as caught:
        chain([{"source": "container", "attempts": 1}], env)
    assert "wrong-token-value" not in str(caught.value)


def test_instance_source_speaks_imdsv2(
    clean_env: dict[str, str], endpoint: FakeCredentialEndpoint
) -> None:
    env = {k: v for k, v in clean_env.items() if k != "AWS_EC2_METADATA_DISABLED"}
    found = chain([{"source": "instance", "endpoint": endpoint.url + "/"}], env)
    assert (found.access_key, found.session_token) == ("ASIACONTAINER", TOKEN)
    assert ("PUT", "/latest/api/token") in [(m, p) for m, p, _ in endpoint.requests]


def test_one_proxy_rule_for_every_client(
    clean_env: dict[str, str], endpoint: FakeCredentialEndpoint
) -> None:
    proxy = RecordingProxy().start()
    try:
        # The environment names another proxy: the rule from the configuration is what counts.
        env = {
            **clean_env,
            "HTTP_PROXY": "http://127.0.0.1:9",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint.url + "/creds",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN": "Bearer pod-identity",
        }
        rule = ProxyRule.from_config({"url": proxy.url}, env)
        assert chain([{"source": "container"}], env, rule).access_key == "ASIACONTAINER"
        port = endpoint.url.rsplit(":", 1)[1]
        assert proxy.hosts == [f"127.0.0.1:{port}"]
        bypass = ProxyRule.from_config({"url": proxy.url, "no_proxy": ["127.0.0.0/8"]}, env)
        chain([{"source": "container"}], env, bypass)
        assert len(proxy.hosts) == 1  # went direct
    finally:
        proxy.stop()


def test_proxy_rule_from_the_environment_and_its_matching() -> None:
    rule = ProxyRule.from_config(
        None, {"https_proxy": "http://user:pw@proxy:3128", "NO_PROXY": ".corp.example,10.0.0.0/8"}
    )
    assert rule.proxies_for("https://s3.amazonaws.com") == {
        "http": "http://user:pw@proxy:3128",
        "https": "http://user:pw@proxy:3128",
    }
    assert rule.proxies_for("https://minio.corp.example:9000") == {}
    assert rule.proxies_for("http://10.1.2.3:8200") == {}
    assert rule.proxies_for("http://169.254.169.254/latest") == {}  # metadata: always direct
    assert "pw" not in rule.describe()
    assert ProxyRule.from_config(None, {}).proxies_for("https://x") == {}


def test_configuration_unknown_keys_are_refused_with_their_path(clean_env: dict[str, str]) -> None:
    doc = {
        "s3": {"endpoint_url": "http://x", "multipart_treshold": 10},
        "proxy": {"url": "http://p:1", "noproxy": []},
        "credentials": [
            {"source": "env"},
            {
                "source": "vault",
                "url": "http://v",
                "path": "p",
                "auth": {"method": "approle", "role_id": "r", "rolee": "x"},
            },
        ],
        "extra": 1,
    }
    with pytest.raises(ValidationError) as caught:
        parse_settings(doc, origin="test")
    paths = set(caught.value.paths)
    assert {"s3.multipart_treshold", "proxy.noproxy", "extra"} <= paths
    with pytest.raises(ValidationError) as caught:
        build_chain(doc["credentials"], ProxyRule(), env=clean_env)  # type: ignore[arg-type]
    assert caught.value.paths == ["credentials[1].auth.rolee"]


def test_configuration_problems_name_the_path_not_the_value(clean_env: dict[str, str]) -> None:
    specs = [
        {"source": "env", "secret_key_var": 7},
        {"source": "nope"},
        {"source": "vault", "url": "x", "auth": {"method": "kubernetes"}},
    ]
    with pytest.raises(ValidationError) as caught:
        build_chain(specs, ProxyRule(), env=clean_env)
    problems = {p.path: p.message for p in caught.value.problems}
    assert problems["credentials[0].secret_key_var"] == "must be of type string"
    assert "is not a credential source" in problems["credentials[1].source"]
    assert problems["credentials[2].path"] == "is required"
    assert problems["credentials[2].url"] == "must match ^https?://"
    assert problems["credentials[2].auth.role"] == "is required"


def test_configuration_files_json_and_toml(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(
        'root = "s3://b/p"\n[s3]\nregion = "eu-west-1"\n[[credentials]]\nsource = "env"\n'
    )
    settings = load_settings(str(tmp_path / "c.toml"), {})
    assert (settings.root, settings.s3.region, settings.credentials) == (
        "s3://b/p",
        "eu-west-1",
        ({"source": "env"},),
    )
    (tmp_path / "c.json").write_text('{"s3": {"region": 5}}')
    with pytest.raises(ValidationError, match=r"s3\.region: must be of type string"):
        load_settings(None, {"JOBDISPATCH_PUBLISH_CONFIG": str(tmp_path / "c.json")})
    (tmp_path / "bad.json").write_text(f'{{"x": "{SECRET}"')
    with pytest.raises(Invalid, match="does not parse") as caught:
        load_settings(str(tmp_path / "bad.json"), {})
    assert SECRET not in str(caught.value)
    assert load_settings(None, {}) == Settings()


def test_secrets_never_reach_the_logs(
    clean_env: dict[str, str], caplog: pytest.LogCaptureFixture, endpoint: FakeCredentialEndpoint
) -> None:
    caplog.set_level(logging.DEBUG)
    env = {
        **clean_env,
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE1",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": TOKEN,
    }
    chain([{"source": "env"}], env)
    env = {
        **clean_env,
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint.url + "/c",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN": "Bearer pod-identity",
    }
    chain([{"source": "container"}], env)
    assert "credentials: using" in caplog.text
    assert SECRET not in caplog.text
    assert TOKEN not in caplog.text
    assert os.environ.get("AWS_SECRET_ACCESS_KEY") != SECRET
