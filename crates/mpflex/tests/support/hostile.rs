//! What the hostile-client tests share: the server's `/metrics` counters, an honest join
//! timed in-process, and room for many descriptors in the test process.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::*;

/// The server's `/metrics` text, scraped with curl inside its namespace.
pub fn server_metrics(lab: &Lab) -> String {
    let url = format!("http://127.0.0.1:{SERVER_STATUS}/metrics");
    let out = mpflex_netns::command(&lab.topo.server_ns, "curl")
        .args(["-sS", "--max-time", "5", &url])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of the sample `name` (the whole name up to its labels) in a metrics text,
/// summed over its label sets; 0 if absent.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(' ') || r.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// One join as the lab's client would make it (preamble, Noise handshake, Hello, the
/// server's answer), from `source` if given; how long it took.
pub async fn timed_join(
    server: SocketAddr,
    source: Option<std::net::IpAddr>,
    client_priv: [u8; 32],
    server_pub: [u8; 32],
) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    let sock = tokio::net::TcpSocket::new_v4()?;
    if let Some(ip) = source {
        sock.bind(SocketAddr::new(ip, 0))?;
    }
    let mut s = sock.connect(server).await?;
    let pre = mpflex_wire::Route::Any.encode();
    let t = mpflex::crypto::client_handshake(&mut s, &pre, &client_priv, &server_pub).await?;
    let token: [u8; 16] = rand::random();
    mpflex::pathconn::join_as_client(&mut s, &t, token, 0).await?;
    Ok(t0.elapsed())
}

/// Raises this process's soft descriptor limit to its hard one; returns the limit.
pub fn raise_nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct given.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur = r.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
    }
    r.rlim_cur
}

/// A key written as `mpflex keygen` prints it, as bytes.
pub fn key(s: &str) -> [u8; 32] {
    mpflex::crypto::decode_key(s, "test").unwrap()
}

/// The HTTP status code the server's status listener gives `path` asked with `Host: host`.
pub fn status_code_with_host(lab: &Lab, path: &str, host: &str) -> String {
    let url = format!("http://127.0.0.1:{SERVER_STATUS}{path}");
    let out = mpflex_netns::command(&lab.topo.server_ns, "curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "-H"])
        .arg(format!("Host: {host}"))
        .arg(&url)
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
