"""What a connector is made of: the one room a plugin imports (docs/connectors.md). It imports
nothing of the executor or the vendors."""
