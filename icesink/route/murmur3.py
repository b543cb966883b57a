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

Each inversion step reads its input word two or three times, and Spark's expression
trees do not share subexpressions, so :func:`murmur3_bytes` expands to about 3,000
nodes. Code generation computes each common subexpression once, so only planning
pays for the size. This module relies on how Spark's ``hash()`` chains seeds and
hashes ints, longs and binary; :func:`icesink.route.self_check.verify_bucket_function`
checks that at start-up.

:func:`spark_hash_preimage` runs the same inversion in plain Python on the driver: the
``int`` whose Spark ``hash()`` is a given value. The bucket shuffle
(:mod:`icesink.route.shuffle`) uses it to choose shuffle partitions exactly.
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = [
    "ZERO_SEED_PREFIX",
    "bucket_of_hash",
    "murmur3_block_bytes",
    "murmur3_bytes",
    "murmur3_long",
    "spark_hash_preimage",
]

ZERO_SEED_PREFIX = -1693959553
"""The ``int`` whose Spark ``hash()`` (murmur3, seed 42) is 0; found by inverting murmur3."""

_MASK32 = 0xFFFFFFFF
_SPARK_SEED = 42
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


def murmur3_block_bytes(value: Column) -> Column:
    """The hash of a byte string whose length is a multiple of 4, such as a UUID's 16 bytes.

    Cheaper than :func:`murmur3_bytes`: with whole blocks only, Spark's ``hash()`` is
    already the standard algorithm. Wrong for other lengths.

    Args:
        value: A ``BinaryType`` column whose values all have a length divisible by 4.

    Returns:
        An ``IntegerType`` column with the hash as Java's ``int``; null where ``value``
        is null.
    """
    return _keep_null(F.hash(F.lit(ZERO_SEED_PREFIX), value), F.octet_length(value))


def bucket_of_hash(hash_value: Column, num_buckets: int) -> Column:
    """Iceberg's bucket id ``(hash & Integer.MAX_VALUE) % N`` of an ``IntegerType`` hash."""
    return hash_value.bitwiseAND(F.lit(0x7FFFFFFF)) % F.lit(num_buckets)


def spark_hash_preimage(value: int) -> int:
    """The ``int`` whose Spark ``hash()`` (murmur3 x86 32-bit, seed 42) is ``value``.

    Spark hashes an ``int`` ``x`` as ``fmix(mix_h(42, mix_k(x)), 4)``; every step is a
    bijection on 32-bit words, so each value has exactly one preimage, found by running
    the steps backwards. ``spark_hash_preimage(0)`` is :data:`ZERO_SEED_PREFIX`.

    Args:
        value: Any 32-bit value, signed or unsigned.

    Returns:
        The preimage as a signed 32-bit ``int``.
    """
    h = _py_unxorshift(value & _MASK32, 16)
    h = _py_unxorshift((h * _FMIX2_INV) & _MASK32, 13)
    h = _py_unxorshift((h * _FMIX1_INV) & _MASK32, 16) ^ 4  # undo fmix(h, 4): 4 is an int's length
    h = _py_rotl((((h - _H_ADD) & _MASK32) * _FIVE_INV) & _MASK32, 32 - 13)  # 42 ^ mix_k(x)
    k = (_py_rotl(((h ^ _SPARK_SEED) * _C2_INV) & _MASK32, 32 - 15) * _C1_INV) & _MASK32
    return k - (1 << 32) if k >= 1 << 31 else k


def _py_rotl(word: int, bits: int) -> int:
    return ((word << bits) | (word >> (32 - bits))) & _MASK32


def _py_unxorshift(word: int, bits: int) -> int:
    undone = word ^ (word >> bits)
    if bits < 16:
        undone ^= word >> (2 * bits)
    return undone


def _keep_null(hash_value: Column, witness: Column) -> Column:
    """``hash_value``, but null where ``witness`` is null.

    Spark's ``hash()`` skips null arguments instead of returning null. A ``when()``
    would hide the big expressions above in a conditional branch, where Spark does not
    eliminate common subexpressions; xor with a zero that is null with ``witness``
    does not.
    """
    return hash_value.bitwiseXOR(witness.bitwiseAND(F.lit(0)).cast("int"))


def _lit(value: int) -> Column:
    """A ``LongType`` literal, so that Spark needs no casts to combine it with the words."""
    return F.lit(np.int64(value))


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
