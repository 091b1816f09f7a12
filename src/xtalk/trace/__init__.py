"""The kernel scheduling trace of a run: parsing, per-job culprits, Perfetto export."""
