"""The agent SDK: what an agent calls to publish an intended action (``submit``) and await
its outcome (``client``, ``watch``). Agents import ``runonce.ActionClient``."""
