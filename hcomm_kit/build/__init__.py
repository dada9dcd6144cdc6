"""Build tooling: the content-hash build cache (:mod:`hcomm_kit.build.cache`) and, later,
operator builds. Compile, cache and load are separate units joined by one function."""
