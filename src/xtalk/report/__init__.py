"""Renderings of results: the summary table (terminal, Markdown, JSON)."""
