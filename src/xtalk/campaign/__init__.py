"""Campaigns: many experiments (applications × configurations × parameter grids × enemy
scenarios × repetitions) run unattended, journaled, resumable, on one or many targets.

    schema.py    the campaign file (TOML) and its JSON Schema
    detect.py    campaign file or experiment file? (without the models)
    lines.py     key path -> line number in the TOML text (for one-line errors)
    grid.py      campaign -> ordered list of runs (reuses config.expand)
    journal.py   append-only, fsynced record of every run's state
    estimate.py  duration estimates before and during a campaign
    executor.py  the run loop: one run at a time per target, crash-safe
    status.py    done / failed / remaining and ETA, from another terminal
    results.py   the campaign as one DuckDB database (extends store.Results)
"""
