"""The pure core of runonce: what an action is, what a policy says, and the decision.

Nothing here imports faust, Kafka, RocksDB or Avro, and nothing reads a clock:
time arrives as an argument taken from the record, so a replay decides the same way.
Where is a decision made? ``runonce/core/decide.py``.
"""
