"""Interference model of seed 000 ch. 4: platform and bus-access profiles, exhaustive
explorer, brute-force cross-check, UPPAAL export and counts-to-time penalties."""
