"""What every adapter needs and none should write again: the adapter kit.

An adapter is what is specific to its scheduler (how to talk to it, what its objects mean, what
its probe learns); everything adapters share lives here, written once, one module a concept:

* :mod:`~jobdispatch.kit.settings`: settings declared once, as attrs classes from which the
  JSON Schema is derived, read by one constructor, ``from_config``;
* :mod:`~jobdispatch.kit.refusal`: the start-time refusal of what the cluster answers no for;
* :mod:`~jobdispatch.kit.deadline`: the refusal of a call that comes after its recorded
  deadline;
* :mod:`~jobdispatch.kit.facts`: a cache of probed facts with a time to live, and the answers of
  a cluster that was not probed;
* :mod:`~jobdispatch.kit.followed`: a followed output stream, for ``output(follow=True)``.

Adapters import from those modules; this package imports none of them, so a plugin's
registration that needs one module of the kit pays for that module only.
"""
