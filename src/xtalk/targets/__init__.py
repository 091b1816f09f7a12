"""Where runs execute, and the one door to an agent: `base` (the interface, this machine),
`ssh` (a board over SSH), `spec` (a target from `--target`), `lock` (one run at a time per
machine). Below config and campaign: nothing here knows an experiment or a campaign."""
