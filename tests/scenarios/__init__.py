"""Scenario suite: sick and healthy workloads run live, diagnosed, and scored against what each should show."""
