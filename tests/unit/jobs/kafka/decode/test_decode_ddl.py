"""Spark DDL schemas parsed without a SparkSession, as Spark parses them."""

from __future__ import annotations

import pytest
from pyspark.sql import types as st

from icesink.jobs.kafka.decode.ddl import DdlError, parse_ddl


def test_every_supported_type() -> None:
    schema = parse_ddl(
        "a BOOLEAN, b tinyint, c SMALLINT, d INT, e bigint, f float, g DOUBLE, h date, i TIMESTAMP, "
        "j timestamp_ntz, k STRING, l VARCHAR(10), m binary, n DECIMAL(10, 2), o dec, "
        "p ARRAY<INT>, q MAP<STRING, BIGINT>, r STRUCT<x: INT, `y z` ARRAY<STRING>>"
    )
    assert schema.simpleString() == (
        "struct<a:boolean,b:tinyint,c:smallint,d:int,e:bigint,f:float,g:double,h:date,i:timestamp,"
        "j:timestamp_ntz,k:string,l:string,m:binary,n:decimal(10,2),o:decimal(10,0),p:array<int>,"
        "q:map<string,bigint>,r:struct<x:int,y z:array<string>>>"
    )


def test_colons_not_null_comments_and_quoted_names() -> None:
    schema = parse_ddl("`odd``name`: INT NOT NULL COMMENT 'the id', b string")
    assert schema.fields[0] == st.StructField("odd`name", st.IntegerType(), nullable=False)
    assert schema.fields[1].nullable


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("", "ends where a field name"),
        ("a", "ends where a type"),
        ("a int,", "ends where a field name"),
        ("a integr", "unknown type 'integr'"),
        ("a int b int", "expected ',' or the end at position 6"),
        ("a array<int", "ends where '>'"),
        ("a decimal(39, 2)", "decimal(39, 2) is not valid"),
        ("a int, A string", "duplicate field names ['a']"),
        ("a int not nul", "expected NULL after NOT"),
        ("a int; drop", "unexpected character ';'"),
    ],
)
def test_errors_say_where_and_what(ddl: str, message: str) -> None:
    with pytest.raises(DdlError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        parse_ddl(ddl)
