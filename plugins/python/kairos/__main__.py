"""python3 -m kairos merge|report|trace|folded ...: kairos-merge and kairos-report from Python. The
arguments are parsed here; the work, its output and its error lines are the tools' own
(kairos::database::run_merge and run_report)."""
import argparse
import sys

from kairos import _native

# kairos-report's formats, each with what it is: the C++ table (formats.hpp), as the tools read it.
FORMATS = ", ".join(f"{row['name']} ({row['description']})" for row in _native.formats
                    if row["from_database"]) + "; text by default"


def main(arguments=None):
    parser = argparse.ArgumentParser(prog="python3 -m kairos",
                                     description="kairos profile databases: merge them, report on them")
    commands = parser.add_subparsers(dest="command", required=True, metavar="merge|report|trace|folded")

    merge = commands.add_parser("merge", help="profile databases of many processes joined into one (kairos-merge)")
    merge.add_argument("-o", "--output", required=True, help="the merged database to create (it must not exist)")
    merge.add_argument("inputs", nargs="+",
                       help="profile databases (.db), directories holding them, or globs ('ranks/*.db')")
    merge.add_argument("--keep-going", action="store_true", help="exit 0 when inputs were skipped")
    merge.add_argument("--several-launches", action="store_true",
                       help="merge inputs of different launch ids into one (refused without it)")

    def reporting(name, help, format=None):
        command = commands.add_parser(name, help=help)
        command.add_argument("databases", nargs="+", help="profile databases written by kairos-run or kairos-merge")
        if format is None:
            command.add_argument("-f", "--format", default="text", help=FORMATS)
        command.add_argument("-o", "--output", default="", help="write here instead of stdout")
        command.add_argument("-w", "--window", default="", help="only time window K, or windows K..L")
        command.add_argument("--compare-windows", action="store_true",
                             help="the functions whose share changed most between time windows")
        command.add_argument("--rank", type=int, help="only MPI rank R's processes (a merged database)")
        command.set_defaults(format=format or "text")

    reporting("report", "a report from profile databases (kairos-report)")
    reporting("trace", "Chrome Trace Event JSON (kairos-report -f trace)", "trace")
    reporting("folded", "folded stacks for flamegraph.pl (kairos-report -f folded)", "folded")

    options = parser.parse_args(arguments)
    sys.stdout.flush()
    sys.stderr.flush()
    if options.command == "merge":
        return _native.run_merge(options.output, options.inputs, options.keep_going, options.several_launches,
                                 sys.stderr.buffer, sys.stderr.isatty())
    return _native.run_report(options.databases, options.format, options.output, options.window,
                              options.compare_windows, options.rank, sys.stdout.buffer, sys.stderr.buffer)


if __name__ == "__main__":
    sys.exit(main())
