"""Environment managers: how the workers run (subprocess, Ray, in-process), their deadlines and restarts, and the worker runtime."""
