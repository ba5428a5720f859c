"""What runonce can prove about a run from its topics: the oracle behind `runonce verify`."""
