"""Receipts an auditor verifies offline (docs/receipts.md): each decision and outcome certified
by a receipt, chained to the one before it on its chain, the chain's receipts gathered under
Merkle roots signed with Ed25519, and the verification that needs only the public keys.

Pure: no Kafka, no clock (times arrive as arguments). Who writes receipts, and in which
transaction, is the stream job's and the executors' business."""
