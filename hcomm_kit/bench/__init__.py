"""The benchmark (`hcomm-kit bench`): sweeps, timing, reports and baselines."""
