//! The TUN ingress: a whole host's (or LAN's) traffic into the session, whatever the
//! protocol, without firewall rules.

pub mod routes;
