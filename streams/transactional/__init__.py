"""The default runtime of the stream job: confluent-kafka transactions (KIP-447) and one
RocksDB (rocksdict) per table partition, exactly-once.

    consume a batch ─▶ Pipeline (pure decisions over the partition's state) ─▶ one transaction:
        decisions, re-keys, stage-2 hand-offs, dead letters, changelog writes, input offsets
    committed ─▶ the state changes go to the local RocksDB with the changelog offset they reach
    aborted   ─▶ the state changes are dropped, the consumer goes back to the committed offsets

``worker.py`` is the loop, ``state.py`` the stores, ``restore.py`` the changelog reader."""
