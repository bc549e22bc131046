"""MA-POCA."""
