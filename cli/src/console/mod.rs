//! `warren console`: a local web page on the contracts' live queues and dead letters: each
//! queue's depth and consumers, the dead letters of every dead-letter queue grouped by failure
//! (`dead_letters::Fingerprint`), and, when started with `--allow-changes`, redrive of a
//! group through the same code as `warren dlq redrive`.
//!
//! Safe by default: bound to 127.0.0.1, read-only unless told otherwise, every state-changing
//! request carrying the process's token (served inside the page, which another site cannot
//! read), every request naming this server as its `Host` (a rebound DNS name cannot reach
//! it), and the broker's credentials never in a page or an answer.

mod diagram;
mod http;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use tokio::net::TcpListener;

use crate::{Failure, ProjectRoot, RenderStyle};
use http::{Handler, Request, Response};
use state::Console;

/// The page, served as it is but for its token.
const PAGE: &str = include_str!("page.html");

/// `warren console` arguments.
#[derive(Debug, Args)]
pub(crate) struct ConsoleArgs {
    /// The contract files, usually `warren.yaml`.
    #[arg(required = true)]
    contracts: Vec<PathBuf>,
    /// The broker; by default `AMQP_URL`, else amqp://guest:guest@127.0.0.1:5672/%2f.
    #[arg(long)]
    url: Option<String>,
    /// The prefix the deployment's names carry (`Topology::namespaced`).
    #[arg(long, default_value = "")]
    namespace: String,
    /// Where to serve the page. Anything but a loopback address lets other machines read
    /// the dead letters (and, with `--allow-changes`, redrive them).
    #[arg(long, default_value = "127.0.0.1:7890", value_name = "ADDRESS")]
    bind: SocketAddr,
    /// Let the page redrive dead letters; read-only otherwise.
    #[arg(long)]
    allow_changes: bool,
    /// Leave a message redriven this many times already in the dead-letter queue, as
    /// `warren dlq redrive --max-redrives` does.
    #[arg(long, default_value_t = 3, value_name = "N")]
    max_redrives: u32,
    /// The broker's management API (`http://user:password@host:15672`), where the rates and
    /// unacknowledged counts come from. By default the `--url` host on port 15672, with its
    /// credentials; without it the page shows what passive declares give.
    #[arg(long, value_name = "URL")]
    management: Option<String>,
    /// A worker's health endpoint, shown beside the queues it consumes (`orders=http://
    /// 10.0.0.7:9464/health`: warren's `WorkerHealth` as JSON); repeat for each worker.
    #[arg(long = "health", value_name = "NAME=URL", value_parser = health_endpoint)]
    health: Vec<(String, String)>,
}

/// `NAME=http://…`.
fn health_endpoint(text: &str) -> Result<(String, String), String> {
    let (name, url) = text
        .split_once('=')
        .ok_or("expected NAME=URL, as orders=http://127.0.0.1:9464/health")?;
    if !url.starts_with("http://") {
        return Err(format!("`{url}`: only http:// health endpoints are read"));
    }
    Ok((name.to_owned(), url.to_owned()))
}

/// Runs `warren console` until interrupted.
pub(crate) fn run(
    args: ConsoleArgs,
    project: &ProjectRoot,
    style: RenderStyle,
) -> Result<(), Failure> {
    let mut topologies = Vec::new();
    let mut diagrams = Vec::new();
    for contract in &args.contracts {
        let checked = crate::checked(contract, project, style)?;
        let topology = checked.contract.topology.namespaced(&args.namespace);
        let mut drawn = diagram::diagram(&checked.contract, &topology);
        drawn["contract"] = serde_json::json!(crate::shown(contract));
        diagrams.push(drawn);
        topologies.push(topology);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::usage(format!("error: cannot start the runtime: {e}\n")))?;
    let diagrams = serde_json::json!({ "diagrams": diagrams });
    runtime.block_on(serve(args, topologies, diagrams))
}

