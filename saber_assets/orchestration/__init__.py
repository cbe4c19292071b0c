"""`saber build`: the plan (``plan``: which job's partitions are missing or unsynced, and why),
the loop that runs them (``run``), on a deployment too (``remote``), and the recovery of runs a
killed build left behind (``dead_runs``)."""
