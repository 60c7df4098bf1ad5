"""Test helpers shared by the test suite and by users testing their own agents."""
