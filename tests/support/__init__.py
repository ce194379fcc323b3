"""Helpers shared by the test tiers: the agent under test, scraping, workloads, cgroups."""
