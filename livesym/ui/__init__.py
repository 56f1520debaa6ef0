"""The Textual dashboard of ``livesym attach``, ``replay`` and ``demo``.

It renders immutable engine snapshots and engine query results and holds no
profiling logic. Importing it imports textual, so only the commands that open
the dashboard import it (``livesym --help`` stays fast).
"""
