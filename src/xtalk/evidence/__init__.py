"""`xtalk evidence`: results turned into a bundle an applicant can file, indexed by the
objectives of multicore timing certification (MCP_Planning_1 ... MCP_Accomplishment_Summary_1).

    BUNDLE/index.html             the evidence: metadata header, one section per objective
                                  (its artifacts, or "not covered" and why), the traceability matrix
    BUNDLE/index.pdf              the same, printed by headless Chromium (absent when it is not installed)
    BUNDLE/objectives/<ID>/*.csv  each objective's tables, as shown
    BUNDLE/traceability.csv       objective → artifact → run ids
    BUNDLE/data/<input>/          the raw data: experiment.json, runs, verdicts, pWCET and misses as
                                  CSV, every run's run.json, plan and job tables (runs/<id>/)
    BUNDLE/manifest.json          every file above with its SHA-256, the inputs' hashes, the environment
    BUNDLE/manifest.json.sig      OpenSSH signature of manifest.json (`ssh-keygen -Y sign`), with --key
    BUNDLE/signer.pub             the public key that made it

The ISO 26262 view (freedom from interference per criticality pair) and the ECSS view (CPU
budget per application against each review's margin) are evidence/views.py.
`xtalk evidence verify BUNDLE` re-hashes every file and checks the signature (evidence/manifest.py);
`xtalk evidence replay BUNDLE` re-runs the recorded plans and judges each cell (evidence/replay.py).
"""
