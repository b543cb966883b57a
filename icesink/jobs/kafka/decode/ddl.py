"""Parse a Spark DDL schema string (``"id BIGINT, tags ARRAY<STRING>"``) without a SparkSession.

Configuration is checked before Spark starts, so a fixed value schema is parsed here,
in plain Python, into pyspark's type objects (which need no JVM). The grammar is the
part of Spark's that describes columns::

    schema := field ("," field)*
    field  := name [":"] type ["NOT" "NULL"] ["COMMENT" 'text']
    type   := BOOLEAN | TINYINT | BYTE | SMALLINT | SHORT | INT | INTEGER | BIGINT | LONG
            | FLOAT | REAL | DOUBLE | DATE | TIMESTAMP | TIMESTAMP_LTZ | TIMESTAMP_NTZ
            | STRING | VARCHAR(n) | CHAR(n) | BINARY | DECIMAL[(p[, s])] | DEC | NUMERIC
            | ARRAY<type> | MAP<type, type> | STRUCT<field, ...>

Names may be quoted with backticks; keywords are case-insensitive.
"""

from __future__ import annotations

import re

from pyspark.sql import types as st

_TOKEN = re.compile(
    r"\s*(?:(?P<quoted>`(?:[^`]|``)*`)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<number>\d+)"
    r"|(?P<text>'(?:[^'\\]|\\.)*')|(?P<punct>[<>(),:]))"
)
_PRIMITIVES: dict[str, st.DataType] = {
    "boolean": st.BooleanType(),
    "tinyint": st.ByteType(),
    "byte": st.ByteType(),
    "smallint": st.ShortType(),
    "short": st.ShortType(),
    "int": st.IntegerType(),
    "integer": st.IntegerType(),
    "bigint": st.LongType(),
    "long": st.LongType(),
    "float": st.FloatType(),
    "real": st.FloatType(),
    "double": st.DoubleType(),
    "date": st.DateType(),
    "timestamp": st.TimestampType(),
    "timestamp_ltz": st.TimestampType(),
    "timestamp_ntz": st.TimestampNTZType(),
    "string": st.StringType(),
    "binary": st.BinaryType(),
}
_DECIMALS = ("decimal", "dec", "numeric")
_MAX_DECIMAL_PRECISION = 38


class DdlError(ValueError):
    """The DDL string is not a valid schema; the message says where and what was expected."""


def parse_ddl(ddl: str) -> st.StructType:
    """Parse ``ddl`` into a StructType.

    Raises:
        DdlError: Naming the position and what was found and expected.
    """
    parser = _Parser(ddl)
    fields = parser.fields(end=None)
    return st.StructType(fields)


class _Parser:
    def __init__(self, text: str) -> None:
        self._tokens: list[tuple[str, str, int]] = []  # (kind, value, position)
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            match = _TOKEN.match(text, pos)
            if match is None or match.lastgroup is None:
                raise DdlError(f"unexpected character {text[pos:].lstrip()[:1]!r} at position {pos}")
            self._tokens.append((match.lastgroup, match.group(match.lastgroup), match.start(match.lastgroup)))
            pos = match.end()
        self._index = 0

    def fields(self, end: str | None) -> list[st.StructField]:
        fields: list[st.StructField] = []
        if end is not None and self._peek_punct(end):
            return fields
        while True:
            fields.append(self._field())
            if not self._peek_punct(","):
                break
            self._next()
        if end is None and self._index < len(self._tokens):
            raise self._error("',' or the end")
        names = [f.name.lower() for f in fields]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise DdlError(f"duplicate field names {duplicates}")
        return fields

    def _field(self) -> st.StructField:
        kind, value, _ = self._next("a field name")
        if kind == "quoted":
            name = value[1:-1].replace("``", "`")
        elif kind == "word":
            name = value
        else:
            raise self._error("a field name", back=1)
        if self._peek_punct(":"):
            self._next()
        data_type = self._type()
        nullable = True
        if self._peek_word("not"):
            self._next()
            if not self._peek_word("null"):
                raise self._error("NULL after NOT")
            self._next()
            nullable = False
        if self._peek_word("comment"):
            self._next()
            kind, _, _ = self._next("a quoted comment")
            if kind != "text":
                raise self._error("a quoted comment", back=1)
        return st.StructField(name, data_type, nullable)

    def _type(self) -> st.DataType:
        kind, value, _ = self._next("a type")
        word = value.lower()
        if kind != "word":
            raise self._error("a type", back=1)
        if word in _PRIMITIVES:
            return _PRIMITIVES[word]
        if word in ("varchar", "char"):
            self._expect("(")
            self._number()
            self._expect(")")
            return st.StringType()
        if word in _DECIMALS:
            precision, scale = 10, 0
            if self._peek_punct("("):
                self._next()
                precision = self._number()
                if self._peek_punct(","):
                    self._next()
                    scale = self._number()
                self._expect(")")
            if not 1 <= precision <= _MAX_DECIMAL_PRECISION or scale > precision:
                raise DdlError(
                    f"decimal({precision}, {scale}) is not valid: 1 <= precision <= 38, scale <= precision"
                )
            return st.DecimalType(precision, scale)
        if word == "array":
            self._expect("<")
            element = self._type()
            self._expect(">")
            return st.ArrayType(element)
        if word == "map":
            self._expect("<")
            key = self._type()
            self._expect(",")
            value_type = self._type()
            self._expect(">")
            return st.MapType(key, value_type)
        if word == "struct":
            self._expect("<")
            fields = self.fields(end=">")
            self._expect(">")
            return st.StructType(fields)
        raise DdlError(f"unknown type {value!r} at position {self._tokens[self._index - 1][2]}")

    def _number(self) -> int:
        kind, value, _ = self._next("a number")
        if kind != "number":
            raise self._error("a number", back=1)
        return int(value)

    def _expect(self, punct: str) -> None:
        kind, value, _ = self._next(f"'{punct}'")
        if kind != "punct" or value != punct:
            raise self._error(f"'{punct}'", back=1)

    def _next(self, expected: str = "more") -> tuple[str, str, int]:
        if self._index >= len(self._tokens):
            raise DdlError(f"the schema ends where {expected} was expected")
        token = self._tokens[self._index]
        self._index += 1
        return token

    def _peek_punct(self, punct: str) -> bool:
        return self._index < len(self._tokens) and self._tokens[self._index][:2] == ("punct", punct)

    def _peek_word(self, word: str) -> bool:
        return (
            self._index < len(self._tokens)
            and self._tokens[self._index][0] == "word"
            and self._tokens[self._index][1].lower() == word
        )

    def _error(self, expected: str, back: int = 0) -> DdlError:
        index = self._index - back
        if index >= len(self._tokens):
            return DdlError(f"the schema ends where {expected} was expected")
        _, value, position = self._tokens[index]
        return DdlError(f"expected {expected} at position {position}, found {value!r}")
