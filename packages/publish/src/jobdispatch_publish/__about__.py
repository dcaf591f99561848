"""The version of jobdispatch-publish, read by hatchling at build time."""

__version__ = "0.1.0.dev0"
