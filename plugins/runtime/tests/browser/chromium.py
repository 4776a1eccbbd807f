"""A headless Chromium driven over the Chrome DevTools Protocol, for tests that open kairos's outputs
the way a user does and look at the DOM the page built.

The protocol runs over --remote-debugging-pipe: Chromium reads commands on fd 3 and writes replies
and events on fd 4, each JSON message ended by a NUL byte. A pipe, not the usual websocket, because
Python's standard library has no websocket client and a pipe has no port to collide on when tests
run in parallel.

One page per browser (open() makes it). Every wait is bounded by harness.time_left and ends in a
Failure naming what was awaited.
"""
import base64
import fcntl
import json
import os
import selectors
import subprocess
import tempfile
import time

from harness import Failure, time_left

# The one CMake found (tests/CMakeLists.txt); Debian's when run by hand.
CHROMIUM = os.environ.get("KAIROS_CHROMIUM", "/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--remote-debugging-pipe", "--window-size=1280,800")
LIMIT = 30  # seconds for any one wait, within the test's budget


class Chromium:
    """with Chromium(extra_flags) as browser: browser.open(url); browser.evaluate(...)"""

    def __init__(self, extra_flags=()):
        self._profile = tempfile.TemporaryDirectory(prefix="kairos-chromium-")
        self._log = open(os.path.join(self._profile.name, "stderr.log"), "w+b")
        command_read, self._command_write = os.pipe()
        self._reply_read, reply_write = os.pipe()
        # Above fd 4, so that the child's dup2 onto 3 and 4 never meets itself (and clears O_CLOEXEC).
        command_read, reply_write = (_above_four(fd) for fd in (command_read, reply_write))

        def onto_fds_3_and_4():
            os.dup2(command_read, 3)
            os.dup2(reply_write, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, *extra_flags, f"--user-data-dir={self._profile.name}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            preexec_fn=onto_fds_3_and_4, pass_fds=(3, 4))
        os.close(command_read)
        os.close(reply_write)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._reply_read, selectors.EVENT_READ)
        self._buffer = b""
        self._next_id = 0
        self._replies = {}
        self._session = None
        self._loaded = False
        self.requests = []  # every URL the page asked for (Network.requestWillBeSent)
        self.console = []  # (level, text) from console calls and the browser's log
        self.exceptions = []  # uncaught exceptions' descriptions
        self.dialogs = []  # alert()/confirm() messages, each dismissed

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    # --- the page --------------------------------------------------------------------------

    def open(self, url):
        """A new page, watched from before it asks for anything, showing `url` once loaded."""
        target = self.call("Target.createTarget", url="about:blank", session=False)["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True,
                                  session=False)["sessionId"]
        for domain in ("Network", "Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self._loaded = False
        navigation = self.call("Page.navigate", url=url)
        if navigation.get("errorText"):
            raise Failure(f"Chromium could not open {url}: {navigation['errorText']}")
        self._pump_until(lambda: self._loaded, f"the load event of {url}", LIMIT)

    def evaluate(self, expression, await_promise=False):
        """The value of a JavaScript expression in the page (JSON-like values only)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=await_promise)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise Failure(f"{expression!r} threw: {details.get('exception', {}).get('description', details)}")
        return result["result"].get("value")

    def wait_for(self, condition, what, limit=LIMIT):
        """Polls a JavaScript condition until it is true; Failure naming `what` if it never is."""
        timeout = time_left(limit)
        give_up = time.monotonic() + timeout
        while not self.evaluate(condition):
            if time.monotonic() > give_up:
                raise Failure(f"{what}: not seen within {timeout:.0f} s ({condition}); "
                              f"console {self.console}, exceptions {self.exceptions}, dialogs {self.dialogs}")
            self._pump_until(lambda: False, None, 0.1)

    def click(self, x, y):
        """A real left click at (x, y) in CSS pixels: hit-tested by the page like a user's."""
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def press(self, key):
        """A key typed by a user: a one-character `key` ("n"), down then up."""
        self.call("Input.dispatchKeyEvent", type="keyDown", key=key, text=key)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=key)

    def screenshot(self, path):
        """A PNG of the whole document, the viewport first grown to the document's size."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        self.call("Emulation.setDeviceMetricsOverride", width=int(size["width"] + 0.5),
                  height=int(size["height"] + 0.5), deviceScaleFactor=1, mobile=False)
        image = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(image))

    def close(self):
        if self.process.poll() is None:
            try:
                self.call("Browser.close", session=False, limit=5)
            except Failure:
                pass
            try:
                self.process.wait(timeout=time_left(10))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._selector.close()
        for fd in (self._command_write, self._reply_read):
            os.close(fd)
        self._log.close()
        self._profile.cleanup()

    # --- the protocol ------------------------------------------------------------------------

    def call(self, method, session=True, limit=LIMIT, **params):
        """Sends a command (to the page's session unless session=False) and returns its result."""
        self._next_id += 1
        identifier = self._next_id
        self._send(identifier, method, params, session)
        self._pump_until(lambda: identifier in self._replies, f"Chromium's reply to {method}", limit)
        reply = self._replies.pop(identifier)
        if "error" in reply:
            raise Failure(f"Chromium refused {method} {params}: {reply['error']}")
        return reply["result"]

    def _send(self, identifier, method, params, session):
        message = {"id": identifier, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._command_write, data):]

    def _pump_until(self, done, what, limit):
        """Reads messages until done() holds; Failure naming `what` after `limit` seconds (None:
        return quietly, a pause that still handles events)."""
        timeout = time_left(limit) if what else limit
        give_up = time.monotonic() + timeout
        while not done():
            left = give_up - time.monotonic()
            if left <= 0 or not self._selector.select(left):
                if what is None:
                    return
                raise Failure(f"{what} did not come within {timeout:.0f} s")
            chunk = os.read(self._reply_read, 1 << 20)
            if not chunk:
                self._log.seek(0)
                tail = self._log.read().decode(errors="replace")[-2000:]
                raise Failure(f"Chromium exited while awaiting {what or 'events'}: {tail}")
            self._buffer += chunk
            *messages, self._buffer = self._buffer.split(b"\0")
            for message in messages:
                self._handle(json.loads(message))

    def _handle(self, message):
        if "id" in message:
            self._replies[message["id"]] = message
            return
        method, params = message.get("method"), message.get("params", {})
        if message.get("sessionId") != self._session:
            return
        if method == "Page.loadEventFired":
            self._loaded = True
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            self.console.append((params["type"], text))
        elif method == "Log.entryAdded":
            self.console.append((params["entry"]["level"], params["entry"]["text"]))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.exceptions.append(details.get("exception", {}).get("description", details["text"]))
        elif method == "Page.javascriptDialogOpening":
            # A dialog blocks the page until answered: note it, dismiss it, let the test judge.
            self.dialogs.append(params["message"])
            self._next_id += 1
            self._send(self._next_id, "Page.handleJavaScriptDialog", {"accept": True}, True)


def _above_four(fd):
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 5)
    os.close(fd)
    return moved
