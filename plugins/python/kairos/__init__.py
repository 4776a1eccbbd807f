"""kairos profile databases from Python (docs/python.md).

    import kairos
    with kairos.open("app.db") as profile:
        for row in profile.top_functions():
            print(row.name, row.self / 1e6)

`python3 -m kairos merge|report|trace|folded ...` runs the same code as kairos-merge and
kairos-report.
"""
from kairos._native import DatabaseError, Merger, schema_version
from kairos.profile import VIEWS, Profile, open

__all__ = ["DatabaseError", "Merger", "Profile", "VIEWS", "open", "schema_version"]