async fn serve(
    args: ConsoleArgs,
    topologies: Vec<warren_runtime::Topology>,
    diagrams: serde_json::Value,
) -> Result<(), Failure> {
    let url = crate::broker_url(args.url.as_deref());
    let connection = warren_runtime::Connection::connect(&url, "warren console")
        .await
        .map_err(|e| Failure::usage(format!("error: cannot connect to the broker: {e}\n")))?;
    let listener = TcpListener::bind(args.bind)
        .await
        .map_err(|e| Failure::usage(format!("error: cannot serve on {}: {e}\n", args.bind)))?;
    let address = listener
        .local_addr()
        .map_err(|e| Failure::usage(format!("error: {e}\n")))?;
    let token = token().map_err(|e| Failure::usage(format!("error: no token: {e}\n")))?;
    // Unusable settings are said at once; an API that does not answer only loses the rates.
    let management = crate::management_api(&url, args.management.as_deref())
        .map_err(|e| Failure::usage(format!("error: {e}\n")))?;
    let console = Arc::new(Console::new(
        connection,
        management,
        topologies,
        args.health,
        state::Changes {
            allowed: args.allow_changes,
            max_redrives: args.max_redrives,
        },
    ));
    let mode = if args.allow_changes {
        "redrive and purge allowed"
    } else {
        "read-only"
    };
    println!("warren console: http://{address}/ ({mode}; Ctrl-C to stop)");
    let site = Arc::new(Site {
        console,
        diagrams,
        token,
        address,
    });
    let handler: Handler = Arc::new(move |request| {
        let site = site.clone();
        Box::pin(async move { site.answer(request).await })
    });
    tokio::select! {
        () = http::serve(listener, handler) => Ok(()),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// The console with what guards it.
struct Site {
    console: Arc<Console>,
    /// Each contract's diagram, drawn at start.
    diagrams: serde_json::Value,
    /// What every state-changing request carries.
    token: String,
    address: SocketAddr,
}

impl Site {
    async fn answer(&self, request: Request) -> Response {
        if !names_this_server(request.host.as_deref(), self.address) {
            return Response::error(421, "this console answers to its own address only");
        }
        // Every API request carries the token: another site's page can make the browser send
        // a request here, but not with a header of its own, nor read the token.
        if request.path.starts_with("/api/") && request.token.as_deref() != Some(&self.token) {
            return Response::error(403, "the request does not carry this console's token");
        }
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/") => match token() {
                Ok(nonce) => Response {
                    status: 200,
                    content_type: "text/html; charset=utf-8",
                    body: PAGE
                        .replace("{{TOKEN}}", &self.token)
                        .replace("{{NONCE}}", &nonce)
                        .into_bytes(),
                    nonce: Some(nonce),
                },
                Err(error) => Response::error(500, &format!("no nonce: {error}")),
            },
            ("GET", "/api/queues") => Response::json(200, &self.console.queues().await),
            ("GET", "/api/workers") => Response::json(200, &self.console.workers().await),
            ("GET", "/api/diagrams") => Response::json(200, &self.diagrams),
            ("GET", "/api/redrives") => Response::json(200, &self.console.redrives()),
            ("GET", "/api/dead-letters") => match self.console.dead_letters().await {
                Ok(value) => Response::json(200, &value),
                Err(error) => Response::error(502, &error),
            },
            ("POST", "/api/redrive") => self.redrive(&request).await,
            ("POST", "/api/purge") => self.purge(&request).await,
            ("POST", "/api/peek") => match state::GroupRequest::parse(&request.body) {
                Some(asked) => match self.console.peek(&asked).await {
                    Ok(value) => Response::json(200, &value),
                    Err((status, error)) => Response::error(status, &error),
                },
                None => Response::error(400, "expected {\"queue\", \"group\"}"),
            },
            ("GET" | "POST", _) => Response::error(404, "no such page"),
            _ => Response::error(405, "GET and POST only"),
        }
    }

    /// Why `request` may not change anything, if it may not: the console is read-only, or
    /// the request comes from another site's page.
    fn refusal(&self, request: &Request) -> Option<Response> {
        if !self.console.allows_changes() {
            return Some(Response::error(
                403,
                "the console is read-only: start it with --allow-changes to redrive or purge",
            ));
        }
        let same_site = format!("http://{}", request.host.as_deref().unwrap_or_default());
        if request.origin.as_deref().is_some_and(|o| o != same_site) {
            return Some(Response::error(403, "a request from another site"));
        }
        None
    }

    async fn purge(&self, request: &Request) -> Response {
        if let Some(refused) = self.refusal(request) {
            return refused;
        }
        let asked: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let (Some(queue), Some(depth)) = (asked["queue"].as_str(), asked["depth"].as_u64()) else {
            return Response::error(400, "expected {\"queue\", \"depth\"}");
        };
        match self.console.purge(queue, depth).await {
            Ok(value) => Response::json(200, &value),
            Err((status, error)) => Response::error(status, &error),
        }
    }

    async fn redrive(&self, request: &Request) -> Response {
        if let Some(refused) = self.refusal(request) {
            return refused;
        }
        let Some(asked) = state::GroupRequest::parse(&request.body) else {
            return Response::error(400, "expected {\"queue\", \"group\", \"dry_run\"}");
        };
        let answer = if asked.dry_run {
            self.console.dry_run(&asked).await
        } else {
            self.console
                .start_redrive(asked)
                .map(|number| serde_json::json!({ "redrive": number }))
        };
        match answer {
            Ok(value) => Response::json(200, &value),
            Err((status, error)) => Response::error(status, &error),
        }
    }
}

/// Whether `host` names this server: `localhost` or an IP address (the bound one, unless it is
/// bound to every address), with any port or none (an SSH tunnel or a proxy forwards from
/// ports of its own). A DNS name is refused: a name an attacker's DNS rebinds to this address
/// would let their page read this one and its token.
fn names_this_server(host: Option<&str>, address: SocketAddr) -> bool {
    let Some(host) = host else {
        return false;
    };
    // `name`, `name:port`, `[v6]` or `[v6]:port`.
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    let bound = address.ip();
    if name == "localhost" {
        return bound.is_loopback() || bound.is_unspecified();
    }
    match name.parse::<std::net::IpAddr>() {
        Ok(ip) => bound.is_unspecified() || ip == bound,
        Err(_) => false,
    }
}

/// 128 random bits as hex, from the operating system.
fn token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0_u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::names_this_server;

    #[test]
    fn only_localhost_or_this_server_s_address_is_a_host_of_ours() {
        let loopback = "127.0.0.1:7890".parse().expect("an address");
        for host in [
            "127.0.0.1:7890",
            "localhost:7890",
            "localhost:8080",
            "localhost",
            "127.0.0.1",
        ] {
            assert!(names_this_server(Some(host), loopback), "{host}");
        }
        for host in [
            "evil.example:7890",
            "10.0.0.7:7890",
            "127.0.0.1.evil.example",
            "",
        ] {
            assert!(!names_this_server(Some(host), loopback), "{host}");
        }
        assert!(!names_this_server(None, loopback));
        let everywhere = "0.0.0.0:7890".parse().expect("an address");
        assert!(names_this_server(Some("10.0.0.7:7890"), everywhere));
        assert!(names_this_server(Some("[::1]:7890"), everywhere));
        assert!(
            !names_this_server(Some("rebound.example:7890"), everywhere),
            "a DNS name never: it may be rebound"
        );
    }
}
