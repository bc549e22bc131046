"""The types and tools every room shares; imports no other room."""
