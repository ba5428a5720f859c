"""The wire contract every process shares: how records are encoded (``codec``: Avro, single
object encoding, schemas in ``schemas/``)."""
