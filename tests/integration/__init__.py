"""Integration tests: trainers, env managers and adapters together; learning tests on tiny deterministic environments with reward thresholds."""
