//! Transfers through the lab's client: curl downloads and uploads through SOCKS5, with
//! the origin's expected hashes.

use std::path::{Path, PathBuf};

use super::*;

impl Lab {
    fn curl(&self, extra: &[&str]) -> std::process::Output {
        let mut args = vec![
            "netns",
            "exec",
            &self.topo.client_ns,
            "curl",
            "-sS",
            "--max-time",
            "120",
            "--socks5-hostname",
        ];
        let proxy = format!("127.0.0.1:{SOCKS_PORT}");
        args.push(&proxy);
        args.extend_from_slice(extra);
        Command::new("ip").args(&args).output().unwrap()
    }

    /// Downloads `n` bytes with curl through mpflex (SOCKS5); returns (sha256 of what
    /// arrived, expected sha256). When curl fails, the first string says how, so an
    /// `assert_eq!` on the pair shows it.
    pub fn download(&self, n: u64) -> (String, String) {
        (self.fetch(n), self.expected_sha256(n))
    }

    /// Downloads the origin's first `n` bytes with curl through mpflex; returns their
    /// sha256 (or, when curl failed, a sentence saying how).
    pub fn fetch(&self, n: u64) -> String {
        let url = format!("http://127.0.0.1:{ORIGIN_PORT}/bytes/{n}");
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "set -o pipefail; ip netns exec {} curl -sS --max-time 120 --socks5-hostname 127.0.0.1:{SOCKS_PORT} {url} | sha256sum",
                self.topo.client_ns
            ))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if out.status.success() && stdout.len() >= 64 {
            stdout[..64].to_string()
        } else {
            format!(
                "curl failed ({}): {} [sha256 of what arrived: {}]",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                stdout.get(..64).unwrap_or("")
            )
        }
    }

    /// sha256 of the origin's first `n` bytes, asked of the origin directly (inside the
    /// server namespace), so the expectation never depends on mpflex.
    pub fn expected_sha256(&self, n: u64) -> String {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.topo.server_ns,
                "curl",
                "-sS",
                "--max-time",
                "60",
                &format!("http://127.0.0.1:{ORIGIN_PORT}/sha256/{n}"),
            ])
            .output()
            .unwrap();
        let sha = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert_eq!(sha.len(), 64, "origin gave no sha256 for {n}: {out:?}");
        sha
    }

    /// Same as `download`, returning only the sha256 of what arrived.
    pub fn curl_download(&self, n: u64) -> String {
        self.download(n).0
    }

    /// Uploads `n` random bytes; returns (local sha256, sha256 the origin saw).
    pub fn upload(&self, n: usize) -> (String, String) {
        let (path, local) = self.prepare_upload(n);
        (local, self.upload_file(&path))
    }

    /// Writes `n` pseudo-random bytes to a file in the lab's directory; returns the file
    /// and its sha256.
    pub fn prepare_upload(&self, n: usize) -> (PathBuf, String) {
        use rand::{RngCore, SeedableRng};
        use sha2::Digest;
        let mut body = vec![0u8; n];
        rand::rngs::StdRng::seed_from_u64(n as u64).fill_bytes(&mut body);
        let path = self.dir.join(format!("upload-{n}.bin"));
        std::fs::write(&path, &body).unwrap();
        (path, hex::encode(sha2::Sha256::digest(&body)))
    }

    /// POSTs a file with curl through mpflex; returns the sha256 the origin computed (or,
    /// when curl failed, a sentence saying how).
    pub fn curl_upload(&self, n: usize) -> String {
        self.upload(n).1
    }

    pub fn upload_file(&self, path: &Path) -> String {
        let out = self.curl(&[
            "--data-binary",
            &format!("@{}", path.display()),
            "-H",
            "Content-Type: application/octet-stream",
            &format!("http://127.0.0.1:{ORIGIN_PORT}/upload"),
        ]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        match text.split_whitespace().collect::<Vec<_>>()[..] {
            [sha, got] if out.status.success() && got == len.to_string() => sha.to_string(),
            _ => format!(
                "curl failed ({}): {} [origin said {text:?}, {len} bytes sent]",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }
    }
}

/// A blocking SOCKS5 CONNECT to `host:port`; returns the stream after the reply.
pub fn socks_connect(proxy: SocketAddr, host: &str, port: u16) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect(proxy)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    s.write_all(&[5, 1, 0])?;
    let mut r = [0u8; 2];
    s.read_exact(&mut r)?;
    let mut req = vec![5, 1, 0, 3, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req)?;
    let mut rep = [0u8; 10];
    s.read_exact(&mut rep)?;
    if rep[1] != 0 {
        return Err(std::io::Error::other(format!("SOCKS reply {}", rep[1])));
    }
    Ok(s)
}
