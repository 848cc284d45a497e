"""Maintenance: defragmentation rounds, and recovery from the NOSPACE alarm.

The defrag actor (actor.py) decides *when* a round starts (a schedule, or fragmentation read
from each member's Status) and writes it on the cluster's MaintenanceBoard (board.py); the
cluster actor's planning decides *how* (actors/plan/maintenance.py: one member at a time,
followers first, the leader last after moving leadership, only while every member is
healthy) with the steps in steps.py. A NOSPACE alarm starts a recovery round from the
planner itself: compact, defragment every member, disarm.
"""
