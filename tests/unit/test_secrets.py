from __future__ import annotations

import pytest
from pydantic import SecretStr

from icesink.secrets import SecretUri, hidden, redact


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("postgresql+psycopg2://ingest:pa%2Fss@db:5432/cat", "postgresql+psycopg2://ingest:***@db:5432/cat"),
        ("https://client:p@ss@rest.example:8181/v1", "https://client:***@rest.example:8181/v1"),
    ],
)
def test_a_uri_with_a_password_shows_all_but_the_password(uri: str, shown: str) -> None:
    value = hidden("uri", uri)
    assert isinstance(value, SecretUri) and value.get_secret_value() == uri
    assert str(value) == shown and shown in repr(value)


@pytest.mark.parametrize(
    "uri", ["sqlite:////data/catalog.db", "http://127.0.0.1:8181", "s3://bucket/warehouse"]
)
def test_a_uri_without_a_password_stays_plain(uri: str) -> None:
    assert hidden("uri", uri) == uri


def test_credential_keys_are_secret_and_masked_as_written_and_decoded() -> None:
    key = hidden("s3.secret-access-key", "abc/def+ghi")
    assert isinstance(key, SecretStr) and "abc" not in repr(key)
    uri = hidden("uri", "postgresql://u:pa%40ss@h/db")
    text = "failed: pa%40ss / pa@ss / abc/def+ghi / abc%2Fdef%2Bghi"
    assert redact(text, [key, uri, "plain"]) == "failed: *** / *** / *** / ***"


def test_the_write_spec_shipped_to_executors_does_not_show_its_credentials() -> None:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema

    from icesink.write.spec import WriteSpec

    spec = WriteSpec(
        table="db.t",
        schema=Schema(),
        partition_spec=PartitionSpec(),
        data_location="s3://bucket/db/t/data",
        io_properties={"s3.secret-access-key": "k3y-S3CRET-value", "uri": "postgresql://u:pw-S3CRET@h/db"},
        table_properties={},
        file_prefix="p",
        target_file_size_bytes=1024,
        row_group_size_bytes=1024,
        memory_budget_bytes=1024,
        compression="zstd",
        num_data_columns=0,
    )
    assert "S3CRET" not in repr(spec) and "S3CRET" not in str(spec)
    assert spec.io_properties["s3.secret-access-key"] == "k3y-S3CRET-value"  # the task still gets them
