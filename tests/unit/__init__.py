"""Unit tests: maths against hand values, config errors, failure paths, the pieces alone."""
