"""The ground every layer stands on: errors, environment variables, dtypes, limits,
argument validation, packaged data trees, progress display. Imports nothing else of hcomm_kit."""
