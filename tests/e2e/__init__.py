"""End-to-end tests: arl-learn as a user runs it (console, exit codes, signals, results folders, Unity builds)."""
