"""Everything that runs in a worker, torch-free."""
