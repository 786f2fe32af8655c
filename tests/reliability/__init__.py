"""Reliability suite: crash, disk-full, permission, hostile-input, security and race tests."""
