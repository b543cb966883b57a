"""The driver's side of a micro-batch, for one table or many: the steps are :mod:`icesink.sink`'s."""
