"""The built-in environments (builtin:NAME in env_path)."""
