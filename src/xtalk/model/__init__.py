"""Interference model of seed 000 ch. 4: platform and bus-access profiles, exhaustive
explorer (native core in explorer/, Python reference), brute-force cross-check, state
estimate, UPPAAL export and counts-to-time penalties."""
