"""Reporting: markdown and HTML reports, plots, thumbnails of gold regions."""
