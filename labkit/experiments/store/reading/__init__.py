"""Reading a sweep store: a sweep in bulk (:mod:`.reads`), and what was written after a mark,
for a reader that follows a store another process writes (:mod:`.follow`).

It may import the store's own modules below it (the schema, the packs of reports, values) and
labkit's errors; never the store's writer, the launchers, the search or a view.
"""

__all__: list[str] = []
