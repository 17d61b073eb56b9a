#!/usr/bin/python3
"""The web console in headless Chromium (WebDriver): a waiting message is listed, a CONSUME
clicked with the write token is executed by the relay's pending-action job (PROCESSED after a
reload), the view token hides the buttons and a forged write is refused with 403, an instance of
150 messages shows the first 100 and "More" the rest, a numbered account shows its missing
number (no "Skip gap" button for the view token) and a "Skip gap" clicked with the write token
is executed by the relay (nothing missing after a reload), and screenshots at 1280x800 are written.

usage: console_test.py URL VIEW_TOKEN_FILE WRITE_TOKEN_FILE SCREENSHOT_DIR
"""
import sys
import time

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError as e:
    sys.exit(f"FAILED: python3-selenium is missing ({e}); bash .ci/setup installs chromium, chromium-driver and python3-selenium")

url, view_file, write_file, out_dir = sys.argv[1:5]
view_token = open(view_file).read().strip()
write_token = open(write_file).read().strip()


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,800"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def use_token(driver, token):
    field = driver.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token, Keys.ENTER)  # the keyboard, as an operator without a mouse
    WebDriverWait(driver, 20).until(lambda d: "role: none" not in d.find_element(By.ID, "role").text
                                    and "…" not in d.find_element(By.ID, "role").text)


def search(driver, sequence, context_id):
    driver.find_element(By.ID, "sequence").send_keys(sequence)
    driver.find_element(By.ID, "context").send_keys(context_id, Keys.ENTER)
    return WebDriverWait(driver, 20).until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-testid=messages] tr[data-state]")))


def check(condition, message):
    if not condition:
        raise AssertionError(message)


driver = browser()
try:
    driver.get(url)
    use_token(driver, write_token)
    check("role: write" in driver.find_element(By.ID, "role").text, "the write token does not give the write role")
    # The list holds o-1 and the ledger account acct-1, longest waiting first: pick o-1's row.
    WebDriverWait(driver, 20).until(ready.presence_of_element_located((By.CSS_SELECTOR, "#waiting tr.pick")))
    rows = driver.find_elements(By.CSS_SELECTOR, "#waiting tr.pick")
    picked = [r for r in rows if "o-1" in r.text]
    check(picked, f"the waiting list does not show o-1: {[r.text for r in rows]!r}")
    waiting = picked[0]
    waiting.click()
    row = WebDriverWait(driver, 20).until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-testid=messages] tr[data-state=WAITING]")))
    check("OrderShipped" in row.text, f"the waiting message is not OrderShipped: {row.text!r}")
    message_row_id = row.get_attribute("data-testid")
    driver.save_screenshot(f"{out_dir}/console.png")
    row.find_element(By.XPATH, ".//button[starts-with(@data-testid, 'action-CONSUME-')]").click()
    WebDriverWait(driver, 10).until(lambda d: "requested" in row.text)

    deadline = time.time() + 60
    state = "WAITING"
    while time.time() < deadline and state != "PROCESSED":
        time.sleep(1)
        driver.refresh()
        use_token(driver, write_token)
        search(driver, "OrderSequence", "o-1")
        state = driver.find_element(By.CSS_SELECTOR, f"[data-testid={message_row_id}]").get_attribute("data-state")
    check(state == "PROCESSED", f"the consumed message is {state} after 60 s, not PROCESSED")
    driver.save_screenshot(f"{out_dir}/console-after-consume.png")

    driver.refresh()
    use_token(driver, view_token)
    check("role: view" in driver.find_element(By.ID, "role").text, "the view token does not give the view role")
    search(driver, "OrderSequence", "o-1")
    buttons = driver.find_elements(By.CSS_SELECTOR, "button.act")
    check(not buttons, f"the view token still shows {len(buttons)} action buttons")
    status = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/api/v1/instances/actions', {method: 'POST', headers: {'Authorization': 'Bearer ' + arguments[0],
              'Content-Type': 'application/json'}, body: JSON.stringify({action: 'CLOSE', sequence: 'OrderSequence', context_id: 'o-1'})})
          .then(r => done(r.status), e => done(String(e)));""", view_token)
    check(status == 403, f"a write with the view token answered {status}, not 403")

    driver.refresh()
    use_token(driver, view_token)
    search(driver, "OrderSequence", "o-many")
    rows = driver.find_elements(By.CSS_SELECTOR, "[data-testid=messages] tr[data-state]")
    check(len(rows) == 100, f"the first page of o-many shows {len(rows)} messages, not 100")
    check("showing 100 of 150" in driver.find_element(By.CSS_SELECTOR, "[data-testid=shown-count]").text, "no 'showing 100 of 150'")
    more = driver.find_element(By.CSS_SELECTOR, "[data-testid=more]")
    check(more.is_displayed(), "no More button under the first page of o-many")
    driver.execute_script("arguments[0].scrollIntoView()", more)
    driver.save_screenshot(f"{out_dir}/console-more.png")
    more.send_keys(Keys.ENTER)  # the keyboard again
    WebDriverWait(driver, 20).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-testid=messages] tr[data-state]")) >= 150)
    ids = [r.get_attribute("data-testid") for r in driver.find_elements(By.CSS_SELECTOR, "[data-testid=messages] tr[data-state]")]
    check(len(ids) == 150 and len(set(ids)) == 150, f"after More o-many shows {len(ids)} rows, {len(set(ids))} distinct, not 150")
    check(not more.is_displayed(), "the More button stays after the last page")

    driver.refresh()
    use_token(driver, view_token)
    search(driver, "LedgerSequence", "acct-1")
    numbering = WebDriverWait(driver, 20).until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-testid=numbering]")))
    check("last released 1" in numbering.text and "waiting 3, 4" in numbering.text, f"acct-1's numbers read {numbering.text!r}")
    missing = numbering.find_element(By.CSS_SELECTOR, "[data-testid=missing]").text
    check(missing == "2", f"acct-1 shows missing {missing!r}, not '2'")
    check(not driver.find_elements(By.CSS_SELECTOR, "button.act"), "the view token shows a Skip gap button")

    driver.refresh()
    use_token(driver, write_token)
    search(driver, "LedgerSequence", "acct-1")
    numbering = WebDriverWait(driver, 20).until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-testid=numbering]")))
    skip = numbering.find_element(By.XPATH, ".//button[starts-with(@data-testid, 'action-SKIP_GAP-')]")
    check(skip.text == "Skip gap", f"the button reads {skip.text!r}, not 'Skip gap'")
    driver.save_screenshot(f"{out_dir}/console-numbered.png")
    skip.click()
    WebDriverWait(driver, 10).until(lambda d: "requested" in skip.text)
    deadline = time.time() + 60
    missing = "2"
    while time.time() < deadline and missing != "none":
        time.sleep(1)
        driver.refresh()
        use_token(driver, write_token)
        search(driver, "LedgerSequence", "acct-1")
        missing = driver.find_element(By.CSS_SELECTOR, "[data-testid=missing]").text
    check(missing == "none", f"acct-1 still misses {missing!r} 60 s after Skip gap")
    check("last released 4" in driver.find_element(By.CSS_SELECTOR, "[data-testid=numbering]").text, "3 and 4 were not released")
    driver.save_screenshot(f"{out_dir}/console-after-skip-gap.png")
    print(f"console: listed, consumed through the page, PROCESSED after reload; view token: no buttons, forged write 403; "
          f"150 messages in two pages; a numbered account's gap shown and skipped; screenshots in {out_dir}")
finally:
    driver.quit()
