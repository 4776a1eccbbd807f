#!/usr/bin/env python3
"""Browser tests: kairos's outputs opened the way a user opens them, in a real headless Chromium
(tests/browser/chromium.py), and checked through the DOM the page built.

Run one test: browser_tests.py NAME (ctest does). Needs, besides the sampling tests' environment,
KAIROS_PHASED_PROGRAM, KAIROS_CHROMIUM, KAIROS_BROWSER_DIR (tests/browser, where
scripts/install-deps.sh installs speedscope) and KAIROS_SCREENSHOT_DIR, where each test leaves
NAME.png.
"""
import base64
import json
import os
import re
import sqlite3
import sys

from harness import check, run_named_test, share_tolerance, skip
from browser.chromium import CHROMIUM, Chromium
import sampling_tests as sampled
import windows_tests as phased

BROWSER_DIR = os.environ.get("KAIROS_BROWSER_DIR", os.path.join(os.path.dirname(__file__), "browser"))
SPEEDSCOPE = os.path.join(BROWSER_DIR, "node_modules", "speedscope", "dist", "release", "index.html")
SCREENSHOTS = os.environ.get("KAIROS_SCREENSHOT_DIR", "kairos-screenshots")


def require(speedscope=False):
    """Skips the test, before kairos runs, when what it opens its output in is missing."""
    if not os.access(CHROMIUM, os.X_OK):
        skip(f"no {CHROMIUM}: scripts/install-deps.sh installs Debian's chromium")
    if speedscope and not os.path.exists(SPEEDSCOPE):
        skip(f"speedscope is not installed in {BROWSER_DIR}: scripts/install-deps.sh runs npm ci there")


def screenshot(page, name):
    os.makedirs(SCREENSHOTS, exist_ok=True)
    page.screenshot(os.path.join(SCREENSHOTS, f"{name}.png"))


def check_page_kept_to_itself(page, schemes):
    """No console error, uncaught exception or dialog; nothing asked for outside `schemes`."""
    errors = [text for level, text in page.console if level in ("error", "assert")]
    check(not errors and not page.exceptions and not page.dialogs,
          f"console errors {errors}, exceptions {page.exceptions}, dialogs {page.dialogs}")
    outside = [url for url in page.requests if not url.startswith(schemes)]
    check(not outside, f"only {schemes} asked for: {outside}")


# --- the flame graph SVG ---------------------------------------------------------------------

# The shown graph's shown frames, as the page laid them out (the script places them at load and on
# every click, so the rects' boxes are what a user sees).
SHOWN_FRAMES = """(() => {
  const graph = [...document.querySelectorAll("g.graph")].find(g => getComputedStyle(g).display !== "none");
  const frames = [...graph.querySelectorAll("g.f")].filter(f => getComputedStyle(f).display !== "none");
  return {graph: graph.id, title: document.getElementById("graph-name").textContent,
          frames: frames.map(f => {
            const box = f.querySelector("rect").getBoundingClientRect();
            return {name: f.querySelector("title").textContent.replace(/ \\(total [^)]*\\)$/, ""),
                    depth: Number(f.dataset.d), x: box.x, y: box.y, width: box.width, height: box.height};
          })};
})()"""


# What a click at (x, y) reaches, for a failure message.
ELEMENT_AT = "(e => `<${e.tagName} class=${e.getAttribute('class')}>`)(document.elementFromPoint(%f, %f))"


def centre(box):
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def width_of(frames, function):
    return sum(frame["width"] for frame in frames if function in frame["name"])


def widest(frames, function):
    return max((frame for frame in frames if function in frame["name"]), key=lambda frame: frame["width"])


