"""Credential sources, their order, the proxy rule, and secrets kept out of errors and logs."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from jobdispatch.errors import Invalid, Unauthorized, Unreachable, ValidationError
from jobdispatch_publish.config import Settings, load_settings, parse_settings
from jobdispatch_publish.credentials.base import Credentials
from jobdispatch_publish.credentials.chain import DEFAULT_SOURCES, build_chain
from jobdispatch_publish.errors import MissingCredentials
from jobdispatch_publish.proxy import ProxyRule
from publish_fakes import FakeCredentialEndpoint, FakeSts, RecordingProxy

SECRET = "s3cr3t-Value-that-must-not-leak"
TOKEN = "session-token-that-must-not-leak"


def chain(specs: Sequence[Mapping[str, object]], proxy: ProxyRule | None = None) -> Credentials:
    return build_chain(specs, proxy or ProxyRule(), env=dict(os.environ)).resolve()


AWS = [{"source": "aws"}]


def test_the_aws_source_reads_the_standard_variables(
    clean_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    found = chain(AWS)
    assert (found.access_key, found.secret_key, found.session_token) == (
        "AKIAEXAMPLE1",
        SECRET,
        None,
    )
    assert found.source == "aws (env)"
    assert SECRET not in repr(found)
    assert SECRET not in str(found)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(Invalid, match="aws: Partial credentials found in env") as caught:
        chain(AWS)
    assert SECRET not in str(caught.value)


def test_the_aws_source_reads_profiles_of_the_shared_file(
    clean_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    creds = tmp_path / "credentials"
    creds.write_text(
        f"[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = {SECRET}\n"
        f"[train]\naws_access_key_id = AKIATRAIN\naws_secret_access_key = {SECRET}\n"
        f"aws_session_token = {TOKEN}\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    assert chain(AWS).access_key == "AKIADEFAULT"
    found = chain([{"source": "aws", "profile": "train"}])
    assert (found.access_key, found.session_token) == ("AKIATRAIN", TOKEN)
    monkeypatch.setenv("AWS_PROFILE", "train")
    assert chain(AWS).access_key == "AKIATRAIN"
    with pytest.raises(Invalid, match="profile 'nope' is not in the AWS config files"):
        chain([{"source": "aws", "profile": "nope"}])


def test_the_aws_source_runs_credential_process(
    clean_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "creds.py"
    doc = {"Version": 1, "AccessKeyId": "AKIAPROCESS", "SecretAccessKey": SECRET}
    script.write_text(f"import json\nprint(json.dumps({doc!r}))\n")
    config = tmp_path / "config"
    config.write_text(f"[profile proc]\ncredential_process = {sys.executable} {script}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    found = chain([{"source": "aws", "profile": "proc"}])
    assert (found.access_key, found.source) == ("AKIAPROCESS", "aws (custom-process)")
    script.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(Unauthorized, match="aws: "):
        chain([{"source": "aws", "profile": "proc"}])


@pytest.fixture
def sts() -> Iterator[FakeSts]:
    server = FakeSts(ROLE, "eks-projected-token", "ASIAWEBIDENTITY", SECRET, TOKEN)
    server.start()
    yield server
    server.stop()


ROLE = "arn:aws:iam::123456789012:role/trainer"


def _temporary_from_aws(access_key: str) -> Credentials:
    """What the ``aws`` source finds: temporary credentials (access key ``access_key``, the
    fakes' secret and token) that expire."""
    found = chain(AWS)
    assert (found.access_key, found.secret_key, found.session_token) == (access_key, SECRET, TOKEN)
    assert found.expires is not None
    return found


def test_the_aws_source_assumes_a_role_with_web_identity_as_on_eks(
    clean_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sts: FakeSts
) -> None:
    token = tmp_path / "token"
    token.write_text("eks-projected-token")
    monkeypatch.setenv("AWS_ROLE_ARN", ROLE)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts.url)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    found = _temporary_from_aws("ASIAWEBIDENTITY")
    assert found.source == "aws (assume-role-with-web-identity)"
    token.write_text("a-token-sts-refuses")
    with pytest.raises(Unauthorized, match="AccessDenied") as caught:
        chain(AWS)
    assert "a-token-sts-refuses" not in str(caught.value)


def test_no_credentials_names_every_source_tried(clean_env: dict[str, str]) -> None:
    with pytest.raises(MissingCredentials) as caught:
        chain([dict(s) for s in DEFAULT_SOURCES])
    text = str(caught.value)
    assert "tried aws: botocore's default chain found none" in text
    assert "web identity, credential_process" in text
    assert "AWS_EC2_METADATA_DISABLED" in text


