from __future__ import annotations

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, StructType
from pyspark.sql import types as st

from icesink.errors import SchemaError
from icesink.schema.names import check_new_table_names, field_path, match_names, spark_column_name

TABLE = (
    NestedField(1, "id", LongType()),
    NestedField(2, "Id", LongType()),
    NestedField(3, "Name", StringType()),
)


@pytest.mark.parametrize(
    ("batch", "case_sensitive", "matched", "extra"),
    [
        (["id"], False, {0: 0}, []),
        (["Id"], False, {1: 0}, []),
        (["Id", "id"], False, {1: 0, 0: 1}, []),
        (["name", "id"], False, {2: 0, 0: 1}, []),
        (["name"], True, {}, [0]),
        (["new", "NEW2"], False, {}, [0, 1]),
    ],
)
def test_exact_names_first_then_a_single_match_ignoring_case(
    batch: list[str], case_sensitive: bool, matched: dict[int, int], extra: list[int]
) -> None:
    assert match_names(TABLE, batch, (), case_sensitive) == (matched, extra)


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (["ID"], r"'ID' matches 2 columns.*'id', 'Id'"),
        (["name", "NAME"], r"'name' and 'NAME'.*differ only in case"),
        (["x", "X"], r"'x' and 'X'"),  # two new columns that would differ only in case
        (["id", "id"], r"two columns named 'id'"),
    ],
)
def test_names_that_would_be_one_column_are_refused(batch: list[str], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        match_names(TABLE, batch, (), False)


def test_a_new_table_takes_each_name_once_at_every_depth() -> None:
    inner = st.StructType([st.StructField("k", st.LongType()), st.StructField("K", st.LongType())])
    nested = st.StructType([st.StructField("s", st.ArrayType(inner))])
    check_new_table_names(nested, True, "db.t")
    with pytest.raises(SchemaError, match=r"struct 's\.element' of the batch has columns 'k' and 'K'"):
        check_new_table_names(nested, False, "db.t")


def test_field_paths_keep_dotted_names_whole() -> None:
    schema = Schema(
        NestedField(1, "a.b", LongType()),
        NestedField(2, "x", StructType(NestedField(3, "b", LongType()), NestedField(4, "c`d", LongType()))),
    )
    assert field_path(schema, 1) == ("a.b",)
    assert field_path(schema, 3) == ("x", "b")
    assert spark_column_name(field_path(schema, 1)) == "`a.b`"
    assert spark_column_name(field_path(schema, 4)) == "`x`.`c``d`"
    with pytest.raises(ValueError, match="no field with id 9"):
        field_path(schema, 9)
