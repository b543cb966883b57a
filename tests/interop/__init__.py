"""Other engines (Iceberg Java) reading and maintaining the tables icesink writes."""
