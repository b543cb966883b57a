"""Upserts: a change batch applied as new data files plus position deletes, in one snapshot.

The building blocks, in the order a batch uses them:

1. :mod:`icesink.upsert.changes` keeps the last change of every key of the batch;
2. :mod:`icesink.upsert.plan` (driver) finds, from the table's manifests alone, the data
   files that can hold those keys (:mod:`icesink.upsert.candidates`: by partition and key
   bounds), and the delete files that already apply to them;
3. :mod:`icesink.upsert.lookup` (executors) reads the key columns of those files, finds the
   rows holding the keys and writes position delete files for them
   (:mod:`icesink.write.position_deletes`);
4. :mod:`icesink.upsert.row_delta` (driver) commits the new data files and the delete files
   in one ``overwrite`` snapshot (:mod:`icesink.commit.snapshot`), after checking
   (:mod:`icesink.upsert.validate`) that no concurrent commit removed a file they point at
   or added rows of the batch's keys; if one did, the lookup is redone
   (:mod:`icesink.upsert.batch`).
"""
