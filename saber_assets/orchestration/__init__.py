"""`saber build`: the plan (``plan``: which job's partitions are missing or unsynced, and why),
the loop that launches them as Dagster runs (``launch``), on a deployment too (``remote``), and
the recovery of the Dagster runs a killed build left behind (``dead_launches``). "Run"
alone means a retriever's run everywhere else."""
