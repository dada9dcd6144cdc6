"""Diagnosis on the Python side: the per-rank log and trace files (the checker and the
hang analysis live in the emulator, hcomm_kit/emu/src/diag/)."""
