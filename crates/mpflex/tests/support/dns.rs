//! A DNS responder for the tests and a batch of real `dig` queries against it.

use std::net::UdpSocket;

use super::{in_ns, run_in, Lab};

/// The address every answer names.
pub const ANSWER: &str = "192.0.2.53";

/// A DNS responder on port 53 of namespace `ns` (all addresses, both families) that
/// answers every A query with [`ANSWER`] (one answer pointing back at the question's
/// name; RFC 1035 §4.1).
pub fn start_dns(ns: &str) {
    let sock = in_ns(ns, || UdpSocket::bind(("::", 53)).expect("dns socket"));
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            if n < 12 {
                continue;
            }
            let mut r = buf[..n].to_vec();
            r[2] |= 0x80;
            r[3] = 0;
            r[7] = 1;
            // Drop any additional records (dig's EDNS OPT) so the answer follows the
            // question directly.
            let end = question_end(&r).unwrap_or(r.len());
            r.truncate(end);
            r[10] = 0;
            r[11] = 0;
            r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 53]);
            let _ = sock.send_to(&r, from);
        }
    });
}

/// Where the first question of a DNS message ends.
fn question_end(m: &[u8]) -> Option<usize> {
    let mut i = 12;
    while *m.get(i)? != 0 {
        i += 1 + usize::from(m[i]);
    }
    Some(i + 5)
}

/// How many of `n` names (`<prefix><i>.example.test`) dig, in namespace `ns`, got answered
/// with [`ANSWER`] from `server` (port 53; a query is retried as a stub would).
pub fn dig_answered(lab: &Lab, ns: &str, server: &str, n: usize, prefix: &str) -> String {
    let batch = lab.dir.join(format!("queries-{prefix}"));
    let lines: String = (0..n).map(|i| format!("{prefix}{i}.example.test\n")).collect();
    std::fs::write(&batch, lines).unwrap();
    run_in(
        ns,
        &format!(
            "dig @{server} -p 53 +short +tries=3 +timeout=1 -f {} | grep -c '^{ANSWER}$'",
            batch.display()
        ),
    )
}