def check_split_drawn(frames, root, database, three, one):
    """The two workers' boxes as wide as their share of the samples' weights in the database (within
    a point: a box's width is rounded), and those shares near the program's own CPU split
    (share_tolerance for the sample count)."""
    db = sqlite3.connect(database)
    samples = db.execute("SELECT COUNT(*) FROM sample").fetchone()[0]
    totals = sampled.function_totals(db)
    three_sampled, one_sampled = (sampled.total_of(totals, name) for name in ("compute_three_quarters", "compute_one_quarter"))
    whole = db.execute("SELECT SUM(weight_ns) FROM sample WHERE stack IS NOT NULL").fetchone()[0]
    three_share = 100.0 * width_of(frames, "compute_three_quarters") / root["width"]
    one_share = 100.0 * width_of(frames, "compute_one_quarter") / root["width"]
    three_db, one_db = 100.0 * three_sampled / whole, 100.0 * one_sampled / whole
    check(abs(three_share - three_db) <= 1.0 and abs(one_share - one_db) <= 1.0,
          f"drawn {three_share:.1f}% / {one_share:.1f}% of the root vs {three_db:.1f}% / {one_db:.1f}% in the database")
    truth = 100.0 * three / (three + one)
    tolerance = share_tolerance(samples, truth)
    sampled_share = 100.0 * three_sampled / (three_sampled + one_sampled)
    check(abs(sampled_share - truth) <= tolerance,
          f"sampled {sampled_share:.1f}% vs {truth:.1f}% by CPU time (±{tolerance:.1f} for {samples} samples)")


def test_flamegraph_in_chromium(directory):
    require()
    out, err, status = sampled.kairos(["split", "1.2"], directory, ["--freq", "1000"],
                                      KAIROS_OUTPUT_FORMATS="db,flamegraph")
    check(status == 0, err)
    three, one = sampled.cpu_split(out)
    database = sampled.only("*.db", directory)
    with Chromium() as page:
        page.open("file://" + sampled.only("*.svg", directory))
        page.wait_for("document.getElementById('graph-name').textContent !== ''", "the script's first layout")
        screenshot(page, "flamegraph_in_chromium")

        shown = page.evaluate(SHOWN_FRAMES)
        check(shown["title"] == "all threads", f"all threads shown first: {shown['title']}")
        frames = shown["frames"]
        root = next(frame for frame in frames if frame["depth"] == 0)
        check(abs(root["width"] - 1200) <= 1, f"the root spans the picture: {root['width']} px")
        check_split_drawn(frames, root, database, three, one)

        page.click(*centre(widest(frames, "compute_one_quarter")))
        zoomed = page.evaluate(SHOWN_FRAMES)["frames"]
        check(width_of(zoomed, "compute_one_quarter") >= 0.99 * root["width"],
              f"clicked, compute_one_quarter spans the picture: {width_of(zoomed, 'compute_one_quarter')} px")
        check(width_of(zoomed, "compute_three_quarters") == 0, "and its sibling is hidden")

        choosers = page.evaluate("""[...document.querySelectorAll("text.choose")].map(t => {
            const box = t.getBoundingClientRect();
            return {graph: t.dataset.graph, x: box.x, y: box.y, width: box.width, height: box.height,
                    name: document.getElementById(t.dataset.graph).dataset.name};
          })""")
        # All threads and each sampled thread: the two workers, and the main thread when it ran long
        # enough to be sampled (a loaded machine).
        threads = sqlite3.connect(database).execute(
            "SELECT COUNT(DISTINCT thread) FROM sample WHERE stack IS NOT NULL").fetchone()[0]
        check(len(choosers) == 1 + threads, f"a chooser for all threads and each of {threads} sampled threads: {choosers}")
        workers_show = set()
        for chooser in choosers[1:]:
            x, y = centre(chooser)
            hit = page.evaluate(ELEMENT_AT % (x, y))
            page.click(x, y)
            shown = page.evaluate(SHOWN_FRAMES)
            check(shown["graph"] == chooser["graph"] and shown["title"] == chooser["name"],
                  f"a click on the chooser shows {chooser['name']}: still {shown['title']!r} "
                  f"(the click at the chooser's centre reached {hit})")
            functions = {f for f in ("compute_three_quarters", "compute_one_quarter")
                         if width_of(shown["frames"], f) > 0}
            check(len(functions) <= 1, f"{chooser['name']}: one worker's function at most: {functions}")
            workers_show |= functions
        check(len(workers_show) == 2, f"the two threads' graphs show the two functions: {workers_show}")
        check_page_kept_to_itself(page, ("file:", "data:", "about:"))


