"""Test data for xtalk's own tests and benchmarks: results directories with planted effects
(`synthetic`: an experiment's; `synthetic_campaign`: a campaign's, the layout `xtalk campaign
run` writes) and the command-line fuzzer (`fuzz`). Nothing of the product imports them."""
