"""Murmur3 x86 32-bit, seed 0, as native Spark Column expressions.

Iceberg's bucket transform hashes the spec's byte encoding of a value with this hash
(spec Appendix B). These functions build it from Spark's own expressions, so it runs
code-generated in the JVM with no Python round trip; they only build Columns.

Spark's ``hash()`` is murmur3 x86 32-bit too, but seeded with 42 and, for byte strings
whose length is not a multiple of 4, with a non-standard tail. Three facts make it
usable anyway:

* ``hash(a, b)`` hashes ``b`` seeded with the hash of ``a``, and
  :data:`ZERO_SEED_PREFIX` is the one ``int`` whose ``hash()`` is 0. So
  ``hash(ZERO_SEED_PREFIX, b)`` hashes ``b`` with seed 0, and for a long ``b`` that is
  exactly Iceberg's ``hashLong`` (8 little-endian bytes).
* Padding a byte string with zeros to the next multiple of 4 (always adding at least
  one byte) leaves only whole blocks, which Spark hashes in the standard way; its last
  block is the standard tail word. Undoing the finalizer and the last block's mixing
  recovers the state the standard algorithm finalizes with the real length.
* Finalizing that state is done by Spark again: for an ``int`` ``x``, seed-0
  ``hash(x)`` is ``fmix(mix_h(0, mix_k(x)), 4)``, and ``x`` can be chosen by inverting
  ``mix_h`` and ``mix_k``.

The inversions work on 32-bit words held unsigned in ``[0, 2**32)`` inside ``LongType``
columns. Nothing may overflow a long, because under ANSI mode (Spark 4's default) an
overflow fails the query: a word is only multiplied by a constant in its *signed*
32-bit form, which bounds every product by ``2**31 * 2**32 = 2**63``.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["ZERO_SEED_PREFIX", "bucket_of_hash", "murmur3_bytes", "murmur3_long"]

ZERO_SEED_PREFIX = -1693959553
"""The ``int`` whose Spark ``hash()`` (murmur3, seed 42) is 0; found by inverting murmur3."""

_MASK32 = 0xFFFFFFFF
_H_ADD = 0xE6546B64
# Multiplicative inverses modulo 2**32 of the constants murmur3 multiplies by.
_C1_INV = 0xDEE13BB1
_C2_INV = 0x56ED309B
_FIVE_INV = 0xCCCCCCCD
_FMIX1_INV = 0xA5CB9243
_FMIX2_INV = 0x7ED1B41D


def murmur3_long(value: Column) -> Column:
    """The hash of a long's 8 little-endian bytes (Iceberg's ``hashLong``).

    Args:
        value: A ``LongType`` column; widen ints and dates to long first, as Iceberg does.

    Returns:
        An ``IntegerType`` column with the hash as Java's ``int``; null where ``value``
        is null.
    """
    return _keep_null(F.hash(F.lit(ZERO_SEED_PREFIX), value), value)


def murmur3_bytes(value: Column) -> Column:
    """The hash of a byte string (Iceberg's ``hashBytes``).

    Args:
        value: A ``BinaryType`` column; cast strings to binary for their UTF-8 bytes.

    Returns:
        An ``IntegerType`` column with the hash as Java's ``int``; null where ``value``
        is null.
    """
    length = F.octet_length(value).cast("long")
    padded_length = length.bitwiseAND(_lit(~3)) + _lit(4)
    padded = F.rpad(value, padded_length.cast("int"), F.lit(b"\x00"))
    spark_hash = F.hash(F.lit(ZERO_SEED_PREFIX), padded).cast("long").bitwiseAND(_lit(_MASK32))
    # h ^ mix_k(tail word): the state after the whole blocks, mixed with the tail.
    state = _unmix_h(_unfmix(spark_hash, padded_length))
    # Seed-0 hash(x) of an int x is fmix(mix_h(0, mix_k(x)), 4); this x makes it
    # fmix(state, length), since fmix(h, n) starts with h ^ n.
    x = _unmix_k(_unmix_h(state.bitwiseXOR(length).bitwiseXOR(_lit(4))))
    return _keep_null(F.hash(F.lit(ZERO_SEED_PREFIX), _to_int(x)), length)


def bucket_of_hash(hash_value: Column, num_buckets: int) -> Column:
    """Iceberg's bucket id ``(hash & Integer.MAX_VALUE) % N`` of an ``IntegerType`` hash."""
    return hash_value.bitwiseAND(_lit(0x7FFFFFFF)) % _lit(num_buckets)


def _keep_null(hash_value: Column, witness: Column) -> Column:
    """``hash_value``, but null where ``witness`` is null.

    Spark's ``hash()`` skips null arguments instead of returning null. A ``when()``
    would hide the big expressions above in a conditional branch, where Spark does not
    eliminate common subexpressions; xor with a zero that is null with ``witness``
    does not.
    """
    return hash_value.bitwiseXOR(witness.bitwiseAND(_lit(0)).cast("int"))


def _lit(value: int) -> Column:
    return F.lit(value)


def _signed(constant: int) -> int:
    return constant - (1 << 32) if constant >= 1 << 31 else constant


def _to_int(word: Column) -> Column:
    """An unsigned 32-bit word as the ``IntegerType`` value with the same bits."""
    return ((word + _lit(1 << 31)).bitwiseAND(_lit(_MASK32)) - _lit(1 << 31)).cast("int")


def _mul(word: Column, constant: int) -> Column:
    """``word * constant`` modulo 2**32, never overflowing a long (see module docstring)."""
    return (word * _lit(_signed(constant))).bitwiseAND(_lit(_MASK32))


def _rotl(word: Column, bits: int) -> Column:
    return F.shiftleft(word, bits).bitwiseAND(_lit(_MASK32)).bitwiseOR(F.shiftright(word, 32 - bits))


def _unxorshift(word: Column, bits: int) -> Column:
    """Inverse of ``word ^ (word >>> bits)`` on 32-bit words, for ``bits`` of 11 or more."""
    undone = word.bitwiseXOR(F.shiftright(word, bits))
    if bits < 16:
        undone = undone.bitwiseXOR(F.shiftright(word, 2 * bits))
    return undone


def _unfmix(word: Column, length: Column) -> Column:
    """Inverse of murmur3's finalizer ``fmix(h, length)``."""
    h = _mul(_unxorshift(word, 16), _FMIX2_INV)
    h = _mul(_unxorshift(h, 13), _FMIX1_INV)
    return _unxorshift(h, 16).bitwiseXOR(length)


def _unmix_h(word: Column) -> Column:
    """Inverse of ``mix_h(h, k) = rotl(h ^ k, 13) * 5 + 0xe6546b64``, giving ``h ^ k``."""
    return _rotl(_mul((word - _lit(_H_ADD)).bitwiseAND(_lit(_MASK32)), _FIVE_INV), 32 - 13)


def _unmix_k(word: Column) -> Column:
    """Inverse of ``mix_k(k) = rotl(k * c1, 15) * c2``."""
    return _mul(_rotl(_mul(word, _C2_INV), 32 - 15), _C1_INV)
