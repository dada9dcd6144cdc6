"""Jobs: mpirun lookup and launch, job output, the per-rank runner of `run`/`demo`."""
