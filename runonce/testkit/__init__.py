"""What tests, benchmarks and the demo use to check runonce from outside: workloads with
planted repeats (``workload``), the seed incidents as scenarios (``scenarios``), and the
oracle that accounts for every requested action exactly once (``oracle``)."""
