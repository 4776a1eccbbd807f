"""kairos's HTML report read without a browser (the browser tests read it in Chromium): its sections,
its tables by id (cell texts and sort values), and every reference that would fetch something."""
import html.parser
import re


class Page(html.parser.HTMLParser):
    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.sections = []        # section ids, in order
        self.tables = {}          # table id -> rows, each a list of (text, data-v or None)
        self.fetches = []         # src/href/xlink:href values that are neither fragments nor data:
        self.scripts = 0
        self.svgs = 0
        self._table = None
        self._cell = None
        self._style = False
        self.feed(text)
        self.close()
        # Inline CSS could still fetch (url(...), @import).
        self.fetches += re.findall(r"url\(\s*['\"]?(?!data:|#)[^)'\"]+", self._css)

    _css = ""

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for name in ("src", "href", "xlink:href", "action", "poster"):
            value = attributes.get(name)
            if value is not None and not value.startswith(("#", "data:")):
                self.fetches.append(value)
        if tag == "section":
            self.sections.append(attributes.get("id"))
        elif tag == "script":
            self.scripts += 1
        elif tag == "svg":
            self.svgs += 1
        elif tag == "style":
            self._style = True
        elif tag == "table":
            self._table = self.tables.setdefault(attributes.get("id") or f"table{len(self.tables)}", [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = [attributes.get("data-v"), ""]

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag == "style":
            self._style = False
        elif tag in ("td", "th") and self._cell is not None and self._table:
            self._table[-1].append((self._cell[1].strip(), self._cell[0]))
            self._cell = None

    def handle_data(self, data):
        if self._style:
            self._css += data
        if self._cell is not None:
            self._cell[1] += data


def read(path):
    with open(path, encoding="utf-8") as file:
        return Page(file.read())
