"""Both durable stores answer a survey, and open read-only for the endpoint: nothing created,
nothing written, whatever the caller tries."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.errors import DispatchError, NotFound, ReadOnly, Unavailable
from jobdispatch.records import events as ev
from jobdispatch.records.store import Records, Surveyed
from jobdispatch.testing import Story
from jobdispatch_records_lmdb import LmdbRecords

TTL = timedelta(seconds=60)


@pytest.fixture(params=["lmdb", "postgresql"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """(writer, a function opening the same store read-only)."""
    if request.param == "lmdb":
        path = str(tmp_path / "records")
        writer = LmdbRecords(path)
        yield writer, lambda: LmdbRecords(path, readonly=True)
        writer.close()
        return
    from jobdispatch_records_postgres import PostgresRecords, testing

    config = {**testing.require(), "schema": testing.new_schema_name("metrics")}
    shared = PostgresRecords(config)
    yield shared, lambda: PostgresRecords(config, readonly=True)
    shared.close()
    testing.drop_schema(config, config["schema"])


def _create(store: Records, job: str) -> None:
    store.create(Story(job_id=job).header)


def test_a_survey_gives_revisions_members_leases_and_size(opener: Any) -> None:
    writer, open_readonly = opener
    for job in ("j1", "j2", "j3"):
        _create(writer, job)
    hold = Story(job_id="j2").add(ev.HoldRequested, reason="look").events[-1]
    writer.append("j2", [hold], expect_revision=0)
    writer.announce("sup-a", TTL)
    writer.announce("sup-b", TTL)
    writer.acquire("j1", "sup-a", TTL)
    writer.acquire("j3", "sup-a", TTL)
    writer.acquire("j2", "sup-b", TTL)
    writer.release(writer.acquire("j2", "sup-b", TTL))
    reader = open_readonly()
    try:
        surveyed = reader
        assert isinstance(surveyed, Surveyed)
        survey = surveyed.survey()
    finally:
        reader.close()
    assert list(survey.revisions.items()) == [("j1", 0), ("j2", 1), ("j3", 0)]
    assert sorted(survey.members) == ["sup-a", "sup-b"]
    assert all(survey.now < until for until in survey.members.values())
    assert dict(survey.leases) == {"sup-a": 2}
    assert survey.size_bytes is not None and survey.size_bytes > 0


def test_a_read_only_store_writes_nothing(opener: Any) -> None:
    writer, open_readonly = opener
    _create(writer, "j1")
    reader = open_readonly()
    try:
        with pytest.raises((ReadOnly, Unavailable)):
            reader.announce("sup", TTL)
        with pytest.raises((ReadOnly, Unavailable)):
            reader.acquire("j1", "sup", TTL)
        assert reader.read("j1").revision == 0
    finally:
        reader.close()
    assert writer.survey().members == {}


def test_opening_read_only_where_there_is_no_store_creates_none(tmp_path: Path) -> None:
    with pytest.raises(DispatchError):
        LmdbRecords(str(tmp_path / "none"), readonly=True)
    assert not (tmp_path / "none").exists()


def test_a_postgresql_schema_that_does_not_exist_is_not_created_read_only() -> None:
    from jobdispatch_records_postgres import PostgresRecords, testing

    config = {**testing.require(), "schema": testing.new_schema_name("metrics")}
    try:
        with pytest.raises(NotFound, match="read-only"):
            PostgresRecords(config, readonly=True)
        import psycopg
        from jobdispatch_records_postgres.settings import Settings

        settings = Settings.from_config({k: v for k, v in config.items() if k != "schema"})
        with psycopg.connect(**settings.connect_kwargs()) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (config["schema"],)
            ).fetchone()
        assert row == (0,)
    finally:
        testing.drop_schema(config, config["schema"])