def test_sources_of_earlier_versions_point_at_aws(clean_env: dict[str, str]) -> None:
    with pytest.raises(ValidationError) as caught:
        chain([{"source": "shared-file"}])
    assert "it is now part of 'aws'" in str(caught.value)


@pytest.fixture
def endpoint() -> Iterator[FakeCredentialEndpoint]:
    server = FakeCredentialEndpoint("ASIACONTAINER", SECRET, TOKEN, auth="Bearer pod-identity")
    server.start()
    yield server
    server.stop()


def test_the_aws_source_asks_the_container_endpoint_with_its_token_file(
    clean_env: dict[str, str],
    endpoint: FakeCredentialEndpoint,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("Bearer pod-identity")
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.url + "/v1/credentials")
    monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", str(token_file))
    _temporary_from_aws("ASIACONTAINER")


def test_a_refusing_container_endpoint_is_unreachable_and_hides_the_token(
    clean_env: dict[str, str], endpoint: FakeCredentialEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.url + "/v1/credentials")
    monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "Bearer wrong-token-value")
    with pytest.raises(Unreachable, match="aws: ") as caught:
        chain(AWS)
    assert "wrong-token-value" not in str(caught.value)


def test_the_aws_source_speaks_imdsv2(
    clean_env: dict[str, str], endpoint: FakeCredentialEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint.url + "/")
    found = chain(AWS)
    assert (found.access_key, found.session_token) == ("ASIACONTAINER", TOKEN)
    assert ("PUT", "/latest/api/token") in [(m, p) for m, p, _ in endpoint.requests]


def test_one_proxy_rule_for_every_client(
    clean_env: dict[str, str], endpoint: FakeCredentialEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = RecordingProxy().start()
    try:
        # The environment names another proxy: the rule from the configuration is what counts.
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.url + "/creds")
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "Bearer pod-identity")
        rule = ProxyRule.from_config({"url": proxy.url}, dict(os.environ))
        assert chain(AWS, rule).access_key == "ASIACONTAINER"
        port = endpoint.url.rsplit(":", 1)[1]
        assert proxy.hosts == [f"127.0.0.1:{port}"]
        bypass = ProxyRule.from_config({"url": proxy.url, "no_proxy": ["127.0.0.0/8"]}, {})
        chain(AWS, bypass)
        assert len(proxy.hosts) == 1  # went direct
    finally:
        proxy.stop()


def test_the_first_source_with_credentials_wins(
    clean_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobdispatch.plugins import Registry
    from jobdispatch_publish import _hooks

    registry = Registry("credential-source")
    _hooks.jobdispatch_register_credential_sources(registry)

    class Fixed:
        why_none = ""

        def credentials(self) -> Credentials:
            return Credentials("AKIAFIXED", SECRET, source="fixed")

    registry.add("fixed", lambda _config: Fixed())
    specs = [{"source": "aws"}, {"source": "fixed"}]
    found = build_chain(specs, ProxyRule(), registry=registry).resolve()
    assert found.access_key == "AKIAFIXED"  # aws had none
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert build_chain(specs, ProxyRule(), registry=registry).resolve().access_key == "AKIAENV"


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
            {"source": "aws"},
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
    specs: list[dict[str, object]] = [
        {"source": "aws", "profile": 7},
        {"source": "nope"},
        {"source": "vault", "url": "x", "auth": {"method": "kubernetes"}},
    ]
    with pytest.raises(ValidationError) as caught:
        build_chain(specs, ProxyRule(), env=clean_env)
    problems = {p.path: p.message for p in caught.value.problems}
    assert problems["credentials[0].profile"] == "must be of type string"
    assert "is not a credential source" in problems["credentials[1].source"]
    assert problems["credentials[2].path"] == "is required"
    assert problems["credentials[2].url"] == "must match ^https?://"
    assert problems["credentials[2].auth.role"] == "is required"


def test_configuration_files_json_and_toml(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(
        'root = "s3://b/p"\n[s3]\nregion = "eu-west-1"\n[[credentials]]\nsource = "aws"\n'
    )
    settings = load_settings(str(tmp_path / "c.toml"), {})
    assert (settings.root, settings.s3.region, settings.credentials) == (
        "s3://b/p",
        "eu-west-1",
        ({"source": "aws"},),
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
    clean_env: dict[str, str],
    caplog: pytest.LogCaptureFixture,
    endpoint: FakeCredentialEndpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    with monkeypatch.context() as m:
        m.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE1")
        m.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        m.setenv("AWS_SESSION_TOKEN", TOKEN)
        chain(AWS)
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.url + "/c")
    monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "Bearer pod-identity")
    chain(AWS)
    assert "credentials: using" in caplog.text
    assert SECRET not in caplog.text
    assert TOKEN not in caplog.text
