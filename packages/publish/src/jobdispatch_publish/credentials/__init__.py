"""Credential sources for the checkpoint store, tried in the order the configuration lists them.

Each source is a plugin registered under the ``credential-source`` kind of the core's plugin
manager, so a site can add its own. The built-in ones: ``aws`` (botocore's default chain) and
``vault``.
"""
