"""A profile database's views as rows (named tuples or dicts) or pandas DataFrames, streamed from
SQLite: a view is read a row (or a chunk) at a time unless a whole DataFrame is asked for. The
`regions` view's rows are decoded from their blocks by the C++ side, a few blocks at a time."""
import collections
import io
import os
import sqlite3
import urllib.parse

from kairos import _native

# The views a profile has (docs/database.md); each is also a method of Profile.
VIEWS = (
    "samples", "realtime_samples", "regions", "threads", "processes", "top_functions",
    "top_functions_by_thread", "top_functions_by_process", "top_functions_by_window", "stack_weights",
    "stack_functions", "windows", "mpi_calls", "gpu_kernels", "top_kernels", "top_copies", "gpu_api_calls",
    "causal_experiments", "causal_samples", "openmp_imbalance", "openmp_thread_times", "annotation_ranges",
)


def open(path):
    """The profile database at `path`, read-only. Raises kairos.DatabaseError naming the file when
    it is not a kairos profile or has another schema version (the C++ side's own check)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise _native.DatabaseError(
            f"[kairos] '{path}' is not a file; kairos.open takes a profile database (.db) written by "
            "kairos-run or kairos-merge")
    _native.check_profile(path)
    return Profile(path)


class Profile:
    """An open profile database. Use kairos.open(path); close it, or use it in a `with` block."""

    def __init__(self, path):
        self.path = path
        self._connection = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro", uri=True)
        self._row_types = {}

    def close(self):
        self._connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def query(self, sql, parameters=(), *, dicts=False):
        """The rows of any SQL query, one at a time, as named tuples (or dicts)."""
        cursor = self._connection.execute(sql, parameters)
        return self._typed(cursor, [column[0] for column in cursor.description], dicts)

    def rows(self, view, *, dicts=False):
        """A view's rows (one of kairos.VIEWS), streamed."""
        if _checked(view) == "regions":
            names = [column[0] for column in self._connection.execute("SELECT * FROM regions LIMIT 0").description]
            return self._typed(_decoded_regions(self.path), names, dicts)
        return self.query(f"SELECT * FROM {view}", dicts=dicts)

    def _typed(self, rows, names, dicts):
        if dicts:
            return (dict(zip(names, row)) for row in rows)
        key = tuple(names)
        if key not in self._row_types:
            # rename: a column named like a keyword or twice ("self" is fine) still gets a field.
            self._row_types[key] = collections.namedtuple("Row", names, rename=True)
        return map(self._row_types[key]._make, rows)

    def dataframe(self, view, *, chunksize=None):
        """A view as a pandas DataFrame; with `chunksize`, an iterator of DataFrames of that many
        rows, so that memory stays bounded by one chunk."""
        try:
            import pandas
        except ImportError:
            raise ImportError("[kairos] Profile.dataframe needs pandas (Debian: python3-pandas); "
                              "Profile.rows gives the same rows without it") from None
        return pandas.read_sql_query(f"SELECT * FROM {_checked(view)}", self._connection, chunksize=chunksize)

    def write(self, file, format="text"):
        # The docstring names the formats from formats.hpp's table (below the class).
        errors = io.BytesIO()
        if _native.run_report([self.path], format, "", "", False, None, file, errors) != 0:
            raise _native.DatabaseError(errors.getvalue().decode(errors="replace").strip())


def _decoded_regions(path):
    reader = _native.RegionRows(path)
    while batch := reader.next(16):  # 16 blocks: at most 65,536 rows in memory
        yield from batch


def _checked(view):
    if view not in VIEWS:
        raise ValueError(f"[kairos] '{view}' is not a view of a kairos profile; the views are: {', '.join(VIEWS)}")
    return view


def _view_method(view):
    def method(self, *, dicts=False):
        return self.rows(view, dicts=dicts)
    method.__name__ = view
    method.__doc__ = f"The `{view}` view's rows (docs/database.md), streamed."
    return method


for _view in VIEWS:
    setattr(Profile, _view, _view_method(_view))

Profile.write.__doc__ = (
    "One of kairos-report's outputs, streamed into a binary file object (sys.stdout.buffer, "
    "open(..., \"wb\"), io.BytesIO); `format` is one of: "
    + ", ".join(row["name"] for row in _native.formats if row["from_database"]) + ".")