# --- speedscope's app ----------------------------------------------------------------------

def open_in_speedscope(page, profile, directory):
    """Opens `profile` in speedscope's sandwich view the way its CLI (bin/cli.mjs) does: a script
    handing the file's bytes to speedscope.loadFileFromBase64, named in the URL's hash."""
    loader = os.path.join(directory, "load-profile.js")
    with open(profile, "rb") as file:
        encoded = base64.b64encode(file.read()).decode()
    with open(loader, "w") as file:
        file.write(f"speedscope.loadFileFromBase64({json.dumps(os.path.basename(profile))}, {json.dumps(encoded)})")
    page.open(f"file://{SPEEDSCOPE}#localProfilePath={loader}&view=sandwich")


# The sandwich table's "Total" for the first row whose symbol contains the name, or null.
SANDWICH_TOTAL = """(name => {
  const row = [...document.querySelectorAll("tr")]
    .find(r => r.cells.length === 3 && r.cells[2].innerText.includes(name));
  return row ? row.cells[0].innerText : null;
})(%s)"""


def sandwich_total_ms(page, name):
    """Waits for `name`'s row in speedscope's sandwich table; its total time in milliseconds."""
    expression = SANDWICH_TOTAL % json.dumps(name)
    page.wait_for(f"{expression} !== null", f"{name} in speedscope's sandwich table")
    text = page.evaluate(expression)
    match = re.match(r"([0-9.]+)(ns|µs|ms|s)\b", text)
    check(match, f"{name}: a total time in {text!r}")
    return float(match.group(1)) * {"ns": 1e-6, "µs": 1e-3, "ms": 1.0, "s": 1e3}[match.group(2)]


def check_speedscope_imported(page):
    """None of speedscope's import failures: its error screen, its alerts (kept as dialogs: an
    unrecognised format, an empty profile) or the console line of a parser that threw."""
    body = page.evaluate("document.body.innerText")
    check("Something went wrong" not in body, f"speedscope's error screen: {body[:300]!r}")
    failed = [text for _, text in page.console if "Failed to load format" in text]
    check(not failed, f"speedscope's parser threw: {failed}")
    check_page_kept_to_itself(page, ("file:", "data:", "blob:", "about:"))


def test_speedscope_app_opens_kairos_file(directory):
    require(speedscope=True)
    out, err, status = sampled.kairos(["split", "1.2"], directory, ["--freq", "1000"],
                                      KAIROS_OUTPUT_FORMATS="db,speedscope")
    check(status == 0, err)
    three, one = sampled.cpu_split(out)
    with Chromium(["--allow-file-access-from-files"]) as page:
        open_in_speedscope(page, sampled.only("*.speedscope.json", directory), directory)
        # One profile per thread, the heaviest first; "n" shows the next one.
        three_ms = sandwich_total_ms(page, "compute_three_quarters")
        screenshot(page, "speedscope_app_opens_kairos_file")
        page.press("n")
        one_ms = sandwich_total_ms(page, "compute_one_quarter")
        share, truth = 100.0 * three_ms / (three_ms + one_ms), 100.0 * three / (three + one)
        samples = sqlite3.connect(sampled.only("*.db", directory)).execute("SELECT COUNT(*) FROM sample").fetchone()[0]
        tolerance = share_tolerance(samples, truth)
        check(abs(share - truth) <= tolerance,
              f"speedscope's totals {three_ms:.2f} / {one_ms:.2f} ms: {share:.1f}% vs {truth:.1f}% by CPU time "
              f"(±{tolerance:.1f} for {samples} samples)")
        check_speedscope_imported(page)


