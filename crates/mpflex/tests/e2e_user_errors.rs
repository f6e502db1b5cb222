//! Mistakes a user makes, on loopback (no root needed): a port in use, a mangled key, a
//! server that is not running, a client the server does not know, a destination the ACL
//! refuses, a bad configuration key. Each gets one line that says what to change, logs
//! carry no colour codes when they go to a file, and a connection that closes before
//! saying anything (a port probe) is no warning. `mpflex status` finds the one running
//! process without `--addr`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mpflex");

/// A directory of its own for each test: configurations, logs and runtime files.
struct Dir(PathBuf);

impl Dir {
    fn new(test: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("mpflex-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `mpflex ARGS`, stderr to `<log>.log`, its runtime files in this directory.
    fn spawn(&self, args: &[&str], log: &str) -> Proc {
        let path = self.0.join(format!("{log}.log"));
        let f = std::fs::File::create(&path).unwrap();
        let child = self.cmd(args).stdout(f.try_clone().unwrap()).stderr(f).spawn().unwrap();
        Proc { child, log: path }
    }

    /// `mpflex ARGS` run to completion.
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).stdin(Stdio::null()).output().unwrap()
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("RUST_LOG", "info")
            .env("MPFLEX_RUNTIME_DIR", self.0.join("run"));
        c
    }

