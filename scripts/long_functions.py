#!/usr/bin/env python3
"""The product's long functions: every C++ function over LIMIT lines (default 80) in the product's
sources (everything tracked but tests, benchmarks, fuzz targets and examples), longest first.

A function may stay long when a comment says why: a comment just above it (or on its first body
line) holding the words "stays long", for example
    // It stays long because its steps share a dozen locals that no struct would make clearer.

Usage: long_functions.py SOURCE_DIR [--limit 80] [--most N] [--check]
Prints one line per long function: lines, path:line, name, and whether a comment explains it.
With --check, exits 1 when a long function has no such comment, or when more than --most functions
stay long with a comment.

How a function is found: comments and string literals are blanked, then each '{' outside a
function body whose text since the previous ';', '{' or '}' reads as a function header (a name,
a parenthesised parameter list, then qualifiers) opens one; its length runs from the header's
first line to the matching '}'. Lambdas and local classes count towards the function holding
them. A constructor whose initializer list uses braces may be missed."""
import argparse
import os
import re
import subprocess
import sys

SUFFIXES = (".cpp", ".hpp", ".h", ".c", ".cu", ".cc")

CONTROL = re.compile(r"^(if|for|while|switch|catch|do|else|try|return|sizeof|alignof|decltype|requires|"
                     r"static_assert|noexcept|co_return|co_yield|co_await)$")
QUALIFIERS = re.compile(r"\)\s*((const|volatile|noexcept(\s*\([^()]*\))?|override|final|mutable|&&?|"
                        r"->\s*[\w:<>,\s*&]+|requires\s+[^{]+|try)\s*)*$")


def blank(text):
    """`text` with comments, string and character literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            delimiter_end = text.find("(", i + 2)
            delimiter = text[i + 2:delimiter_end]
            end = text.find(")" + delimiter + '"', delimiter_end)
            end = n if end < 0 else end + len(delimiter) + 2
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:end]))
            i = end
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(c)  # a digit separator: 1'000'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_name(header):
    """The function's name in `header` (the text before its '{'), or None when it is no function."""
    header = re.sub(r"^\s*#.*$", "", header, flags=re.M).strip()
    if not header or not QUALIFIERS.search(header):
        return None
    depth = 0
    for index in range(len(header) - 1, -1, -1):  # the '(' that opens the parameter list
        if header[index] == ")":
            depth += 1
        elif header[index] == "(":
            depth -= 1
            if depth == 0:
                break
    else:
        return None
    before = header[:index].rstrip()
    name = re.search(r"(~?[\w:]+(?:<[^()]*>)?|operator\s*[^\s\w]+|operator\s+[\w:]+)$", before)
    if not name:
        return None
    word = name.group(1).split("::")[-1]
    if CONTROL.match(word) or "=" in before.replace("==", "").replace("operator=", "") and "operator" not in word:
        return None
    if before.endswith("]"):  # a lambda
        return None
    return name.group(1)


def long_functions(path, text, limit):
    """[(lines, first line, name, explained)] of the functions in `text` over `limit` lines."""
    code = blank(text)
    lines = text.splitlines()
    found = []
    header_start = 0
    stack = []  # per open brace: the function it opens (name, first line) or None
    in_function = 0
    for index, c in enumerate(code):
        if c in ";{}":
            if c == "{":
                name = None if in_function else function_name(code[header_start:index])
                if name:
                    first = code.count("\n", 0, header_start + len(code[header_start:index]) -
                                       len(code[header_start:index].lstrip())) + 1
                    stack.append((name, first, code.count("\n", 0, index) + 1))
                    in_function += 1
                else:
                    stack.append(None)
            elif c == "}" and stack:
                opened = stack.pop()
                if opened:
                    in_function -= 1
                    name, first, body_line = opened
                    last = code.count("\n", 0, index) + 1
                    if last - first + 1 > limit:
                        found.append((last - first + 1, first, name, explained(lines, first, body_line)))
            header_start = index + 1
    return found


def explained(lines, first, body_line):
    """Whether the comment above line `first` (1-based), or the body's first line, says why it
    stays long."""
    comment = []
    index = first - 2
    while index >= 0 and lines[index].strip().startswith(("//", "/*", "*", "template")):
        comment.append(lines[index])
        index -= 1
    comment.reverse()
    comment += lines[body_line - 1:body_line + 1]
    words = " ".join(re.sub(r"^\s*(//+|/\*+|\*+/?)", " ", line) for line in comment)
    return "stays long" in " ".join(words.split())


def product_sources(source_dir):
    listed = subprocess.run(["git", "-C", source_dir, "ls-files", "-z"], capture_output=True)
    if listed.returncode == 0:
        names = [name for name in listed.stdout.decode().split("\0") if name]
    else:  # not a git checkout: every file but the build trees
        names = []
        for folder, subfolders, files in os.walk(source_dir):
            subfolders[:] = [d for d in subfolders if not d.startswith((".", "build"))]
            names += [os.path.relpath(os.path.join(folder, f), source_dir) for f in files]
    for name in sorted(names):
        parts = name.split("/")
        if not name.endswith(SUFFIXES) or parts[0] in ("tests", "benchmarks", "examples"):
            continue
        if any(part in ("tests", "fuzz", "examples", "benchmarks") for part in parts[:-1]):
            continue
        yield name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source_dir")
    parser.add_argument("--limit", type=int, default=80, help="longest a function may be, in lines")
    parser.add_argument("--most", type=int, help="how many functions may stay long with a comment")
    parser.add_argument("--check", action="store_true", help="fail on a long function no comment explains")
    options = parser.parse_args()
    source_dir = os.path.abspath(options.source_dir)
    every = []
    for name in product_sources(source_dir):
        with open(os.path.join(source_dir, name), encoding="utf-8", errors="replace") as file:
            every += [(length, name, first, function, why)
                      for length, first, function, why in long_functions(name, file.read(), options.limit)]
    every.sort(key=lambda entry: (-entry[0], entry[1], entry[2]))
    failures = []
    for length, name, first, function, why in every:
        print(f"{length:5} {name}:{first}: {function} ({'explained' if why else 'NOT EXPLAINED'})")
        if not why:
            failures.append(f"{name}:{first}: {function} is {length} lines (over {options.limit}): shorten it, "
                            "or say above it why it stays long")
    explained_count = sum(1 for entry in every if entry[4])
    print(f"{len(every)} functions over {options.limit} lines, {explained_count} with a comment saying why")
    if options.most is not None and explained_count > options.most:
        failures.append(f"{explained_count} functions stay long with a comment; at most {options.most} may")
    if options.check:
        for failure in failures:
            print(failure, file=sys.stderr)
        return 1 if failures else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
