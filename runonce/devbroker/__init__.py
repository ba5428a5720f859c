"""The local development broker: Apache Kafka (KRaft) from Maven Central jars, one node or
three, its SASL users, start/stop/status. Nothing in the stream job or the executors
imports it; they reach any Kafka through ``runonce.kafka``."""
