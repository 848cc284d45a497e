"""Backups: when to take them (schedule.py) and which to keep (retention.py), as pure decisions.

The backup actor that acts on them is still to come (issue 11); these rules are its contract.
"""
