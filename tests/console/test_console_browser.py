"""The web console in a real headless Chromium (Debian's ``chromium`` and ``chromedriver``,
``scripts/ensure-chromium``; Selenium drives it, no browser is downloaded), against
``claude-trio serve --offline --remote-tools all`` in a subprocess: the real CLI and the
built-in offline model, whose ``#write`` / ``#bash`` prompts make tool calls that ask.

One server and one browser for the whole module; each test works on sessions of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from claude_trio.actors.children import die_with_parent
from claude_trio.actors.fanout.governor import clock_time
from claude_trio.client import connect_gateway
from claude_trio.protocol.fanout.governor import GovernorFigures
from claude_trio.protocol.session.events import Event, TextDelta, ToolUse, UserInputRequest

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = pytest.mark.browser

ALICE = "alice-console-token-0123456789"
BOB = "bob-console-token-0123456789ab"
OPS = "ops-console-token-0123456789abc"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "console.png"
WAIT = 60.0
SUBMIT_TRIES = 3
CHILDREN = ":scope > *"


@attrs.define
class Console:
    driver: WebDriver
    base: str
    work: Path

    def find(self, testid: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, f"[data-testid={testid}]")

    def all(self, testid: str, within: WebElement | None = None) -> list[WebElement]:
        root: Any = within if within is not None else self.driver
        return list(root.find_elements(By.CSS_SELECTOR, f"[data-testid={testid}]"))

    def until(self, check: Callable[[], Any], what: str) -> Any:
        def attempt(_: object) -> Any:
            try:
                return check()
            except StaleElementReferenceException:
                return None

        return WebDriverWait(self.driver, WAIT, poll_frequency=0.1).until(attempt, what)

    def inbox_moves_over_one_redraw(self) -> int:
        """How many times the inbox's items were moved while the lists were redrawn once
        (the page asks for the session list every 2 s; a redraw changes the age column)."""
        moves = self.driver.execute_async_script(
            """
            const done = arguments[arguments.length - 1];
            let moves = 0;
            const inbox = new MutationObserver((records) => { moves += records.length; });
            inbox.observe(document.getElementById("inbox"), { childList: true });
            const rows = new MutationObserver(() => {
              rows.disconnect();
              setTimeout(() => { inbox.disconnect(); done(moves); }, 50);
            });
            rows.observe(document.getElementById("session-rows"),
                         { childList: true, subtree: true, characterData: true });
            setTimeout(() => { inbox.disconnect(); rows.disconnect(); done(-1); }, 8000);
            """
        )
        assert moves != -1, "the lists were not redrawn within 8 s"
        return int(moves)

    def login_with_fragment(self, token: str) -> None:
        self.driver.get(self.base + "/")  # same origin first: clear what a test before held
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.get("about:blank")  # a fragment alone would not load the page again
        self.driver.get(f"{self.base}/#token={token}")
        self.until(lambda: self.find("status").text == "connected", "connected")

    def open_session(self, prompt: str, mode: str = "default") -> str:
        """Open a session from the page; its id (the page selects a session it opened: its
        stream is shown, and its row listed)."""
        stream = self.find("stream")
        shown = stream.get_attribute("data-session-id")
        self.driver.execute_script("document.getElementById('new-mode').value = arguments[0]", mode)
        box = self.find("new-prompt")
        box.send_keys(prompt)
        # The page empties the box when it sends the open. A click that missed the button (the
        # layout moved under it: an approval arriving in the inbox) is made again; the page
        # keeps the prompt when it could not send it.
        for _ in range(SUBMIT_TRIES):
            self.find("new-submit").click()
            try:
                WebDriverWait(self.driver, 5, poll_frequency=0.1).until(
                    lambda _: box.get_attribute("value") == ""
                )
                break
            except TimeoutException:
                continue

        def opened() -> str | None:
            sid = stream.get_attribute("data-session-id")
            return sid if sid and sid != shown and self.all_rows(sid) else None

        sid: str = self.until(opened, f"the session of {prompt!r}")
        return sid

    def all_rows(self, sid: str) -> list[WebElement]:
        return list(
            self.driver.find_elements(
                By.CSS_SELECTOR, f"[data-testid=session-row][data-session-id='{sid}']"
            )
        )

    def row(self, sid: str) -> WebElement:
        return self.driver.find_element(
            By.CSS_SELECTOR, f"[data-testid=session-row][data-session-id='{sid}']"
        )

    def state(self, sid: str) -> str:
        return str(self.row(sid).get_attribute("data-state"))

    def wait_state(self, sid: str, *states: str) -> None:
        self.until(lambda: self.state(sid) in states, f"{sid} in {states}")

    def approval(self, sid: str) -> WebElement:
        def found() -> WebElement | None:
            items = self.driver.find_elements(
                By.CSS_SELECTOR, f"[data-testid=approval][data-session-id='{sid}']"
            )
            return items[0] if items else None

        element: WebElement = self.until(found, f"an approval of {sid}")
        return element

    def stream_of(self, sid: str) -> WebElement:
        self.until(lambda: self.all_rows(sid), f"the row of {sid}")
        self.row(sid).click()
        stream = self.find("stream")
        self.until(lambda: stream.get_attribute("data-session-id") == sid, "the stream shown")
        return stream

    def stream_text(self, sid: str) -> str:
        return str(self.stream_of(sid).text)


def start_console_server(argv: list[str], root: Path) -> tuple[subprocess.Popen[str], str]:
    """Start a server that prints ``console: URL``; the process and its console's base URL."""
    stderr = (root / "serve.stderr").open("wb")
    process = subprocess.Popen(
        argv,
        env=command_env({}),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        preexec_fn=die_with_parent(),
    )
    stderr.close()
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("console: "):
            return process, line.removeprefix("console: ").strip().rstrip("/")
    process.wait(timeout=60)
    raise AssertionError((root / "serve.stderr").read_text())


