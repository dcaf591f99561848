"""Shell completion of the JOB arguments: the ids and names of the store's jobs.

Click's completion (``_JOBDISPATCH_COMPLETE=bash_source jobdispatch``, see the how-to) parses
the words typed so far without running any command, then asks each argument for its
candidates. A JOB argument answers from the store the command would use (``--store``,
``--cluster`` and ``--config`` typed before the command are honoured), reading only the records'
headers: no record is folded and no cluster is asked, so a Tab costs one read of the store. A
store that does not exist yet is not created, and nothing is ever printed: whatever goes
wrong, a Tab offers nothing rather than writing an error into the person's command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from click import Context, Parameter
from click.shell_completion import CompletionItem

if TYPE_CHECKING:  # the command imports this module; the store's modules load on a Tab only
    from jobdispatch_cli.context import App

__all__ = ["complete_jobs"]


def complete_jobs(ctx: Context, param: Parameter, incomplete: str) -> list[CompletionItem]:
    """Ids that start with ``incomplete`` (each with its job's name as help), then the names
    that do (each once, with how many jobs carry it)."""
    from jobdispatch_cli.context import App

    del param
    given = ctx.find_root().params
    app = App(
        config_path=given.get("config_path"),
        cluster=given.get("cluster"),
        store=given.get("store"),
        actor="completion",
    )
    app.reads_only = True
    try:
        return _candidates(app, incomplete)
    except Exception:  # a Tab must never print a traceback into the prompt
        return []
    finally:
        app.close()


def _candidates(app: App, incomplete: str) -> list[CompletionItem]:
    from jobdispatch.records.events import View
    from jobdispatch.records.store import ListFilter

    if app.shared_store() is None and not (app.store_dir / "data.mdb").exists():
        return []  # no store yet: completing must not create one
    store = app.store()
    ids = list(store.list(ListFilter(settled=None)))
    names: dict[str, str] = {}
    for answer in store.read_many(ids):
        if isinstance(answer, View):
            names[answer.job] = answer.header.spec.name
    items = [
        CompletionItem(job, help=names.get(job, "")) for job in ids if job.startswith(incomplete)
    ]
    counts: dict[str, int] = {}
    for name in names.values():
        if name and name.startswith(incomplete) and name not in ids:
            counts[name] = counts.get(name, 0) + 1
    for name, n in sorted(counts.items()):
        items.append(CompletionItem(name, help="a job's name" if n == 1 else f"{n} jobs' name"))
    return items
