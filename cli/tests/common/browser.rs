//! A headless Chromium driven through `chromedriver` (Debian's `chromium` and
//! `chromium-driver`, which `build-support/scripts/test.sh` installs): the W3C WebDriver
//! protocol is JSON over HTTP, spoken here with a plain socket. The page is driven by scripts
//! run in it, as a user's clicks would drive it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a page may take to reach a state: minutes, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(120);

/// One browser session, ended (and its driver stopped) on drop.
pub struct Browser {
    driver: Child,
    endpoint: String,
    session: String,
}

impl Browser {
    /// Starts `chromedriver` on a free port and a headless Chromium session in it.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (build-support/scripts/test.sh installs chromium-driver)");
        let mut browser = Self {
            driver,
            endpoint: format!("127.0.0.1:{port}"),
            session: String::new(),
        };
        // Ready, or gone: a driver that cannot start exits, and says how.
        while !browser
            .try_call("GET", "/status", None)
            .is_some_and(|v| v["ready"] == true)
        {
            if let Ok(Some(status)) = browser.driver.try_wait() {
                panic!("chromedriver exited before it was ready: {status}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let capabilities = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1400,1000"],
            },
        }}});
        let session = browser.call("POST", "/session", Some(capabilities));
        browser.session = session["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        browser
    }

    /// Opens `url`.
    pub fn open(&self, url: &str) {
        self.call("POST", &self.path("/url"), Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body; `return` gives its value) in the page.
    pub fn run(&self, script: &str) -> Value {
        let body = json!({ "script": script, "args": [] });
        self.call("POST", &self.path("/execute/sync"), Some(body))
    }

    /// Runs `script` until it returns something truthy, and returns that.
    ///
    /// # Panics
    ///
    /// When it does not within minutes, with `what` in the message.
    pub fn wait(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let value = self.run(script);
            let truthy = !matches!(value, Value::Null | Value::Bool(false))
                && value != json!("")
                && value != json!(0);
            if truthy {
                return value;
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out waiting until {what}: the page shows {}",
                    self.run("return document.body.innerText")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    /// `method path` with `body`: the answer's `value`.
    ///
    /// # Panics
    ///
    /// When the driver answers with an error.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_call(method, path, body.clone())
            .unwrap_or_else(|| panic!("chromedriver refused {method} {path} {body:?}"))
    }

    fn try_call(&self, method: &str, path: &str, body: Option<Value>) -> Option<Value> {
        let mut stream = TcpStream::connect(&self.endpoint).ok()?;
        // Generous: a page's script takes a while on a loaded machine.
        stream.set_read_timeout(Some(PATIENCE)).ok()?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            self.endpoint,
            body.len()
        );
        stream.write_all(request.as_bytes()).ok()?;
        // chromedriver keeps the connection open after its answer: read by its length.
        let mut answer = Vec::new();
        let mut buffer = [0_u8; 8192];
        let (head_len, length) = loop {
            let n = stream.read(&mut buffer).ok()?;
            if n == 0 {
                return None;
            }
            answer.extend_from_slice(&buffer[..n]);
            if let Some(at) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&answer[..at]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|n| n.trim().parse::<usize>().ok())?;
                break (at + 4, length);
            }
        };
        while answer.len() < head_len + length {
            let n = stream.read(&mut buffer).ok()?;
            if n == 0 {
                return None;
            }
            answer.extend_from_slice(&buffer[..n]);
        }
        let status_ok = answer.starts_with(b"HTTP/1.1 200");
        let value: Value = serde_json::from_slice(&answer[head_len..head_len + length]).ok()?;
        assert!(status_ok, "chromedriver: {method} {path}: {value}");
        Some(value["value"].clone())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let _ = self.try_call("DELETE", &path, None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
