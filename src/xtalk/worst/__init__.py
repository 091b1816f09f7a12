"""`xtalk worst`: search the catalog's enemies for the combination that hurts a victim most.

`space` (what may be tried, made from the agent's catalog), `search` (successive halving over
interleaved short runs; pure, testable on any noisy objective), `stopping` (when to stop
trying new candidates: a tolerance bound with a stated confidence; pure), `coverage` (the
channels the candidates loaded, and those never reached and why; pure), `runs` (experiments made,
checked and run through the local target), `confirm` (the best candidates against solo and
the best stress-ng stressor, with CIs), `output` (the reproducing experiment file, the trace
as JSON and figure), `cli` (the command's work).
"""