def stop_console_server(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    process.terminate()
    process.wait(timeout=60)


def command_env(extra: dict[str, str]) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ANTHROPIC_")
        and key not in ("CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_TRIO_TOKEN")
    }
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``claude-trio serve --offline --remote-tools all`` with two principals; its console's
    base URL and the folder its sessions run in."""
    root = tmp_path_factory.mktemp("console")
    work = root / "work"
    work.mkdir()
    tokens = root / "tokens.json"
    tokens.write_text(
        json.dumps([
            {"principal": "alice", "token": ALICE},
            {"principal": "bob", "token": BOB},
            {"principal": "ops", "token": OPS, "admin": True},
        ])
    )
    tokens.chmod(0o600)
    # With the default governor: its slow start lets two first turns run at once, and a turn
    # waiting for a person gives its place back, so three sessions can ask at once.
    process, base = start_console_server(
        [sys.executable, "-m", "claude_trio.cli", "serve", "--offline", "--remote-tools", "all",
         "--port", "0", "--tokens", str(tokens), "--cwd-root", str(work), "--drain-grace", "1"],
        root,
    )  # fmt: skip
    try:
        yield base, work
    finally:
        stop_console_server(process)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.fail("chromium or chromedriver is missing: run scripts/ensure-chromium")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def console(server: tuple[str, Path], browser: WebDriver) -> Console:
    base, work = server
    return Console(driver=browser, base=base, work=work)


def test_three_approvals_at_once_answered_from_the_page(console: Console) -> None:
    console.login_with_fragment(ALICE)
    # The fragment's token left the address bar (it never reached the server).
    assert "token" not in console.driver.current_url
    approved, denied, always = (console.work / name for name in ("a.txt", "b.txt", "c.txt"))
    a = console.open_session(f"#write {approved}")
    b = console.open_session(f"#bash touch {denied}")
    c = console.open_session(f"#write {always}")
    console.until(lambda: console.find("inbox-count").text == "3", "three requests waiting")
    for sid in (a, b, c):
        console.wait_state(sid, "needs_input")
        assert console.approval(sid).get_attribute("data-request-id")
    # The Write's diff is shown in the inbox and in the session's stream.
    assert "+ written by the offline model" in console.all("diff", console.approval(a))[0].text
    stream = console.stream_of(a)
    console.until(lambda: console.all("diff", stream), "the diff in the stream")
    assert "+ written by the offline model" in console.all("diff", stream)[0].text
    SCREENSHOT.parent.mkdir(exist_ok=True)
    console.driver.save_screenshot(str(SCREENSHOT))

    # An answered item leaves the inbox without moving the ones after it (a move would take
    # the focus, and the keys being typed, from a field inside them).
    console.driver.execute_script(
        "window.__moved = [];"
        "new MutationObserver((records) => { for (const r of records)"
        "  for (const n of r.addedNodes) window.__moved.push(n.dataset.sessionId); })"
        ".observe(document.getElementById('inbox'), { childList: true });"
    )
    console.all("approve", console.approval(a))[0].click()
    console.until(lambda: console.find("inbox-count").text == "2", "the first request answered")
    assert console.driver.execute_script("return window.__moved") == []
    # One answer at a time, as a person would: an item that leaves moves the ones below it up,
    # and a click already aimed at a moving button can land beside it.
    console.all("deny", console.approval(b))[0].click()
    console.until(lambda: console.find("inbox-count").text == "1", "the second request answered")
    console.all("always", console.approval(c))[0].click()
    console.until(lambda: console.find("inbox-count").text == "0", "every request answered")
    for sid in (a, b, c):
        console.wait_state(sid, "ended")
    # What the model saw after each answer (its reply quotes the tool's result).
    assert approved.read_text() == "written by the offline model\n"
    assert not denied.exists()
    assert always.read_text() == "written by the offline model\n"
    assert "the tool said: File created successfully" in console.stream_text(a)
    text_b = console.stream_text(b)
    assert "answered: deny" in text_b
    assert "denied from the console" in text_b
    assert "the tool said: File created successfully" in console.stream_text(c)
    assert "answered: always" in console.stream_text(c)
    cost = console.row(a).find_element(By.CSS_SELECTOR, "[data-testid=session-cost]")
    console.until(lambda: cost.text.startswith("$0.0") and cost.text != "$0.0000", "a cost")


MARKUP = (
    "<img src=x onerror=window.__pwned=1> <script>window.__pwned=2</script> "
    '[link](javascript:window.__pwned=3) <a href="javascript:window.__pwned=4">a</a>'
)


def test_what_a_model_or_tool_writes_is_shown_as_text_and_runs_nothing(console: Console) -> None:
    console.login_with_fragment(ALICE)
    marker = console.work / "xss.txt"
    sid = console.open_session(f"{MARKUP}\n#bash touch {marker} && echo '{MARKUP}'")
    approval = console.approval(sid)
    assert "<img src=x onerror=window.__pwned=1>" in approval.text  # the tool input, as text
    console.all("approve", approval)[0].click()
    console.wait_state(sid, "ended")
    text = console.stream_text(sid)
    # The model's answer echoes the prompt and the tool's output: all of it shown as text.
    assert text.count("<img src=x onerror=window.__pwned=1>") >= 2
    assert "[link](javascript:window.__pwned=3)" in text
    assert '<a href="javascript:window.__pwned=4">a</a>' in text
    # The label (the prompt's first line, cut to 40 characters) too.
    assert "<img src=x onerror=window.__pwned=1> <sc" in console.row(sid).text
    driver = console.driver
    assert driver.execute_script("return window.__pwned") is None
    assert driver.execute_script("return document.querySelectorAll('img, a, iframe').length") == 0
    assert driver.execute_script("return document.scripts.length") == 1  # the page's module
    assert marker.exists()


def test_a_principal_sees_only_its_sessions_and_abort_ends_one(console: Console) -> None:
    console.login_with_fragment(ALICE)
    never = console.work / "never.txt"
    waiting = console.open_session(f"#write {never}")
    console.wait_state(waiting, "needs_input")
    assert int(console.find("inbox-count").text) >= 1
    # Bob logs in with the form (no token in the URL): none of Alice's sessions or requests.
    driver = console.driver
    driver.execute_script("sessionStorage.clear()")
    driver.get("about:blank")
    driver.get(console.base + "/")
    console.until(lambda: console.find("login-token").is_displayed(), "the login form")
    console.find("login-token").send_keys("wrong-token-0123456789abcdef")
    console.find("login-submit").click()
    console.until(lambda: "refused" in driver.find_element(By.ID, "login-error").text, "refused")
    console.find("login-token").send_keys(BOB)
    console.find("login-submit").click()
    console.until(lambda: console.find("status").text == "connected", "bob connected")
    mine = console.open_session("hello from bob")
    console.wait_state(mine, "ended")
    assert [r.get_attribute("data-session-id") for r in console.all("session-row")] == [mine]
    assert console.find("inbox-count").text == "0"
    assert console.all("approval") == []
    # Alice again: abort her waiting session from the page; its Write never runs.
    console.login_with_fragment(ALICE)
    console.wait_state(waiting, "needs_input")
    console.stream_of(waiting)
    console.find("abort").click()
    console.wait_state(waiting, "aborted")
    assert "aborted" in console.find("stream").text
    assert not console.all("approval", console.driver.find_element(By.ID, "inbox")) or all(
        a.get_attribute("data-session-id") != waiting for a in console.all("approval")
    )
    assert not never.exists()
    assert mine not in {r.get_attribute("data-session-id") for r in console.all("session-row")}
    # A principal's own list has no principal column; an admin's shows whose each session is.
    assert not console.all("session-principal")[0].is_displayed()
    console.login_with_fragment(OPS)
    def listed() -> set[str | None]:
        return {r.get_attribute("data-session-id") for r in console.all("session-row")}

    console.until(lambda: {waiting, mine} <= listed(), "every session listed for the admin")
    owners = {
        row.get_attribute("data-session-id"): console.all("session-principal", row)[0].text
        for row in console.all("session-row")
    }
    assert (owners[waiting], owners[mine]) == ("alice", "bob")


def test_a_push_and_a_continue_sent_from_the_page(console: Console) -> None:
    console.login_with_fragment(ALICE)
    target = console.work / "pushed.txt"
    sid = console.open_session(f"#write {target}")
    approval = console.approval(sid)  # its turn runs, waiting for the approval
    stream = console.stream_of(sid)

    def shown(css: str) -> list[str]:
        return [e.text for e in stream.find_elements(By.CSS_SELECTOR, css)]

    console.find("push-input").send_keys("and one more thing")
    console.until(lambda: console.find("push-send").is_enabled(), "push enabled")
    console.find("push-send").click()
    # The push was accepted onto the running turn: its user_message is shown.
    console.until(lambda: "> and one more thing" in shown(".user"), "the pushed message")
    console.all("approve", approval)[0].click()
    console.wait_state(sid, "ended")
    assert target.read_text() == "written by the offline model\n"
    # Sent to an ended session, the message continues it: a new execution with that prompt.
    console.find("push-input").send_keys("a second round")
    console.find("push-send").click()
    console.until(lambda: "> a second round" in shown(".prompt"), "the continue's prompt")
    console.until(lambda: "You said: a second round" in stream.text, "the second answer")
    console.wait_state(sid, "ended")
    assert shown(".prompt") == [f"> #write {target}", "> a second round"]


def test_a_reload_loses_no_event(console: Console) -> None:
    console.login_with_fragment(ALICE)
    sid = console.open_session("tell me about reloads")
    console.wait_state(sid, "ended")
    stream = console.stream_of(sid)
    last = stream.get_attribute("data-last-seq")
    seqs = [e.get_attribute("data-seq") for e in stream.find_elements(By.CSS_SELECTOR, CHILDREN)]
    text = stream.text
    assert "You said: tell me about reloads" in text
    # The execution's prompt heads its stream (from its adapter_ready), as text.
    prompts = [e.text for e in stream.find_elements(By.CSS_SELECTOR, ".prompt")]
    assert prompts == ["> tell me about reloads"]
    assert int(str(last)) > 5
    console.driver.refresh()  # the token is kept for the tab (sessionStorage), not in the URL
    console.until(lambda: console.find("status").text == "connected", "connected again")
    console.until(lambda: console.row(sid).get_attribute("data-last-seq") == last, "replayed")
    again = console.stream_of(sid)
    assert again.get_attribute("data-last-seq") == last
    got = [e.get_attribute("data-seq") for e in again.find_elements(By.CSS_SELECTOR, CHILDREN)]
    assert got == seqs
    assert again.text == text


# A cut connection: every websocket the page makes is kept in window.__sockets, and while
# window.__cut is set a new one offers a wrong token (the gateway refuses it, and the page
# tries again).
CUTTABLE_SOCKETS = """
(() => {
  const Real = window.WebSocket;
  window.__sockets = [];
  window.__cut = false;
  window.WebSocket = class extends Real {
    constructor(url, protocols) {
      super(window.__cut ? String(url).replace(/token=[^&]*/, "token=cut-off") : url, protocols);
      window.__sockets.push(this);
    }
  };
})();
"""


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://", 1) + "/"


def follow_and_allow(base: str, token: str, sid: str) -> list[Event]:
    """Every event of ``sid``'s execution as the Python client sees it (from its first),
    allowing the tool call it waits for."""

    async def follow() -> list[Event]:
        events: list[Event] = []
        with trio.fail_after(WAIT):
            async with connect_gateway(ws_url(base), token=token) as client:
                session = await client.attach(sid)
                async for event in session.events:
                    events.append(event)
                    if isinstance(event, UserInputRequest):
                        await session.answer(event.request_id, {"decision": "allow"})
        return events

    return trio.run(follow)


def test_a_cut_connection_loses_no_event(console: Console) -> None:
    driver = console.driver
    script = driver.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument", {"source": CUTTABLE_SOCKETS}
    )
    try:
        console.login_with_fragment(ALICE)
        written = console.work / "cut.txt"
        sid = console.open_session(f"#write {written}")
        console.wait_state(sid, "needs_input")
        stream = console.stream_of(sid)
        held = int(str(stream.get_attribute("data-last-seq")))
        assert held > 0
        # Cut the page's connection; the session goes on without it (its tool is allowed and
        # its turn ends while the page is cut off).
        driver.execute_script("window.__cut = true; for (const ws of window.__sockets) ws.close()")
        console.until(lambda: console.find("status").text == "reconnecting", "cut")
        # A session asked for while cut off is not dropped in silence: the page says it was not
        # sent and keeps the prompt.
        console.find("new-prompt").send_keys("#say while cut off")
        said = driver.execute_script(
            "document.getElementById('new-submit').click();"
            "return document.getElementById('status').textContent"
        )
        assert said.startswith("not connected: the session was not opened")
        assert console.find("new-prompt").get_attribute("value") == "#say while cut off"
        console.find("new-prompt").clear()
        events = follow_and_allow(console.base, ALICE, sid)
        seqs = [e.seq for e in events]
        assert seqs == sorted(set(seqs))
        assert seqs[0] == 1
        assert seqs[-1] > held + 5  # many events came while the page was cut off
        assert written.read_text() == "written by the offline model\n"
        assert stream.get_attribute("data-last-seq") == str(held)
        # The page reconnects and resumes from its last seq: every event, each once.
        driver.execute_script("window.__cut = false")
        console.until(lambda: console.find("status").text == "connected", "reconnected")
        console.until(lambda: stream.get_attribute("data-last-seq") == str(seqs[-1]), "caught up")
        console.wait_state(sid, "ended")
        nodes = stream.find_elements(By.CSS_SELECTOR, CHILDREN)
        shown = [int(str(n.get_attribute("data-seq"))) for n in nodes]
        assert shown == sorted(set(shown))
        assert set(shown) <= set(seqs)
        texts: dict[str, str] = {}
        for event in events:
            if isinstance(event, TextDelta) and not event.is_subagent:
                texts[event.message_id] = texts.get(event.message_id, "") + event.text
        shown_texts = [n.text for n in stream.find_elements(By.CSS_SELECTOR, ".text")]
        assert shown_texts == [t.strip() for t in texts.values()]
        tool_ids = [e.tool_use_id for e in events if isinstance(e, ToolUse)]
        shown_tools = [
            n.get_attribute("data-tool-use-id")
            for n in stream.find_elements(By.CSS_SELECTOR, ".tool")
        ]
        assert shown_tools == tool_ids
        assert "the tool said: File created successfully" in stream.text
        # The same as a page that loads the whole session at once.
        text = stream.text
        driver.refresh()
        console.until(lambda: console.find("status").text == "connected", "loaded again")
        again = console.stream_of(sid)
        console.until(lambda: again.get_attribute("data-last-seq") == str(seqs[-1]), "replayed")
        assert [
            int(str(n.get_attribute("data-seq")))
            for n in again.find_elements(By.CSS_SELECTOR, CHILDREN)
        ] == shown
        assert again.text == text
    finally:
        driver.execute_cdp_cmd(
            "Page.removeScriptToEvaluateOnNewDocument", {"identifier": script["identifier"]}
        )


def test_an_approval_with_edited_input_runs_the_tool_with_it(console: Console) -> None:
    console.login_with_fragment(ALICE)
    asked, edited = console.work / "asked.txt", console.work / "edited.txt"
    sid = console.open_session(f"#write {asked}")
    approval = console.approval(sid)
    # The lists' redraws leave an item in its place: moving it would take the focus (and
    # the keys being typed) from the field inside it.
    assert console.inbox_moves_over_one_redraw() == 0
    approval.find_element(By.CSS_SELECTOR, "details.edit summary").click()
    box = console.all("edit-input", approval)[0]
    assert json.loads(str(box.get_attribute("value"))) == {
        "file_path": str(asked),
        "content": "written by the offline model\n",
    }
    # Not a JSON object: the page says so and sends nothing.
    box.clear()
    box.send_keys("[1, 2]")
    console.all("edit-submit", approval)[0].click()
    assert "JSON object" in console.all("edit-error", approval)[0].text
    assert console.state(sid) == "needs_input"
    box.clear()
    box.send_keys(json.dumps({"file_path": str(edited), "content": "edited in the console\n"}))
    console.all("edit-submit", approval)[0].click()
    console.wait_state(sid, "ended")
    # The tool ran with the edited input, and the model was told so.
    assert edited.read_text() == "edited in the console\n"
    assert not asked.exists()
    text = console.stream_text(sid)
    assert "answered: allow" in text
    assert f"the tool said: File created successfully at: {edited}" in text


ASKER = "asker-console-token-0123456789"
ASKING_SERVER = Path(__file__).with_name("asking_server.py")


@pytest.fixture(scope="module")
def asking(
    tmp_path_factory: pytest.TempPathFactory, browser: WebDriver
) -> Iterator[tuple[Console, subprocess.Popen[str]]]:
    """A gateway whose model asks (``asking_server.py``): its console, and the process (a line
    ``elicit`` on its stdin opens a session that elicits)."""
    root = tmp_path_factory.mktemp("asking")
    work = root / "work"
    work.mkdir()
    process, base = start_console_server(
        [sys.executable, str(ASKING_SERVER), ASKER, str(work)], root
    )
    try:
        yield Console(driver=browser, base=base, work=work), process
    finally:
        stop_console_server(process)


def test_a_question_answered_from_the_page_reaches_the_model(
    asking: tuple[Console, subprocess.Popen[str]],
) -> None:
    console, _ = asking
    console.login_with_fragment(ASKER)
    sid = console.open_session("#ask me about colours")
    approval = console.approval(sid)
    question = console.all("question", approval)[0]
    assert "Which colour should the button be?" in question.text
    options = console.all("answer-option", question)
    assert [o.text for o in options] == ["Blue", "Orange"]
    options[1].click()
    console.wait_state(sid, "ended")
    console.until(lambda: console.find("inbox-count").text == "0", "answered")
    # The model's next request carried the answer as AskUserQuestion's result.
    text = console.stream_text(sid)
    assert "the tool said:" in text
    assert '"Which colour should the button be?"="Orange"' in text


def test_a_multi_select_question_sends_every_option_chosen_on_the_page(
    asking: tuple[Console, subprocess.Popen[str]],
) -> None:
    console, _ = asking
    console.login_with_fragment(ASKER)
    sid = console.open_session("#askmany which toppings")
    approval = console.approval(sid)
    question = console.all("question", approval)[0]
    assert "Which toppings?" in question.text
    options = console.all("answer-option", question)
    assert [o.text for o in options] == ["Cheese", "Olives", "Basil"]
    (done,) = console.all("answer-done", question)
    assert not done.is_enabled()  # nothing chosen yet
    options[2].click()
    options[1].click()
    options[1].click()  # a second click takes Olives back
    options[0].click()
    assert [o.get_attribute("aria-pressed") for o in options] == ["true", "false", "true"]
    done.click()
    console.wait_state(sid, "ended")
    console.until(lambda: console.find("inbox-count").text == "0", "answered")
    # Both choices, in the options' order, reached the model as AskUserQuestion's result.
    text = console.stream_text(sid)
    assert '"Which toppings?"="Cheese, Basil"' in text


def test_an_edit_is_shown_as_a_diff_and_runs_once_approved(
    asking: tuple[Console, subprocess.Popen[str]],
) -> None:
    console, _ = asking
    console.login_with_fragment(ASKER)
    target = console.work / "settings.txt"
    target.write_text("name = demo\ncolour = blue\n")
    sid = console.open_session(f"#edit {target}")
    approval = console.approval(sid)  # the Edit asks (the Read before it did not)
    (diff,) = console.all("diff", approval)
    lines = diff.text.splitlines()
    assert str(target) in lines
    assert "- colour = blue" in lines
    assert "+ colour = orange" in lines
    assert target.read_text() == "name = demo\ncolour = blue\n"  # nothing edited before
    console.all("approve", approval)[0].click()
    console.wait_state(sid, "ended")
    assert target.read_text() == "name = demo\ncolour = orange\n"
    (shown,) = console.all("diff", console.stream_of(sid))
    assert "+ colour = orange" in shown.text.splitlines()


def test_a_subagent_s_work_is_nested_under_the_tool_call_that_started_it(
    asking: tuple[Console, subprocess.Popen[str]],
) -> None:
    console, _ = asking
    console.login_with_fragment(ASKER)
    sid = console.open_session("#subagent count them")
    console.wait_state(sid, "ended")
    stream = console.stream_of(sid)
    (nest,) = console.all("subagent", stream)
    assert "subagent: count files" in nest.text
    assert "Nothing to add." in nest.text  # what the subagent said, inside its box
    assert "subagent completed" in nest.text
    # The box sits in the Agent tool call's entry; the main agent's answer follows outside.
    tool = nest.find_element(By.XPATH, "..")
    assert "tool" in str(tool.get_attribute("class")).split()
    assert "Agent" in tool.find_element(By.CSS_SELECTOR, ".name").text
    texts = [e.text for e in stream.find_elements(By.CSS_SELECTOR, ":scope > .text")]
    # (the main agent quotes the Agent tool's result, the subagent's report)
    assert len(texts) == 1
    assert texts[0].startswith("the tool said:")
    assert "Nothing to add." not in texts


def test_an_elicitation_form_answered_from_the_page_reaches_the_mcp_server(
    asking: tuple[Console, subprocess.Popen[str]],
) -> None:
    console, process = asking
    console.login_with_fragment(ASKER)
    before = {r.get_attribute("data-session-id") for r in console.all("session-row")}
    assert process.stdin is not None
    process.stdin.write("elicit\n")
    process.stdin.flush()

    def elicitation() -> WebElement | None:
        for item in console.all("approval"):
            if item.get_attribute("data-session-id") not in before:
                return item
        return None

    form: WebElement = console.until(elicitation, "the elicitation")
    sid = str(form.get_attribute("data-session-id"))
    assert "elicit asks: favourite colour?" in form.text
    fields = console.all("elicit-field", form)
    assert [f.get_attribute("data-name") for f in fields] == ["answer"]
    fields[0].send_keys("teal <b>green</b>")
    console.all("elicit-accept", form)[0].click()
    console.wait_state(sid, "ended")
    # The MCP server's tool returned what the server was told; the model saw it.
    assert "the tool said: accept: teal <b>green</b>" in console.stream_text(sid)
    # Declined: the server is told so, and nothing is sent.
    before |= {sid}
    process.stdin.write("elicit\n")
    process.stdin.flush()
    form = console.until(elicitation, "the second elicitation")
    second = str(form.get_attribute("data-session-id"))
    console.all("elicit-decline", form)[0].click()
    console.wait_state(second, "ended")
    assert "the tool said: decline" in console.stream_text(second)


def governor_text(figures: GovernorFigures) -> str:
    """What the page's header says of the server's fleet governor (its one line)."""
    parts = []
    if figures.paused and figures.resumes_at is not None:
        parts.append(f"paused: rate limit, resumes {clock_time(figures.resumes_at)}")
    parts.append(f"concurrency {figures.limit}/{figures.max_live}")
    parts.append(f"{figures.running} running")
    if figures.asking:
        parts.append(f"{figures.asking} asking a person")
    if figures.waiting:
        parts.append(f"{figures.waiting} waiting")
    return " · ".join(parts)


def server_governor(base: str) -> GovernorFigures:
    async def ask() -> GovernorFigures | None:
        with trio.fail_after(WAIT):
            async with connect_gateway(ws_url(base), token=ALICE) as client:
                return await client.governor()

    figures = trio.run(ask)
    assert figures is not None  # serve has a governor by default
    return figures


def test_the_header_shows_the_fleet_governor_as_it_changes(console: Console) -> None:
    console.login_with_fragment(ALICE)
    line = console.find("governor")
    console.until(
        lambda: line.text == governor_text(server_governor(console.base)), "the governor's line"
    )
    assert "running" in line.text
    ran = console.work / "governor.txt"
    sid = console.open_session(f"#bash touch {ran}")
    approval = console.approval(sid)

    def asking_as_the_server_says() -> bool:
        figures = server_governor(console.base)
        return figures.asking >= 1 and line.text == governor_text(figures)

    # Pushed by the server as the figures change: the turn waits for a person.
    console.until(asking_as_the_server_says, "the turn asking")
    assert "asking a person" in line.text
    console.all("approve", approval)[0].click()
    console.wait_state(sid, "ended")
    assert ran.exists()

    def shown_as_the_server_says() -> bool:
        figures = server_governor(console.base)
        latest = f"latest: {figures.last_notice}" if figures.last_notice else ""
        return line.text == governor_text(figures) and line.get_attribute("title") == latest

    console.until(shown_as_the_server_says, "the figures after, and the latest notice")
