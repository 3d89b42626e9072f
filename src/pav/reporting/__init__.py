"""Renderings of results.json for people (summary.txt) and CI (junit.xml)."""