    /// [`Dir::spawn`] as a systemd unit with `RuntimeDirectory=…/<sub>` starts it.
    fn spawn_as_unit(&self, args: &[&str], sub: &str) -> Proc {
        let path = self.0.join(format!("{sub}.log"));
        let f = std::fs::File::create(&path).unwrap();
        let runtime = self.0.join("run").join(sub);
        std::fs::create_dir_all(&runtime).unwrap();
        let child = self
            .cmd(args)
            .env_remove("MPFLEX_RUNTIME_DIR")
            .env_remove("XDG_RUNTIME_DIR")
            .env("RUNTIME_DIRECTORY", runtime)
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap();
        Proc { child, log: path }
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log contains `what`; the log, or a panic showing it.
    fn wait_log(&self, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = self.log();
            if log.contains(what) {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "no {what:?} in {}:\n{log}",
                self.log.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, as systemd stops a unit; waits for the exit.
    fn stop(&mut self) {
        // SAFETY: kill has no memory effects; the pid is our child's, not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A key pair from `mpflex keygen`: (private, public).
fn keys() -> (String, String) {
    let out = Command::new(BIN).arg("keygen").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let get = |k: &str| {
        text.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split('"').nth(1))
            .unwrap()
            .to_string()
    };
    (get("private_key"), get("public_key"))
}

fn server_toml(port: u16, private: &str, client_public: &str, extra: &str) -> String {
    format!(
        "listen = [\"127.0.0.1:{port}\"]\nprivate_key = \"{private}\"\n{extra}\n\
         [[clients]]\nname = \"laptop\"\npublic_key = \"{client_public}\"\n"
    )
}

fn client_toml(server_port: u16, socks: u16, private: &str, server_public: &str, extra: &str) -> String {
    format!(
        "private_key = \"{private}\"\nserver_public_key = \"{server_public}\"\n\
         socks_listen = \"127.0.0.1:{socks}\"\n{extra}\n\
         [[paths]]\nname = \"lo\"\nserver = \"127.0.0.1:{server_port}\"\n"
    )
}

/// The one line a failed start prints, checked: exit status 1, one line, no colour codes.
fn failed_start(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("mpflex: ")).collect();
    assert_eq!(lines.len(), 1, "want one error line:\n{err}");
    assert!(!err.contains('\x1b'), "colour codes in a pipe:\n{err:?}");
    lines[0].to_string()
}

#[test]
fn start_errors_name_the_fix() {
    let dir = Dir::new("start-errors");
    let (cpriv, _) = keys();
    let (_, spub) = keys();

    // A port in use.
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let cfg = dir.write("busy.toml", &client_toml(free_port(), port, &cpriv, &spub, ""));
    let line = failed_start(&dir.run(&["client", "--config", cfg.to_str().unwrap()]));
    assert!(
        line.contains(&format!("socks_listen: cannot listen on 127.0.0.1:{port}"))
            && line.contains("stop it")
            && line.contains("set another port in socks_listen"),
        "{line}"
    );
    drop(busy);

    // A key cut short when pasted.
    let cfg = dir.write(
        "key.toml",
        &client_toml(free_port(), free_port(), &cpriv, &spub[..20], ""),
    );
    let line = failed_start(&dir.run(&["client", "--config", cfg.to_str().unwrap()]));
    assert!(
        line.contains("server_public_key: a key is 32 bytes") && line.contains("as `mpflex keygen` prints it"),
        "{line}"
    );

    // A misspelt key.
    let cfg = dir.write(
        "typo.toml",
        &client_toml(free_port(), free_port(), &cpriv, &spub, "sheduler = \"ecf\""),
    );
    let line = failed_start(&dir.run(&["client", "--config", cfg.to_str().unwrap()]));
    assert!(
        line.contains("unknown field `sheduler`") && line.contains("`scheduler`"),
        "{line}"
    );

    // A tier name misspelt, and an interface pattern no name can match.
    for (extra, want) in [
        (
            "priority = \"bakup\"\n",
            "paths[0].priority: unknown tier \"bakup\" (expected primary, secondary or backup)",
        ),
        (
            "device = \"wlan[0\"\n",
            "paths[0].device: \"wlan[0\": '[' without its ']'",
        ),
    ] {
        let text = client_toml(free_port(), free_port(), &cpriv, &spub, "") + extra;
        let cfg = dir.write("path.toml", &text);
        let line = failed_start(&dir.run(&["client", "--config", cfg.to_str().unwrap()]));
        assert!(line.contains(want), "{line}");
    }

    // A file that is not there.
    let line = failed_start(&dir.run(&["server", "--config", "/nonexistent/server.toml"]));
    assert!(line.contains("cannot read config /nonexistent/server.toml"), "{line}");
}

#[test]
fn runtime_errors_name_the_fix_and_probes_are_no_warning() {
    let dir = Dir::new("runtime-errors");
    let (spriv, spub) = keys();
    let (cpriv, cpub) = keys();
    let (stranger, _) = keys();

    // No server running: the client says where it looked and what to check.
    let nowhere = free_port();
    let cfg = dir.write("c0.toml", &client_toml(nowhere, free_port(), &cpriv, &spub, ""));
    let client = dir.spawn(&["client", "--config", cfg.to_str().unwrap()], "no-server");
    let log = client.wait_log("cannot join");
    assert!(
        log.contains(&format!("cannot connect to 127.0.0.1:{nowhere}"))
            && log.contains("is `mpflex server` running with this address in its listen?"),
        "{log}"
    );
    drop(client);

    // A server with the default ACL (loopback destinations refused).
    let port = free_port();
    let scfg = dir.write("s.toml", &server_toml(port, &spriv, &cpub, ""));
    let server = dir.spawn(&["server", "--config", scfg.to_str().unwrap()], "server");
    server.wait_log("accepting paths");

    // Something that connects and closes at once (a readiness probe): no warning.
    drop(TcpStream::connect(("127.0.0.1", port)).unwrap());

    // A client whose key the server does not list.
    let cfg = dir.write("c1.toml", &client_toml(port, free_port(), &stranger, &spub, ""));
    let client = dir.spawn(&["client", "--config", cfg.to_str().unwrap()], "stranger");
    let log = client.wait_log("cannot join");
    assert!(
        log.contains("the server closed the handshake")
            && log.contains("this client's public key is in the server's [[clients]]"),
        "{log}"
    );
    server.wait_log("is not authorised");
    drop(client);

    // The listed client asks for a destination the ACL refuses: the application sees a
    // SOCKS failure, both logs say why and where to change it.
    let socks = free_port();
    let cfg = dir.write("c2.toml", &client_toml(port, socks, &cpriv, &spub, ""));
    let client = dir.spawn(&["client", "--config", cfg.to_str().unwrap()], "client");
    client.wait_log("path up");
    let mut s = TcpStream::connect(("127.0.0.1", socks)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Greeting (no authentication), then CONNECT 127.0.0.1:9.
    s.write_all(&[5, 1, 0]).unwrap();
    let mut greet = [0u8; 2];
    s.read_exact(&mut greet).unwrap();
    s.write_all(&[5, 1, 0, 1, 127, 0, 0, 1, 0, 9]).unwrap();
    // The reply (10 bytes) comes at once, as the stream opens without a round trip; the
    // refusal arrives as a reset after it.
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(
        rest.len() <= 8 + 2,
        "bytes arrived from a refused destination: {rest:?}"
    );
    let log = client.wait_log("refused by the server's [acl]");
    assert!(log.contains("stream to 127.0.0.1:9 refused"), "{log}");
    let slog = server.wait_log("stream refused");
    assert!(
        slog.contains("127.0.0.1 is loopback (acl.allow_loopback is false)")
            && slog.contains("the server's [acl] decides"),
        "{slog}"
    );

    for (what, log) in [("server", server.log()), ("client", client.log())] {
        assert!(!log.contains('\x1b'), "{what}: colour codes in a file:\n{log:?}");
    }
    let warnings: Vec<&str> = slog.lines().filter(|l| l.contains("WARN")).collect();
    assert!(
        warnings.iter().all(|l| l.contains("is not authorised")),
        "the server warned about more than the stranger: {warnings:#?}"
    );
}

/// Runs `mpflex status --json` (in the test directory's runtime directory): (success,
/// output).
fn status(dir: &Dir) -> (bool, String) {
    let out = dir.run(&["status", "--json"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Waits until the runtime files are exactly those of `procs`.
fn wait_registered(dir: &Path, procs: &[&Proc]) {
    let want: std::collections::BTreeSet<String> = procs.iter().map(|p| format!("{}.json", p.child.id())).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let have: std::collections::BTreeSet<String> = std::fs::read_dir(dir.join("run"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .filter(|n| n.ends_with(".json"))
                    .collect()
            })
            .unwrap_or_default();
        if have == want {
            return;
        }
        assert!(Instant::now() < deadline, "runtime files {have:?}, want {want:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn status_finds_the_one_running_process() {
    let dir = Dir::new("status-finds");
    let (spriv, spub) = keys();
    let (cpriv, cpub) = keys();
    let port = free_port();
    let (sst, cst) = (free_port(), free_port());

    let scfg = dir.write(
        "s.toml",
        &server_toml(port, &spriv, &cpub, &format!("status_listen = \"127.0.0.1:{sst}\"")),
    );
    let mut server = dir.spawn(&["server", "--config", scfg.to_str().unwrap()], "server");
    wait_registered(&dir.0, &[&server]);
    let (ok, text) = status(&dir);
    assert!(ok && text.contains("\"role\": \"server\""), "{text}");

    let ccfg = dir.write(
        "c.toml",
        &client_toml(
            port,
            free_port(),
            &cpriv,
            &spub,
            &format!("status_listen = \"0.0.0.0:{cst}\""),
        ),
    );
    let mut client = dir.spawn(&["client", "--config", ccfg.to_str().unwrap()], "client");
    wait_registered(&dir.0, &[&server, &client]);
    let (ok, text) = status(&dir);
    assert!(
        !ok && text.contains("2 mpflex processes run here")
            && text.contains(&format!("127.0.0.1:{cst}"))
            && text.contains("--addr"),
        "{text}"
    );

    // A clean stop takes the client's file away; the server is the one left.
    client.stop();
    let (ok, text) = status(&dir);
    assert!(ok && text.contains("\"role\": \"server\""), "{text}");

    // A killed process leaves its file, which no longer counts.
    let _ = server.child.kill();
    let _ = server.child.wait();
    let (ok, text) = status(&dir);
    assert!(
        !ok && text.contains("no running mpflex client or server found here") && text.contains("--addr"),
        "{text}"
    );
    // The next process to start sweeps it; one listening on 0.0.0.0 is asked on loopback.
    let client = dir.spawn(&["client", "--config", ccfg.to_str().unwrap()], "client2");
    wait_registered(&dir.0, &[&client]);
    let (ok, text) = status(&dir);
    assert!(ok && text.contains("\"role\": \"client\""), "{text}");
    drop(client);

    // A server as the packaged unit runs it: its file in the unit's runtime directory, one
    // level below the directory `status` reads.
    let server = dir.spawn_as_unit(&["server", "--config", scfg.to_str().unwrap()], "server");
    let file = dir.0.join("run/server").join(format!("{}.json", server.child.id()));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !file.exists() {
        assert!(Instant::now() < deadline, "no {}", file.display());
        std::thread::sleep(Duration::from_millis(50));
    }
    let (ok, text) = status(&dir);
    assert!(ok && text.contains("\"role\": \"server\""), "{text}");
}
