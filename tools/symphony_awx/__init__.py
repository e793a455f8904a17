"""symphony_awx: what AWX/AAP does with the collection, reproduced on one machine (issue 19).

- :mod:`symphony_awx.pg`: a throw-away PostgreSQL server, the shared ledger every job and slice writes.
- :mod:`symphony_awx.slice`: AWX job slicing, N concurrent ansible-runner jobs over slices of the twin inventory.
- :mod:`symphony_awx.migrate`: copy a SQLite ledger into PostgreSQL and check that rows and gates match.
"""
