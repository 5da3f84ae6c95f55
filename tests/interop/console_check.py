"""The web console in a real browser: headless Chromium (Debian's, driven
by Selenium) against a real broker with data.

Usage: python3 tests/interop/console_check.py WEIR_BIN [SCREENSHOT_DIR]

Starts a broker of its own on ephemeral ports, makes a topic `orders`
(6 partitions) of JSON records, a group `billing` that read 100 of its 500
records, and a topic `wide` of 10 000 partitions; then opens each page and
checks what a person would see: the broker live on the overview, the topic
found by search, its partitions with their ISR and its configs, the
group's lag of 400 and its lag chart (from the broker's own samples, taken
every 10 s), its members, messages as JSON, and the 10 000-partition
topic's page (its time to render is reported in a NOTE line, not
asserted). It makes changes through the page (a topic created, a config
set, a test record, offsets reset, a topic deleted), and checks a
read-only console, a switched-off one, and what users with and without
ACLs see on a broker with an authorizer. Any error in the browser's
console fails the check it happened in. A screenshot of each page goes to
SCREENSHOT_DIR (default target/console-screenshots).
"""

import base64
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_util import CheckFailed, Checks, expect, expect_eq  # noqa: E402

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def start_broker(weir, work, name="broker", extra=("--listen", "127.0.0.1:0")):
    out = open(os.path.join(work, f"{name}.out"), "w+")
    log = open(os.path.join(work, f"{name}.log"), "w")
    broker = subprocess.Popen(
        [weir, "serve", "--data-dir", os.path.join(work, name), *extra,
         "--http-listen", "127.0.0.1:0", "--controller-listen", "127.0.0.1:0"],
        stdout=out, stderr=log,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out.seek(0)
        ready = re.search(r"^weir ready: kafka=(\S+) http=(\S+)", out.read(), re.M)
        if ready:
            return broker, ready.group(1), ready.group(2)
        time.sleep(0.1)
    raise RuntimeError("the broker did not start: " + open(os.path.join(work, f"{name}.log")).read()[-1000:])


def weir_cli(weir, kafka, *args, stdin=""):
    done = subprocess.run([weir, *args, "--bootstrap", kafka], input=stdin, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"weir {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    return webdriver.Chrome(options=options, service=service)


class Console:
    def __init__(self, driver, http, shots):
        self.driver = driver
        self.base = f"http://{http}/"
        self.shots = shots
        self.opened = 0

    def open(self, fragment, until_text):
        """Opens a page and waits for `until_text` in its main part."""
        # A new query string each time: the same URL again would not load
        # the page anew.
        self.opened += 1
        self.driver.get(f"{self.base}?load={self.opened}{fragment}")
        # The page swaps its main part in whole once drawn: an element
        # found just before goes stale.
        try:
            WebDriverWait(self.driver, 15, ignored_exceptions=[StaleElementReferenceException]).until(
                lambda d: until_text in d.find_element(By.ID, "main").text
            )
        except TimeoutException:
            shown = self.driver.find_element(By.TAG_NAME, "body").text[:400]
            raise CheckFailed(f"no {until_text!r} on {fragment} within 15 s; the page shows: {shown!r}")
        return self.driver.find_element(By.ID, "main")

    def rows(self, main, table_index=0):
        table = main.find_elements(By.TAG_NAME, "table")[table_index]
        return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr")]

    def field(self, name, text):
        element = self.driver.find_element(By.NAME, name)
        element.clear()
        element.send_keys(text)

    def choose(self, name, value):
        Select(self.driver.find_element(By.NAME, name)).select_by_value(value)

    def click(self, name, until_outcome):
        """Clicks the button `name` and waits for its outcome to say
        `until_outcome`; returns the outcome's text."""
        self.driver.find_element(By.CSS_SELECTOR, f"button[name='{name}']").click()
        outcome = f"[data-outcome='{name}']"

        def said(d):
            found = d.find_elements(By.CSS_SELECTOR, outcome)
            return found and found[0].text not in ("", "…") and found[0].text

        text = WebDriverWait(self.driver, 15, ignored_exceptions=[StaleElementReferenceException]).until(
            said, f"an outcome of {name}"
        )
        expect(until_outcome in text, f"{name}: {text}")
        return text

    def shot(self, name):
        self.driver.save_screenshot(os.path.join(self.shots, f"{name}.png"))

    def console_errors(self):
        return [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]


def main():
    if len(sys.argv) not in (2, 3):
        print("usage: console_check.py WEIR_BIN [SCREENSHOT_DIR]", file=sys.stderr)
        sys.exit(64)
    weir = os.path.abspath(sys.argv[1])
    shots = os.path.abspath(sys.argv[2] if len(sys.argv) == 3 else os.path.join(ROOT, "target", "console-screenshots"))
    os.makedirs(shots, exist_ok=True)
    checks = Checks("console_check", 300)
    work = tempfile.mkdtemp(prefix="weir-console.")
    brokers = []
    driver = None
    try:
        broker, kafka, http = start_broker(weir, work)
        brokers.append(broker)
        weir_cli(weir, kafka, "topic", "create", "orders", "--partitions", "6")
        records = "".join(f'customer-{i % 7}:{{"order": {i}, "item": "book"}}\n' for i in range(500))
        weir_cli(weir, kafka, "produce", "orders", "--key-separator", ":", stdin=records)
        weir_cli(weir, kafka, "consume", "orders", "--group", "billing", "--count", "100")
        weir_cli(weir, kafka, "topic", "create", "big", "--partitions", "1")
        weir_cli(weir, kafka, "produce", "big", stdin="x" * 100_000 + "\n")
        created = time.monotonic()
        weir_cli(weir, kafka, "topic", "create", "wide", "--partitions", "10000")
        Checks.note(f"a topic of 10 000 partitions created in {time.monotonic() - created:.1f} s")
        driver = browser()
        console = Console(driver, http, shots)

        def with_console(check, expected=()):
            """`check`, failed by any browser console error but the
            `expected` ones (Chromium logs a refused request it was meant
            to make)."""
            def run():
                driver.get_log("browser")  # what came before is another check's
                check()
                errors = [e for e in console.console_errors() if not any(x in e for x in expected)]
                expect(not errors, f"browser console errors: {errors}")
            return run

        def overview():
            main = console.open("#/", "Brokers")
            rows = console.rows(main)
            expect_eq(len(rows), 1, "brokers")
            expect(rows[0][0] == "1" and rows[0][3] == "live", f"node 1 live: {rows[0]}")
            expect("active controller" in rows[0][4], f"node 1 is the controller: {rows[0]}")
            console.shot("overview")

        def topics():
            main = console.open("#/topics?search=ord&page=0", "1 topic(s)")
            rows = console.rows(main)
            expect_eq([r[0] for r in rows], ["orders"], "topics matching 'ord'")
            expect_eq(rows[0][1], "6", "partitions")
            expect_eq(rows[0][7], "delete", "cleanup policy")
            console.shot("topics")

        def topic():
            main = console.open("#/topics/orders", "Partitions")
            rows = console.rows(main)
            expect_eq(len(rows), 6, "partition rows")
            expect(all(r[1] == "1" and r[3] == "1" for r in rows), f"leader and ISR: {rows}")
            expect_eq(sum(int(r[6]) for r in rows), 500, "records over the log ends")
            configs = {r[0]: r[1:3] for r in console.rows(main, 1)}
            expect_eq(configs.get("retention.ms"), ["604800000", "DEFAULT_CONFIG"], "retention.ms")
            console.shot("topic")

        def group():
            # The broker samples lag every 10 s: wait for a point.
            deadline = time.monotonic() + 25
            while True:
                main = console.open("#/groups/billing", "Partitions")
                if main.find_elements(By.CSS_SELECTOR, "[data-chart] polyline[data-series=lag]"):
                    break
                expect(time.monotonic() < deadline, "no lag sample within 25 s")
                time.sleep(2)
            expect("total lag\n" in main.text or "400" in main.text, main.text)
            cards = {c.find_element(By.CLASS_NAME, "label").text: c.find_element(By.CLASS_NAME, "value").text
                     for c in main.find_elements(By.CLASS_NAME, "card")}
            expect_eq(cards.get("total lag"), "400", "total lag")
            legend = main.find_element(By.CSS_SELECTOR, "[data-chart] .legend").text
            expect("lag: 400 now" in legend, f"the chart's last point: {legend}")
            console.shot("group")

        def messages():
            main = console.open("#/topics/orders/messages?from=latest&limit=5&view=json", "record(s)")
            rows = console.rows(main)
            expect_eq(len(rows), 5, "the latest 5 records")
            expect(rows[0][3].startswith("customer-"), f"a key: {rows[0]}")
            pretty = main.find_elements(By.CSS_SELECTOR, "pre.json")
            expect(pretty and '"order":' in pretty[0].text and "\n" in pretty[0].text, "values shown as pretty JSON")
            console.shot("messages")
            main = console.open("#/topics/orders/messages?partition=0&from=offset&at=0&limit=3", "record(s)")
            expect_eq([r[1] for r in console.rows(main)], ["0", "1", "2"], "offsets from 0 of partition 0")
            main = console.open("#/topics/big/messages", "record(s)")
            expect("truncated: the value is 97.7 KiB" in main.text, "a large value is cut, its size shown")

        def members():
            member = subprocess.Popen([weir, "consume", "orders", "--group", "live-readers", "--bootstrap", kafka],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 20
                while True:
                    main = console.open("#/groups/live-readers", "Partitions")
                    if "Members" in main.text:
                        break
                    expect(time.monotonic() < deadline, "no member shown within 20 s")
                    time.sleep(1)
                rows = console.rows(main, 0)
                expect_eq(len(rows), 1, "members")
                expect_eq(rows[0][1], "weir-client", "the member's client id")
                expect_eq(rows[0][3], ", ".join(f"orders-{p}" for p in range(6)), "its partitions")
                console.shot("group-members")
            finally:
                member.send_signal(signal.SIGINT)
                member.wait(timeout=30)

        def create_and_edit():
            console.open("#/topics", "topic(s)")
            console.field("new-topic", "from-console")
            console.field("new-partitions", "2")
            console.driver.find_element(By.CSS_SELECTOR, "button[name='create-topic']").click()
            main = console.open("#/topics/from-console", "Partitions")
            expect_eq(len(console.rows(main)), 2, "partitions of the created topic")
            console.choose("config-name", "retention.ms")
            console.field("config-value", "3600000")
            console.click("set-config", "retention.ms set")
            main = console.open("#/topics/from-console", "Configs")
            configs = {r[0]: r[1:3] for r in console.rows(main, 1)}
            expect_eq(configs.get("retention.ms"), ["3600000", "DYNAMIC_TOPIC_CONFIG"], "retention.ms after the edit")
            console.choose("config-name", "retention.ms")
            console.field("config-value", "soon")
            console.click("set-config", "Invalid value soon for configuration retention.ms")
            console.shot("topic-edited")

        def produce_test_record():
            console.open("#/topics/from-console/messages", "record(s)")
            console.field("test-key", "k-1")
            console.field("test-value", '{"hello": "console"}')
            console.click("produce", "Written to partition")
            main = console.open("#/topics/from-console/messages?view=json", "1 record(s)")
            expect('"hello": "console"' in main.text, main.text)

        def reset_offsets():
            console.open("#/groups/billing", "Reset offsets")
            console.choose("reset-to", "earliest")
            console.click("reset-dry-run", "Nothing committed")
            preview = console.driver.find_element(By.CSS_SELECTOR, "[data-preview] table")
            expect("would start at" in preview.text, preview.text)
            console.shot("reset-dry-run")
            console.click("reset-offsets", "Committed")
            main = console.open("#/groups/billing", "Partitions")
            cards = {c.find_element(By.CLASS_NAME, "label").text: c.find_element(By.CLASS_NAME, "value").text
                     for c in main.find_elements(By.CLASS_NAME, "card")}
            expect_eq(cards.get("total lag"), "500", "total lag after the reset to the earliest")

        def delete_topic():
            console.open("#/topics/from-console", "Delete")
            console.field("confirm-delete", "wrong")
            console.click("delete-topic", "Type from-console to confirm")
            console.field("confirm-delete", "from-console")
            console.driver.find_element(By.CSS_SELECTOR, "button[name='delete-topic']").click()
            WebDriverWait(console.driver, 15).until(lambda d: d.current_url.endswith("#/topics"), "back at the topics")
            main = console.open("#/topics?search=from-console", "topic(s)")
            expect_eq(console.rows(main), [], "the deleted topic is gone")
            main = console.open("#/topics/__consumer_offsets", "Configs")
            expect("the console does not delete it" in main.text, "an internal topic has no delete")

        def wide():
            started = time.monotonic()
            main = console.open("#/topics/wide", "page 1 of 100")
            took = time.monotonic() - started
            expect_eq(len(console.rows(main)), 100, "partition rows on the first page")
            # Measured and reported, not asserted: a loaded machine is slower.
            Checks.note(f"the page of a 10 000-partition topic rendered in {took * 1000:.0f} ms")
            console.shot("wide-topic")

        def secured():
            # A broker with an authorizer: admin is a super user, alice may
            # describe the cluster and the topic `visible` only, bob nothing.
            users = [f"SCRAM-SHA-512=[name={u},password={u}-secret]" for u in ("alice", "bob")]
            extra = ["--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                     "--authorizer-class-name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                     "--super-users", "User:ANONYMOUS"]
            for user in users:
                extra += ["--add-scram", user]
            second, plain, secured_http = start_broker(weir, work, "secured", extra)
            brokers.append(second)
            for topic in ("visible", "hidden"):
                weir_cli(weir, plain, "topic", "create", topic)
            weir_cli(weir, plain, "acl", "create", "--cluster", "--allow-principal", "User:alice", "--operation", "Describe")
            weir_cli(weir, plain, "acl", "create", "--topic", "visible", "--allow-principal", "User:alice", "--operation", "Describe")
            as_user = Console(driver, secured_http, shots)

            def login(user):
                token = base64.b64encode(f"{user}:{user}-secret".encode()).decode()
                driver.execute_cdp_cmd("Network.enable", {})
                driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})

            login("alice")
            main = as_user.open("#/topics", "topic(s)")
            expect_eq([r[0] for r in as_user.rows(main)], ["visible"], "the topics alice may describe")
            main = as_user.open("#/topics/hidden", "does not exist")
            as_user.shot("secured-alice")
            login("bob")
            driver.get(as_user.base)
            expect("visible" not in driver.page_source and "hidden" not in driver.page_source,
                   "bob sees no topic")
            expect("403" in driver.page_source or "Describe" in driver.page_source, driver.page_source[:300])
            driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})

        def read_only_and_disabled():
            third, _, read_only_http = start_broker(
                weir, work, "read-only", ["--listen", "127.0.0.1:0", "--console-read-only", "true"])
            brokers.append(third)
            viewer = Console(driver, read_only_http, shots)
            main = viewer.open("#/topics", "topic(s)")
            expect(not main.find_elements(By.CSS_SELECTOR, "button[name='create-topic']"), "no create button")
            request = urllib.request.Request(
                f"http://{read_only_http}/v1/topics", data=b'{"name":"x","partitions":1}',
                headers={"Content-Type": "application/json"}, method="POST")
            try:
                urllib.request.urlopen(request, timeout=10)
                raise CheckFailed("a change was accepted by a read-only console")
            except urllib.error.HTTPError as refused:
                expect_eq(refused.code, 403, "a change to a read-only console")
            fourth, _, off_http = start_broker(
                weir, work, "no-console", ["--listen", "127.0.0.1:0", "--console-enable", "false"])
            brokers.append(fourth)
            try:
                urllib.request.urlopen(f"http://{off_http}/", timeout=10)
                raise CheckFailed("the console answered with weir.console.enable=false")
            except urllib.error.HTTPError as absent:
                expect_eq(absent.code, 404, "the console switched off")

        for name, *check in [
            ("console: overview shows the live broker and controller", overview),
            ("console: topics are searched", topics),
            ("console: a topic's partitions, ISR and configs", topic),
            ("console: a group's lag and its chart", group),
            ("console: messages browsed as JSON, from an offset, a large one cut", messages),
            ("console: a group's members and their partitions", members),
            ("console: a topic created and its config edited (a bad value refused)", create_and_edit,
             ["/v1/topics/from-console/configs - Failed to load resource: the server responded with a status of 400"]),
            ("console: a test record produced", produce_test_record),
            ("console: a group's offsets reset, with a dry run first", reset_offsets),
            ("console: a topic deleted once confirmed, an internal one protected", delete_topic),
            ("console: a 10 000-partition topic's page draws its first hundred partitions", wide),
            ("console: read-only shows no change and refuses one; switched off it is not served",
             read_only_and_disabled),
            ("console: a user sees only what the ACLs let it describe; one without ACLs sees nothing", secured,
             ["Failed to load resource: the server responded with a status of 403",
              "Failed to load resource: the server responded with a status of 404"]),
        ]:
            checks.run(name, with_console(*check))
    except Exception as error:  # the setup failing is a failed check
        checks.fail("console: setup", str(error))
    finally:
        if driver is not None:
            driver.quit()
        for broker in brokers:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                broker.kill()
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == "__main__":
    main()
