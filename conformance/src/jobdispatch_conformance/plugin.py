"""The pytest plugin. It registers nothing and imports nothing heavy unless a test selects the
suite by subclassing its classes, so installing the package changes no other project's tests."""

from __future__ import annotations
