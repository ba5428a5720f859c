"""The executor: consume approved actions for one vendor, perform each through its connector
once, commit results and offsets in one Kafka transaction. ``executor.py`` the loop's task,
``batch.py`` what each record needs before any call, ``runner.py`` one action's protocol,
``results.py``/``result_store.py`` the results index, ``limits.py`` the pace toward a vendor,
``registry.py`` which connector serves which vendor."""
