"""Adapter package (filled in by its issue)."""
