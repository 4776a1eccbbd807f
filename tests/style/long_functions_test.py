#!/usr/bin/env python3
"""scripts/long_functions.py finds what it says it finds: a function's lines from its header to its
closing brace, whatever braces its strings, comments, lambdas and statements hold; the "stays long"
comment above it; nothing for control statements, lambdas at namespace scope or data tables.

Usage: long_functions_test.py SOURCE_DIR"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.abspath(sys.argv[1]), "scripts"))
import long_functions  # noqa: E402

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def body(lines):
    return "".join(f"  work({i});\n" for i in range(lines))


def found(text, limit=10):
    return {name: (length, why) for length, _, name, why in long_functions.long_functions("x.cpp", text, limit)}


# A function of 2 + 12 lines, with braces in a string, a raw string, a char and a comment.
text = ("int long_one(int a) {\n" + body(5) + '  const char* s = "{{{";\n  auto r = R"x({)x";\n'
        "  char c = '{';  // {\n" + body(4) + "}\n")
check(found(text).get("long_one", (0,))[0] == 14, f"a 14-line function: {found(text)}")

# Short functions, control statements and lambdas at namespace scope are not reported.
text = ("void short_one() {\n  if (x) {\n    y();\n  }\n}\n"
        "auto table = [](int a) {\n" + body(20) + "};\n"
        "constexpr int rows[] = {\n" + "  1,\n" * 20 + "};\n")
check(found(text) == {}, f"nothing long: {found(text)}")

# A lambda inside a function counts towards it; a member function is named with its class.
text = "void outer::run() {\n  auto f = [&](int i) {\n" + body(12) + "  };\n}\n"
check(set(found(text)) == {"outer::run"}, f"the lambda is outer::run's: {found(text)}")

# "stays long" in the comment block above, across lines, explains it.
text = "// It stays\n// long because it is a table.\nvoid table() {\n" + body(12) + "}\n"
check(found(text).get("table", (0, False))[1], f"explained: {found(text)}")
text = "// Long, for no reason given.\nvoid plain() {\n" + body(12) + "}\n"
check(found(text).get("plain", (0, True))[1] is False, f"not explained: {found(text)}")

# Qualifiers, trailing return types and templates still read as a function header.
text = "template <class T>\nauto g(T t) const noexcept -> int {\n" + body(12) + "}\n"
check("g" in found(text), f"a qualified header: {found(text)}")

for failure in failures:
    print(failure, file=sys.stderr)
print(f"long_functions.py: {len(failures)} failures")
sys.exit(1 if failures else 0)