def test_speedscope_app_opens_chrome_trace(directory):
    # speedscope reads a Trace Event file's B/E/X events, or, when the file has a top-level
    # "samples" array, those samples alone. kairos writes samples as instant events ("ph": "i" with
    # an "sf" stack frame), which speedscope skips: the split program's trace, which has no regions,
    # imports as "empty". So this test opens the phased program's trace and checks what speedscope
    # does show of it: its regions, each as long as the program measured it.
    require(speedscope=True)
    phases, _, _, _ = phased.run(directory, ["--freq", "500"], ["0.2", "0.1"],
                                 KAIROS_OUTPUT_FORMATS="db,trace", KAIROS_SAMPLING_DELAY="0")
    with Chromium(["--allow-file-access-from-files"]) as page:
        open_in_speedscope(page, os.path.join(directory, "out.trace.json"), directory)
        for name, (start, end) in phases.items():
            shown_ms, measured_ms = sandwich_total_ms(page, name), (end - start) / 1e6
            check(abs(shown_ms - measured_ms) <= 10.0,
                  f"region {name}: {shown_ms:.2f} ms in speedscope, {measured_ms:.2f} ms by the program")
        screenshot(page, "speedscope_app_opens_chrome_trace")
        check_speedscope_imported(page)


# --- the HTML report ---------------------------------------------------------------------------

# The function table's rows as the page shows them: (function, self ms).
FUNCTION_ROWS = """[...document.querySelectorAll("#function-table tbody tr")].map(
  r => [r.cells[4].textContent, parseFloat(r.cells[1].textContent)])"""

# A header's box, by its text, in the function table.
HEADER_BOX = """(text => {
  const th = [...document.querySelectorAll("#function-table th")].find(h => h.textContent === text);
  const box = th.getBoundingClientRect();
  return {x: box.x, y: box.y, width: box.width, height: box.height};
})(%s)"""


def test_html_report_in_chromium(directory):
    require()
    out, err, status = sampled.kairos(["split", "1.2"], directory, ["--freq", "1000"],
                                      KAIROS_OUTPUT_FORMATS="db,html")
    check(status == 0, err)
    three, one = sampled.cpu_split(out)
    database = sampled.only("*.db", directory)
    with Chromium() as page:
        page.open("file://" + sampled.only("*.html", directory))
        page.wait_for("document.getElementById('graph-name').textContent !== ''", "the flame graph's first layout")
        # The whole page, as first shown; the viewport then holds all of it, so every click below
        # lands where a user's would.
        screenshot(page, "html_report_in_chromium")
        sections = page.evaluate("[...document.querySelectorAll('section')].map(s => s.id)")
        check(sections == ["summary", "functions", "flame-graph", "regions", "timeline", "settings"],
              f"the sections: {sections}")

        rows = page.evaluate(FUNCTION_ROWS)
        names = [name for name, _ in rows]
        check(any("compute_three_quarters" in n for n in names) and any("compute_one_quarter" in n for n in names),
              f"both workers in the top functions: {names}")
        for header, descending in (("self ms", True), ("self ms", False)):
            page.click(*centre(page.evaluate(HEADER_BOX % json.dumps(header))))
            values = [value for _, value in page.evaluate(FUNCTION_ROWS)]
            check(values == sorted(values, reverse=descending),
                  f"a click on '{header}' sorts {'down' if descending else 'up'}: {values}")

        # The flame graph inline: drawn at the page's scale, the 75/25 split within 3 points of the root.
        frames = page.evaluate(SHOWN_FRAMES)["frames"]
        root = next(frame for frame in frames if frame["depth"] == 0)
        check_split_drawn(frames, root, database, three, one)
        page.click(*centre(widest(frames, "compute_three_quarters")))
        zoomed = page.evaluate(SHOWN_FRAMES)["frames"]
        check(width_of(zoomed, "compute_three_quarters") >= 0.99 * root["width"],
              "a click on compute_three_quarters zooms it to the graph's width")

        # The timeline: a row per sampled thread, the workers' CPU drawn.
        threads = page.evaluate("""[...document.querySelectorAll("svg.timeline g.thread")].map(
            g => [g.querySelector("text").textContent, g.querySelectorAll("rect.cpu").length])""")
        busy = [name for name, columns in threads if columns > 10]
        check(len(busy) >= 2, f"the two workers' CPU use on the timeline: {threads}")
        check_page_kept_to_itself(page, ("file:", "data:", "about:"))


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-browser"))
